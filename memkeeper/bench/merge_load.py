"""The merge bench: U users with a few duplicates each, and the time of the ``merge`` job.

``memkeeper bench --merge`` (README "Performance"). Each user gets, in one namespace:

* 8 distinct facts, each with its own random unit vector (unrelated: cosine about 0);
* a preference and a note saying the same thing in other widths, case and punctuation
  (``Reports as PDF, user 7`` / ``REPORTS AS ＰＤＦ — user 7!``): a duplicate found by
  normalization;
* two facts under different keys whose vectors have a cosine of about 0.95: a duplicate
  found by the embeddings;
* every 10th user, a pinned copy of the preference under another key (never merged).

So every user holds 2 groups and 2 entries to supersede. Rows are made in Python and written
with ``executemany`` in one transaction per table, vectors of the configured model and
dimensions with the hash of their text, so they are current. The first run is a full scan
(no merge ran before); the second right after finds nothing to look at. Both are timed, and
the outcome is checked against what was generated.
"""

# Full-width characters are examples here on purpose.
# ruff: noqa: RUF001, RUF002

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memkeeper.clock import to_db
from memkeeper.config import Config
from memkeeper.maintenance.runner import run_once
from memkeeper.storage.columns import MEMORY_COLUMNS
from memkeeper.storage.transaction import immediate_transaction
from memkeeper.storage.vectors import embedding_text, pack, text_hash
from memkeeper.store import MemoryStore

NOW = datetime(2027, 1, 1, 3, 0, tzinfo=UTC)
DISTINCT = 8
NEAR_NOISE = 0.33
"""Noise added to a near-duplicate's vector (per-dimension scale / sqrt(dims)): cosine ≈ 0.95."""


def _rows(users: int, dims: int, model: str, seed: int) -> tuple[list[tuple], list[tuple]]:
    """The memories and vectors of every user (the same seed, the same rows)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    created = to_db(datetime(2026, 6, 1, tzinfo=UTC))
    memories: list[tuple] = []
    vectors: list[tuple] = []

    def unit(vector: Any) -> Any:
        return vector / np.linalg.norm(vector)

    def add(uid: str, n: int, kind: str, key: str | None, value: str, vec: Any, pin: int) -> None:
        memory_id = f"{uid}-{n:02d}"
        row = {
            "id": memory_id,
            "user_id": uid,
            "namespace": "",
            "kind": kind,
            "key": key,
            "value": value,
            "source": f"bench:{n}",
            "confidence": round(0.6 + 0.03 * n, 2),
            "state": "active",
            "pinned": pin,
            "ttl_days": None,
            "created_at": created,
            "updated_at": created,
            "last_accessed_at": None,
            "access_count": 0,
            "state_since": created,
            "last_used_at": created,
        }
        memories.append(tuple(row[c] for c in MEMORY_COLUMNS))
        digest = text_hash(embedding_text(kind, key, value))
        vectors.append((memory_id, model, dims, digest, pack(vec)))

    for user in range(users):
        uid = f"user{user:06d}"
        base = rng.standard_normal((DISTINCT + 2, dims)).astype(np.float32)
        for n in range(DISTINCT):
            add(uid, n, "fact", f"fact_{n}", f"Distinct fact {n} of {uid}", unit(base[n]), 0)
        same = unit(base[DISTINCT])
        add(uid, 8, "preference", "report_format", f"Reports as PDF, {uid}", same, 0)
        add(uid, 9, "note", None, f"REPORTS AS ＰＤＦ — {uid}!", same, 0)
        near = unit(base[DISTINCT + 1])
        noise = rng.standard_normal(dims).astype(np.float32) * NEAR_NOISE / np.sqrt(dims)
        add(uid, 10, "fact", "employer", f"Works at bank branch {user}", near, 0)
        add(uid, 11, "fact", "workplace", f"Employed at branch {user}", unit(near + noise), 0)
        if user % 10 == 0:
            add(uid, 12, "preference", "pinned_format", f"Reports as PDF, {uid}", same, 1)
    return memories, vectors


def build(path: Path, config: Config, users: int, seed: int) -> dict[str, Any]:
    """Create the database at ``path`` with ``users`` users; what was generated."""
    began = time.perf_counter()
    search = config.search
    memories, vectors = _rows(users, search.embedding_dimensions, search.embedding_model, seed)
    with MemoryStore(path, config=config) as store:
        storage = store.storage
        names = ", ".join(MEMORY_COLUMNS)
        marks = ", ".join("?" for _ in MEMORY_COLUMNS)
        with storage.lock, immediate_transaction(storage.hot):
            storage.hot.conn.executemany(
                f"INSERT INTO memories ({names}) VALUES ({marks})", memories
            )
        with storage.lock, immediate_transaction(storage.hot):
            storage.hot.conn.executemany(
                "INSERT INTO vectors (memory_id, model, dims, value_hash, vector)"
                " VALUES (?, ?, ?, ?, ?)",
                vectors,
            )
    return {
        "memories": len(memories),
        "vectors": len(vectors),
        "dimensions": search.embedding_dimensions,
        "seconds": round(time.perf_counter() - began, 3),
    }


@contextlib.contextmanager
def _directory(root: Path | None) -> Iterator[Path]:
    if root is not None:
        root.mkdir(parents=True, exist_ok=True)
        yield root
        return
    with tempfile.TemporaryDirectory(prefix="memkeeper-merge-bench-") as tmp:
        yield Path(tmp)


def _timed_run(store: MemoryStore) -> dict[str, Any]:
    began = time.perf_counter()
    (result,) = run_once(store, ["merge"], now=NOW).results
    seconds = time.perf_counter() - began
    if result.status != "ok":
        raise RuntimeError(f"the merge job ended {result.status}: {result.error}")
    return {
        "seconds": round(seconds, 3),
        "pairs": result.stats["pairs"],
        "groups": result.stats["groups"],
        "changes": result.total_changes,
    }


def run_merge_bench(
    users: int = 10_000, *, seed: int = 1, root: Path | None = None
) -> dict[str, Any]:
    """Build the database, run ``merge`` twice, check the outcome; the figures."""
    config = Config()
    with _directory(root) as directory:
        path = directory / "merge-bench.db"
        generated = build(path, config, users, seed)
        with MemoryStore(path, config=config) as store:
            first = _timed_run(store)
            second = _timed_run(store)
            with store.storage.lock:
                superseded = store.storage.hot.execute(
                    "SELECT count(*) FROM memories WHERE state = 'superseded'"
                ).fetchone()[0]
    return {
        "users": users,
        "database": generated,
        "first_run": first,
        "second_run": second,
        "groups": first["groups"],
        "expected_groups": 2 * users,
        "superseded": superseded,
        "expected_superseded": 2 * users,
        "users_per_second": round(users / first["seconds"], 1) if first["seconds"] else None,
    }


def summary(figures: dict[str, Any]) -> str:
    """The figures as a few lines for people."""
    first, second, db = figures["first_run"], figures["second_run"], figures["database"]
    return "\n".join(
        [
            f"merge bench: {figures['users']:,} users, {db['memories']:,} memories, "
            f"{db['vectors']:,} vectors of {db['dimensions']} dimensions "
            f"(generated in {db['seconds']:.1f} s)",
            f"first run (full scan):  {first['seconds']:.2f} s, {first['pairs']:,} "
            f"user/namespace pairs, {first['groups']:,} groups, {first['changes']:,} changes "
            f"({figures['users_per_second']:,} users/s)",
            f"second run (no change): {second['seconds']:.3f} s, {second['pairs']:,} pairs",
            f"groups {figures['groups']:,} of {figures['expected_groups']:,} expected; "
            f"superseded {figures['superseded']:,} of {figures['expected_superseded']:,}",
        ]
    )
