"""Two of search's promises checked through ``store.search`` itself, on the paths it takes:
another user's rows never change a user's scores (a small user, scored from its own rows),
and the first k hits do not depend on the limit for a user past the scan's threshold (the
FTS5 candidates, the caps, the chunked row reads)."""

from __future__ import annotations

import random
import shutil
from datetime import UTC, datetime
from pathlib import Path

from memkeeper import MemoryStore
from memkeeper.clock import fixed
from memkeeper.storage import keywords

NOW = fixed(datetime(2026, 6, 1, tzinfo=UTC))
WORDS = ["report", "deadline", "logo", "weekly", "invoice", "budget", "报告格式", "客户名单"]
QUERIES = ["weekly report", "logo deadline", "报告格式", "invoice budget report"]


def _snapshot(path: Path, copy: Path) -> Path:
    """A copy of the database as it is now (main file and WAL), for a search that marks hits
    used without touching the original."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copy(path, copy)
    if Path(f"{path}-wal").exists():
        shutil.copy(f"{path}-wal", f"{copy}-wal")
    return copy


def _scores(path: Path, user: str, query: str, limit: int = 10) -> list[tuple[str, float]]:
    with MemoryStore(path, clock=NOW) as store:
        return [(h.memory.id, h.score) for h in store.search(user, query, limit=limit)]


def test_another_users_rows_never_change_a_small_users_scores(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    rng = random.Random(7)
    with MemoryStore(db, clock=NOW) as store:
        for index in range(80):
            store.remember("alice", f"k{index}", " ".join(rng.sample(WORDS, 3)))
    before = {q: _scores(_snapshot(db, tmp_path / "a.db"), "alice", q) for q in QUERIES}
    with MemoryStore(db, clock=NOW) as store:
        for index in range(400):  # many rows sharing alice's words, some of them rare ones
            store.remember("bob", f"k{index}", " ".join(rng.sample(WORDS[:2], 2)))
            store.add_note("bob", "logo logo 报告格式 weekly")
    after = {q: _scores(_snapshot(db, tmp_path / "b.db"), "alice", q) for q in QUERIES}
    assert all(before[q] for q in QUERIES)
    assert after == before


def test_first_k_hits_do_not_depend_on_the_limit_for_a_large_user(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    rows = max(2000, int(getattr(keywords, "SCAN_BELOW_ROWS", 2000))) + 200
    rng = random.Random(11)
    with MemoryStore(db, clock=NOW) as store:
        for index in range(rows):
            store.remember("alice", f"k{index}", " ".join(rng.sample(WORDS, 2)) + f" #{index}")
    for query in QUERIES:
        results = {
            limit: [i for i, _ in _scores(_snapshot(db, tmp_path / "c.db"), "alice", query, limit)]
            for limit in (20, 1, 3, 7)
        }
        assert len(results[20]) == 20, query
        for limit in (1, 3, 7):
            assert results[limit] == results[20][:limit], (query, limit)
