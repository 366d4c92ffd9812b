"""Consolidation by meaning.

Duplicate groups found and merged, every change logged and undoable.
"""
