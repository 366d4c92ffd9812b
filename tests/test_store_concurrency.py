"""Several processes writing one database at once lose nothing (seed 000 §6.1-6.2).

Each worker is a real Python process with its own MemoryStore on the same file. They open
the store, signal that they are ready, and start writing together when a "go" file appears,
so their writes really overlap.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers import change_rows, raw_rows
from helpers.locks import integrity

from memkeeper import MemoryStore

pytestmark = pytest.mark.slow  # several writer processes: skipped by `pytest -m "not slow"`

WORKERS = 4
DISTINCT = 200
HOT_EVERY = 4  # every 4th write of a worker also writes the shared hot key: 50 per worker

WORKER = r"""
import sys, time
from pathlib import Path
from memkeeper import MemoryStore

db, worker, mode, sync = sys.argv[1], int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
store = MemoryStore(db)
(sync / f"ready-{worker}").touch()
deadline = time.monotonic() + 20
while not (sync / "go").exists():
    if time.monotonic() > deadline:
        sys.exit("never told to go")
    time.sleep(0.002)
for index in range(int(sys.argv[5])):
    if mode == "mixed":
        store.remember("u", f"w{worker}-k{index}", f"value {worker}/{index}")
        if index % int(sys.argv[6]) == 0:
            store.remember("u", "hot", f"hot {worker}/{index}")
    else:
        store.remember("u", "same", "one value", confidence=0.5 + worker / 10)
store.close()
"""


def run_workers(db_path: Path, sync: Path, mode: str, count: int) -> None:
    MemoryStore(db_path).close()  # created up front: the workers race on writes, not creation
    sync.mkdir()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                str(db_path),
                str(n),
                mode,
                str(sync),
                str(count),
                str(HOT_EVERY),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(WORKERS)
    ]
    deadline = time.monotonic() + 30
    while len(list(sync.glob("ready-*"))) < WORKERS and time.monotonic() < deadline:
        time.sleep(0.005)
    (sync / "go").touch()
    for proc in procs:
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
        assert b"Traceback" not in err
    assert integrity(db_path) == ["ok"]  # several writers left an intact file


def test_concurrent_remember_from_several_processes_loses_nothing(
    db_path: Path, tmp_path: Path
) -> None:
    run_workers(db_path, tmp_path / "sync", "mixed", DISTINCT)

    rows = raw_rows(db_path, "memories")
    distinct = {row["key"]: row for row in rows if row["key"] != "hot"}
    # Every key is present, once, with the value its worker wrote.
    assert len([row for row in rows if row["key"] != "hot"]) == WORKERS * DISTINCT
    for worker in range(WORKERS):
        for index in range(DISTINCT):
            row = distinct[f"w{worker}-k{index}"]
            assert (row["value"], row["state"]) == (f"value {worker}/{index}", "active")

    # The hot key: every write is a row, exactly one of them current, the rest superseded.
    hot = {row["id"]: row for row in rows if row["key"] == "hot"}
    writes = WORKERS * len(range(0, DISTINCT, HOT_EVERY))
    assert len(hot) == writes
    assert sorted(row["value"] for row in hot.values()) == sorted(
        f"hot {w}/{i}" for w in range(WORKERS) for i in range(0, DISTINCT, HOT_EVERY)
    )
    states = Counter(row["state"] for row in hot.values())
    assert states == {"active": 1, "superseded": writes - 1}

    # Change log: one create per row, one supersede per superseded row, nothing else.
    changes = change_rows(db_path)
    assert len(changes) == WORKERS * DISTINCT + writes + (writes - 1)
    assert Counter(c["memory_id"] for c in changes if c["action"] == "create") == Counter(
        row["id"] for row in rows
    )
    supersedes = [c for c in changes if c["action"] == "supersede"]
    assert {c["memory_id"] for c in supersedes} == {
        memory_id for memory_id, row in hot.items() if row["state"] == "superseded"
    }
    # The supersede links form one chain through every hot row: no write replaced a value
    # it had not seen (a lost update would branch or break the chain).
    replaced_by = {c["memory_id"]: c["details"]["superseded_by"] for c in supersedes}
    assert len(set(replaced_by.values())) == len(replaced_by)
    first = (set(hot) - set(replaced_by.values())).pop()
    chain = [first]
    while chain[-1] in replaced_by:
        chain.append(replaced_by[chain[-1]])
    assert len(chain) == writes
    assert hot[chain[-1]]["state"] == "active"
    # ... and each image in the log agrees with the stored row.
    last_after = {c["memory_id"]: c["after"] for c in changes}
    assert all(last_after[row["id"]] == row for row in rows)


def test_concurrent_reconfirmation_of_one_value_makes_one_entry(
    db_path: Path, tmp_path: Path
) -> None:
    per_worker = 40
    run_workers(db_path, tmp_path / "sync", "same", per_worker)

    rows = raw_rows(db_path, "memories")
    assert len(rows) == 1
    assert rows[0]["state"] == "active"
    assert rows[0]["confidence"] == 0.5 + (WORKERS - 1) / 10  # the highest ever asserted
    actions = Counter(c["action"] for c in change_rows(db_path))
    assert actions == {"create": 1, "reconfirm": WORKERS * per_worker - 1}
