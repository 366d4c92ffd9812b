"""Where entries live and what the change log says: helpers for the job and undo tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from helpers.databases import is_postgres, raw_rows
from memkeeper import MemoryStore
from memkeeper.paths import cold_path_for
from memkeeper.storage.uses import stamp_of


def locations(db_path: Path | str) -> dict[str, list[str]]:
    """memory id -> the files it is in (read straight from the files, not through memkeeper)."""
    found: dict[str, list[str]] = {}
    if is_postgres(db_path):  # one database: cold storage is its table cold_memories
        for table, where in (("memories", "hot"), ("cold_memories", "cold")):
            for row in raw_rows(db_path, table):
                found.setdefault(row["id"], []).append(where)
        return found
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


USE_FIELDS = ("last_accessed_at", "access_count", "last_used_at")
"""The fields a recall of an active entry updates in place (a use, not a logged change)."""


def _last_used(image: dict[str, Any]) -> str:
    accessed = image["last_accessed_at"]
    return accessed if accessed and accessed > image["updated_at"] else image["updated_at"]


def uses_between(
    previous: dict[str, Any] | None, before: dict[str, Any] | None, where: str = ""
) -> int:
    """How many in-place uses lie between a logged after image and the next before image.

    Asserts that nothing but the use fields differs, and that they moved as uses move them:
    ``access_count`` up by the number of uses, ``last_used_at`` derived as always.
    """
    if previous is None or before is None or before == previous:
        assert before == previous, f"broken chain {where}"
        return 0
    gap = before["access_count"] - previous["access_count"]
    rest = {k: v for k, v in before.items() if k not in USE_FIELDS}
    assert rest == {k: v for k, v in previous.items() if k not in USE_FIELDS}, f"broken {where}"
    assert gap > 0, f"use fields changed without a use {where}"
    assert before["last_used_at"] == _last_used(before), where
    return gap


def use_rows(store: MemoryStore) -> dict[str, list[dict[str, Any]]]:
    """memory id -> its rows in the ``uses`` table (one per UTC day), oldest first."""
    found: dict[str, list[dict[str, Any]]] = {}
    with store.storage.lock:
        for row in store.storage.hot.query("SELECT * FROM uses ORDER BY memory_id, day"):
            found.setdefault(row["memory_id"], []).append(
                # Times as stored everywhere else (uses holds times of `day`).
                {
                    **row,
                    "first_at": stamp_of(row["day"], row["first_at"]),
                    "last_at": stamp_of(row["day"], row["last_at"]),
                }
            )
    return found


def replay(store: MemoryStore) -> dict[str, dict[str, Any]]:
    """The state the change log and the counted uses describe, for every field a rule reads.

    Each memory's latest after image, with the uses recorded after it aggregated on top:
    ``access_count`` plus the uses not yet in a logged image, ``last_accessed_at`` the latest
    use (``last_used_at`` derived from it as always). A logged image's ``access_count``
    includes every use before it, so "the uses after it" are the table's total minus the
    uses seen between logged images.

    Also checks the chain: each row's before image is the previous row's after image, plus
    only the in-place uses between them (each such gap ending at a recorded use).
    """
    uses = use_rows(store)
    state: dict[str, dict[str, Any] | None] = {}
    absorbed: dict[str, int] = {}
    for change in store.changes():
        if change.memory_id is None:
            continue
        where = f"at change #{change.id}"
        gap = uses_between(state.get(change.memory_id), change.before, where)
        if gap:
            # The last use before the change: a counted one, or (a lagging clock) the last
            # logged one, which a use never moves back.
            accessed = change.before["last_accessed_at"]  # type: ignore[index]
            days = uses.get(change.memory_id, [])
            assert accessed == state[change.memory_id]["last_accessed_at"] or any(  # type: ignore[index]
                d["first_at"] <= accessed <= d["last_at"] for d in days
            ), where
            absorbed[change.memory_id] = absorbed.get(change.memory_id, 0) + gap
        state[change.memory_id] = change.after
    images = {memory_id: image for memory_id, image in state.items() if image is not None}
    assert set(uses) <= set(state), "uses of an entry the log does not hold"
    for memory_id, days in uses.items():
        extra = sum(d["count"] for d in days) - absorbed.get(memory_id, 0)
        assert extra >= 0, f"fewer uses counted than logged images hold for {memory_id}"
        image = images.get(memory_id)
        if image is None:  # removed by a logged change: every use was before it
            assert extra == 0, f"uses of {memory_id} after its removal"
        elif extra:
            assert image["state"] == "active", f"{memory_id} used in place while {image['state']}"
            latest = max(d["last_at"] for d in days)
            image = {
                **image,
                "access_count": image["access_count"] + extra,
                "last_accessed_at": max(image["last_accessed_at"] or "", latest),
            }
            image["last_used_at"] = _last_used(image)
            images[memory_id] = image
    return images
