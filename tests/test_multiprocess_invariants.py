"""Many processes at once: agents remember, recall and forget overlapping keys while passes
move entries to and from cold storage (issue 8, items 4 and 5).

After every round the files are checked straight from disk: at most one current entry per
(user, namespace, kind, key), every id in exactly one file, every change-log chain unbroken,
and no error (``database is locked`` or any other) reached any caller.

The suite runs a short version. The long one:
``MEMKEEPER_LONG_TESTS=1 pytest tests/test_multiprocess_invariants.py``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers import current_images, locations, replay
from helpers.locks import integrity

from memkeeper import MemoryStore
from memkeeper.paths import cold_path_for

LONG = bool(os.environ.get("MEMKEEPER_LONG_TESTS"))
AGENTS = 8
ROUNDS = 12 if LONG else 3
OPS = 150 if LONG else 25
T0 = datetime(2026, 1, 1, 9, tzinfo=UTC)

WORKER = textwrap.dedent(
    """
    import json, os, random, sys
    from datetime import datetime, timedelta
    from memkeeper import MemoryStore
    from memkeeper.maintenance import curation
    from memkeeper.maintenance.runner import run_once

    db, role, ident, ops = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

    def locked(path):
        # Whether this process still holds a POSIX lock on the database (None: unknown).
        if not os.path.exists("/proc/locks"):
            return None
        inode, pid = os.stat(path).st_ino, os.getpid()
        with open("/proc/locks") as table:
            for line in table:
                fields = line.replace("->", " ").split()
                if fields[1] == "POSIX" and int(fields[4]) == pid and \
                        int(fields[5].rsplit(":", 1)[-1]) == inode:
                    return True
        return False

    now = [None]
    store = MemoryStore(db, clock=lambda: now[0], actor=f"{role}{ident}")
    users, keys = ["u0", "u1", "u2"], [f"k{i}" for i in range(6)]
    for line in sys.stdin:
        round_, moment = line.split()
        base = datetime.fromisoformat(moment)
        rnd = random.Random(f"{role}{ident}-{round_}")
        errors, done = [], 0
        for step in range(ops):
            now[0] = base + timedelta(seconds=step)
            user, key = rnd.choice(users), rnd.choice(keys)
            try:
                if role == "runner":
                    if step % 5 == 0:
                        report = run_once(store, ["settle", "expire", "demote", "prune"])
                        errors += [f"{r.job}: {r.error}" for r in report.results if not r.ok]
                    else:
                        cold = [m.id for m in store.list_memories(state="cold")][:5]
                        curation.restore(store, cold)
                    done += 1
                    continue
                roll = rnd.random()
                if roll < 0.45:
                    # Values are the key's own: an erased "green" of one key would rightly
                    # be refused under another (memkeeper.storage.erased_values).
                    store.remember(user, key, rnd.choice(["red", "blue", "green"]) + "-" + key,
                                   kind=rnd.choice(["fact", "preference"]),
                                   confidence=rnd.choice([0.3, 0.9]))
                elif roll < 0.85:
                    store.recall(user, key)
                elif roll < 0.93:
                    store.add_note(user, f"note {round_}-{step}", confidence=0.3)
                else:
                    store.forget(user, key)
                done += 1
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
        print("RESULT " + json.dumps({"done": done, "errors": errors, "locked": locked(db)}),
              flush=True)
    store.close()
    """
)


def _check_invariants(db_path: Path) -> None:
    for path in (db_path, cold_path_for(db_path)):
        if path.exists():
            assert integrity(path) == ["ok"], path
    conn = sqlite3.connect(db_path)
    try:
        doubled = conn.execute(
            "SELECT user_id, namespace, kind, key, count(*) FROM memories"
            " WHERE state IN ('active', 'pending_review') AND key IS NOT NULL"
            " GROUP BY user_id, namespace, kind, key HAVING count(*) > 1"
        ).fetchall()
    finally:
        conn.close()
    assert doubled == []
    where = locations(db_path)
    assert {i: p for i, p in where.items() if len(p) != 1} == {}
    store = MemoryStore(db_path)
    try:
        assert replay(store) == current_images(store)  # also checks every chain
    finally:
        store.close()


@pytest.mark.slow
def test_agents_and_passes_in_many_processes_keep_every_invariant(db_path: Path) -> None:
    MemoryStore(db_path).close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    roles = [("agent", n) for n in range(AGENTS)] + [("runner", 0)]
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db_path), role, str(n), str(OPS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for role, n in roles
    ]
    try:
        for round_ in range(ROUNDS):
            # Each round is 40 days after the last: entries expire, settle and get demoted.
            moment = T0 + timedelta(days=40 * round_)
            for worker in workers:
                worker.stdin.write(f"{round_} {moment.isoformat()}\n")
                worker.stdin.flush()
            for (role, n), worker in zip(roles, workers, strict=True):
                line = worker.stdout.readline()
                while line and not line.startswith("RESULT "):  # log lines
                    line = worker.stdout.readline()
                assert line, f"{role}{n} died: {worker.stderr.read()}"
                result = json.loads(line.removeprefix("RESULT "))
                assert result["errors"] == [], (role, n, round_, result["errors"])
                assert result["done"] == OPS
                # Its forgets and passes left the process's SQLite lock in place (issue 18).
                assert result["locked"] in (True, None), (role, n, round_)
            # A short-lived process closing the database must not take itself for the last
            # user: the workers still have it open, so the write-ahead log stays.
            done = subprocess.run(
                [sys.executable, "-m", "memkeeper", "--db", str(db_path), "list", "--limit", "1"],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            assert Path(f"{db_path}-wal").exists()
            _check_invariants(db_path)
    finally:
        for worker in workers:
            if worker.stdin:
                worker.stdin.close()
        for worker in workers:
            worker.wait(timeout=60)
