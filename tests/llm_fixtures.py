"""What the summarize, extraction and parking tests share besides their fixtures (which are
in conftest.py: ``fake``, ``api_key`` and ``make_store``)."""

from __future__ import annotations

from collections.abc import Callable

from memkeeper import MemoryStore

KEY = "0123456789abcdef.TestKeySecretPart"
"""The key the tests put in ZHIPUAI_API_KEY (shaped like a real one: id.secret)."""

StoreFactory = Callable[..., MemoryStore]
"""``make_store(job={...}, **llm)``: a store whose config points at the fake LLM server."""
