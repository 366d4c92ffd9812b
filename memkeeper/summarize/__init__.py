"""Summarizing long conversation histories into notes (MemGPT-style), with an LLM."""
