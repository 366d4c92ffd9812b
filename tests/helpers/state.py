"""Where entries live and what the change log says: helpers for the job and undo tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from memkeeper import MemoryStore
from memkeeper.paths import cold_path_for


def locations(db_path: Path) -> dict[str, list[str]]:
    """memory id -> the files it is in (read straight from the files, not through memkeeper)."""
    found: dict[str, list[str]] = {}
    conn = sqlite3.connect(db_path)
    for (memory_id,) in conn.execute("SELECT id FROM memories"):
        found.setdefault(memory_id, []).append("hot")
    conn.close()
    cold = cold_path_for(db_path)
    if cold.exists():
        conn = sqlite3.connect(cold)
        for (memory_id,) in conn.execute("SELECT id FROM cold_memories"):
            found.setdefault(memory_id, []).append("cold")
        conn.close()
    return found


def current_images(store: MemoryStore) -> dict[str, dict[str, Any]]:
    """Every memory's stored image, hot and cold."""
    return {memory.id: memory.to_image() for memory in store.list_memories()}


def replay(store: MemoryStore) -> dict[str, dict[str, Any]]:
    """The state the change log describes: each memory's latest after image.

    Also checks the chain: each row's before image is the previous row's after image.
    """
    state: dict[str, dict[str, Any] | None] = {}
    for change in store.changes():
        if change.memory_id is None:
            continue
        previous = state.get(change.memory_id)
        assert change.before == previous, f"broken chain at change #{change.id}"
        state[change.memory_id] = change.after
    return {memory_id: image for memory_id, image in state.items() if image is not None}
