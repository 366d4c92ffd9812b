"""The bench's measurements in the bench's own process: states, growth, rates, latencies."""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memkeeper.bench.generate import AGENT_FACTS, AGENT_PREFIX
from memkeeper.bench.workers import running_clock
from memkeeper.config import Config
from memkeeper.paths import cold_path_for
from memkeeper.store import MemoryStore


def _read_only(path: Path) -> str:
    return f"file:{path}?mode=ro"


def compare_states(ours: Path, floor: Path) -> dict[str, Any]:
    """Whether two databases hold the same ids in each hot state and the same cold ids."""
    conn = sqlite3.connect(_read_only(ours), uri=True)
    try:
        for name, path in (
            ("floor", floor),
            ("ours_cold", cold_path_for(ours)),
            ("floor_cold", cold_path_for(floor)),
        ):
            conn.execute(f"ATTACH ? AS {name}", [_read_only(path)])

        def missing(a: str, b: str) -> int:
            return conn.execute(f"SELECT count(*) FROM ({a} EXCEPT {b})").fetchone()[0]

        hot_ours = "SELECT id, state FROM main.memories"
        hot_floor = "SELECT id, state FROM floor.memories"
        cold_ours = "SELECT id FROM ours_cold.cold_memories"
        cold_floor = "SELECT id FROM floor_cold.cold_memories"
        differences = {
            "hot_only_memkeeper": missing(hot_ours, hot_floor),
            "hot_only_floor": missing(hot_floor, hot_ours),
            "cold_only_memkeeper": missing(cold_ours, cold_floor),
            "cold_only_floor": missing(cold_floor, cold_ours),
        }
        states = dict(
            conn.execute("SELECT state, count(*) FROM main.memories GROUP BY state").fetchall()
        )
        cold = conn.execute("SELECT count(*) FROM ours_cold.cold_memories").fetchone()[0]
        states["cold"] = cold
    finally:
        conn.close()
    return {"same": not any(differences.values()), "differences": differences, "states": states}


def used_bytes(path: Path, config: Config) -> tuple[int, int, int]:
    """Bytes in use (file pages minus free pages), the file's pages, and change-log rows,
    after folding the WAL back (each a plain read on a closed store's file)."""
    store = MemoryStore(path, config=config, create=False)
    try:
        store.storage.checkpoint()
        conn = store.storage.hot.conn
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        changes = conn.execute("SELECT count(*) FROM changes").fetchone()[0]
    finally:
        store.close()
    return (pages - free) * size, pages * size, changes


def growth_per_recall(path: Path, config: Config, now: datetime, recalls: int) -> dict[str, Any]:
    """Database growth per ``recall`` over ``recalls`` recalls of one agent's 40 keys."""
    used, size, changes = used_bytes(path, config)
    store = MemoryStore(path, config=config, clock=running_clock(now), actor="bench")
    try:
        for n in range(recalls):
            store.recall(f"{AGENT_PREFIX}agent-0", f"k{n % AGENT_FACTS}")
    finally:
        store.close()
    used_after, size_after, changes_after = used_bytes(path, config)
    return {
        "recalls": recalls,
        "bytes_per_recall": round((used_after - used) / recalls, 1),
        "file_bytes_per_recall": round((size_after - size) / recalls, 1),
        "change_rows_per_recall": round((changes_after - changes) / recalls, 3),
    }


def _rate(func: Callable[[int], Any], calls: int) -> float:
    began = time.perf_counter()
    for n in range(calls):
        func(n)
    return round(calls / (time.perf_counter() - began), 1)


def api_rates(path: Path, config: Config, now: datetime, calls: int) -> dict[str, Any]:
    """Calls per second of ``remember`` (new keys), ``recall`` (those keys) and ``search``,
    one process, one after the other."""
    store = MemoryStore(path, config=config, clock=running_clock(now), actor="bench")
    user = f"{AGENT_PREFIX}rate"
    try:
        remember = _rate(lambda n: store.remember(user, f"r{n}", f"value {n}"), calls)
        recall = _rate(lambda n: store.recall(user, f"r{n}"), calls)
        search: float | None = None
        method = getattr(store, "search", None)
        if callable(method):  # issue 11's search, once it exists
            try:
                search = _rate(lambda n: method(user, f"value {n}"), min(calls, 200))
            except Exception:  # a search that needs what the bench has not (a key): n/a
                search = None
    finally:
        store.close()
    return {"calls": calls, "remember": remember, "recall": recall, "search": search}


SEARCH_USER_ENTRIES = 500
SEARCH_WORDS = (
    "report",
    "pdf",
    "budget",
    "meeting",
    "tuesday",
    "river",
    "tea",
    "coffee",
    "client",
    "deadline",
    "logo",
    "cover",
    "summary",
    "outline",
    "invoice",
    "travel",
    "hotel",
    "python",
)


def fill_search_user(store: MemoryStore, user: str) -> None:
    """Give ``user`` the search measurements' 500 entries (words from SEARCH_WORDS)."""
    words = SEARCH_WORDS
    for n in range(SEARCH_USER_ENTRIES):
        text = " ".join(words[(n * k) % len(words)] for k in (1, 3, 7)) + f" #{n}"
        store.remember(user, f"s{n}", text, kind="preference" if n % 3 else "fact")


def search_query(n: int) -> str:
    """The ``n``-th query of the search measurements: two of SEARCH_WORDS."""
    words = SEARCH_WORDS
    return f"{words[n % len(words)]} {words[(n * 5) % len(words)]}"


def search_latency(path: Path, config: Config, now: datetime, searches: int) -> dict[str, Any]:
    """``search`` for a user with 500 entries: p50 / p99 / max per call, keyword signal only
    (the bench has no key, so no query embedding is made or timed), hits marked used."""
    store = MemoryStore(path, config=config, clock=running_clock(now), actor="bench")
    method = getattr(store, "search", None)
    if not callable(method):
        store.close()
        return {"searches": 0, "entries": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    user = f"{AGENT_PREFIX}search"
    try:
        fill_search_user(store, user)
        timings = []
        for n in range(searches):
            began = time.perf_counter()
            method(user, search_query(n))
            timings.append((time.perf_counter() - began) * 1000)
    finally:
        store.close()
    timings.sort()
    return {
        "searches": searches,
        "entries": SEARCH_USER_ENTRIES,
        "p50_ms": round(timings[len(timings) // 2], 2),
        "p99_ms": round(timings[min(len(timings) - 1, int(0.99 * len(timings)))], 2),
        "max_ms": round(timings[-1], 2),
    }


def keyword_index_bytes(path: Path) -> dict[str, Any]:
    """How many bytes the keyword index (the FTS5 tables) takes in the hot file."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        total = conn.execute("SELECT sum(pgsize) FROM dbstat").fetchone()[0] or 0
        fts = (
            conn.execute(
                "SELECT sum(pgsize) FROM dbstat WHERE name IN (SELECT name FROM sqlite_master"
                " WHERE name LIKE '%fts%')"
            ).fetchone()[0]
            or 0
        )
    finally:
        conn.close()
    return {"bytes": fts, "percent_of_file": round(100 * fts / total, 2) if total else None}


def quantile(ordered: Sequence[float], q: float) -> float:
    """The value at quantile ``q`` (0-1) of ``ordered`` (sorted, not empty), to 0.01: the
    bench's one definition of p50, p99 and the like."""
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def latency(results: Sequence[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """p50 / p99 / max over every agent's calls, the calls per second, and the errors."""
    values = sorted(v for result in results for v in result["latencies_ms"])
    errors: Counter[str] = Counter()
    for result in results:
        errors.update(result["errors"])

    return {
        "calls": len(values),
        "seconds": round(seconds, 3),
        "p50_ms": quantile(values, 0.50) if values else None,
        "p99_ms": quantile(values, 0.99) if values else None,
        "max_ms": round(values[-1], 2) if values else None,
        "errors": sum(errors.values()),
        "error_samples": [text for text, _ in errors.most_common(3)],
    }
