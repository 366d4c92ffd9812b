"""Forget leaves no residue whatever the page layout, and a forget interrupted at any step
finishes on retry (issue 8, items 2 and 3).

Page rebuilds inside SQLite leave stale copies of moved rows in the unused gap of live pages,
which ``secure_delete`` never reaches; these tests build many random layouts (random ids,
value sizes, interleaved inserts, moves and deletes) and grep every file's raw bytes.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers import files_containing
from helpers.databases import needles_in_files

import memkeeper.store.entries
from memkeeper import MemoryStore
from memkeeper.clock import fixed
from memkeeper.maintenance import curation
from memkeeper.maintenance.runner import run_once
from memkeeper.storage.sqlite.scrub import file_holds_any, scrub

T0 = datetime(2026, 1, 1, tzinfo=UTC)
# Ids come from the seed too, so each layout is the same on every run. 7, 11 and 12 are
# layouts in which the old forget (secure_delete alone) left erased values behind; the long
# run (MEMKEEPER_LONG_TESTS=1) tries 60 layouts.
LAYOUT_SEEDS = [7, 11, 12] if not os.environ.get("MEMKEEPER_LONG_TESTS") else list(range(60))


def churned_store(
    db_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[MemoryStore, list[bytes]]:
    """A store whose files went through inserts, retirements and restores in random order.

    Returns it with the markers of user u3's values (the ones a test then erases).
    """
    rnd = random.Random(seed)
    monkeypatch.setattr(memkeeper.store.entries, "new_memory_id", lambda: rnd.randbytes(8).hex())
    now = [T0]
    store = MemoryStore(db_path, clock=lambda: now[0])
    secrets: list[bytes] = []
    for round_ in range(3):
        for i in range(rnd.randint(60, 160)):
            user = rnd.choice(("u1", "u3"))
            marker = f"SECRET{seed}r{round_}n{i}Z"
            value = (marker if user == "u3" else "v") + "x" * rnd.randint(0, 1500)
            if user == "u3":
                secrets.append(marker.encode())
            store.remember(user, f"k{round_}-{i}", value)
        for _ in range(2):
            now[0] += timedelta(days=400)
            run_once(store, ["expire"])
        cold = [m.id for m in store.list_memories(state="cold")]
        curation.restore(store, rnd.sample(cold, len(cold) // 2))
    return store, secrets


@pytest.mark.parametrize("seed", LAYOUT_SEEDS)
def test_forget_user_leaves_no_byte_whatever_the_page_layout(
    db_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, secrets = churned_store(db_path, seed, monkeypatch)
    assert secrets and any(needles_in_files(db_path, secrets).values())
    store.forget_user("u3")
    assert [s for s, files in needles_in_files(db_path, secrets).items() if files] == []
    assert store.list_memories("u3") == []
    assert store.list_memories("u1")  # bystanders are still there
    store.close()


@pytest.mark.parametrize("seed", LAYOUT_SEEDS[:2])
def test_forget_of_keys_leaves_no_byte_whatever_the_page_layout(
    db_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = churned_store(db_path, seed, monkeypatch)
    victims = [m for m in store.list_memories("u3") if m.key][:5]
    for memory in victims:
        assert store.forget("u3", memory.key) >= 1
        marker = memory.value.split("Z")[0].encode() + b"Z"
        assert files_containing(db_path, marker) == [], memory.key
    store.close()


def test_scrub_rebuilds_only_a_file_that_still_holds_an_erased_text(db_path: Path) -> None:
    store = MemoryStore(db_path)
    store.remember("u", "k", "KEEP-ME-visible")
    files = [(store.storage.hot, store.path, store.storage.hot_raw)]
    assert scrub(files, {b"NOT-IN-THE-FILE"}, timeout_s=1) == []
    assert file_holds_any(store.storage.hot_raw, {b"KEEP-ME-visible"})
    assert scrub(files, None, timeout_s=1) == [store.path]  # unknown texts: rebuilt
    assert store.recall("u", "k").value == "KEEP-ME-visible"
    store.close()


# -- a forget killed at every step, then retried ---------------------------------------------

CHILD = textwrap.dedent(
    """
    import os, sys
    from datetime import datetime
    from memkeeper import MemoryStore
    from memkeeper.storage import transitions
    from memkeeper.clock import fixed

    db, step, what, now = sys.argv[1:5]

    def crash(name):
        if name == step:
            os._exit(17)

    transitions.step_hook = crash
    store = MemoryStore(db, clock=fixed(datetime.fromisoformat(now)))
    if what == "user":
        store.forget_user("alice")
    else:
        store.forget("alice", what)
    os._exit(0)
    """
)
SECRET_HOT = "HOT-SECRET-0a1b2c"
SECRET_COLD = "COLD-SECRET-9f8e7d"
SECRET_MESSAGE = "MESSAGE-SECRET-55aa"
STEPS = ["forget-cold-committed", "forget-hot-written", "forget-hot-committed", "forget-scrubbed"]


def _store_with_hot_and_cold_secrets(db_path: Path) -> datetime:
    now = [T0]
    store = MemoryStore(db_path, clock=lambda: now[0])
    store.remember("alice", "hot", SECRET_HOT)
    store.remember("alice", "cold", SECRET_COLD)
    store.append_message("alice", "s1", "user", f"my code is {SECRET_MESSAGE}")
    store.remember("bob", "city", "Lisbon")
    now[0] += timedelta(days=10)
    store.recall("alice", "hot")
    for days in (200, 30):  # expire, then retire to cold after the grace period
        now[0] += timedelta(days=days)
        run_once(store, ["expire"])
        store.recall("alice", "hot")
    assert {m.key: m.state for m in store.list_memories("alice")} == {
        "hot": "active",
        "cold": "cold",
    }
    store.close()
    return now[0]


@pytest.mark.parametrize("what", ["hot", "cold", "user"])
@pytest.mark.parametrize("step", STEPS)
def test_a_forget_killed_at_any_step_finishes_on_retry(db_path: Path, step: str, what: str) -> None:
    now = _store_with_hot_and_cold_secrets(db_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(db_path), step, what, now.isoformat()],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert child.returncode in (0, 17), child.stderr
    if what == "hot" and step == "forget-cold-committed":
        assert child.returncode == 0  # a hot-only entry has no cold step
    else:
        assert child.returncode == 17
    store = MemoryStore(db_path, clock=fixed(now + timedelta(minutes=1)))
    if what == "user":
        store.forget_user("alice")
    else:
        store.forget("alice", what)
    secrets = {
        "hot": [SECRET_HOT],
        "cold": [SECRET_COLD],
        "user": [SECRET_HOT, SECRET_COLD, SECRET_MESSAGE],
    }
    for secret in secrets[what]:
        assert files_containing(db_path, secret.encode()) == [], secret
    assert store.recall("bob", "city").value == "Lisbon"
    assert store.storage.hot.execute("SELECT count(*) FROM pending_scrubs").fetchone()[0] == 0
    store.close()


def test_a_job_run_finishes_a_forget_interrupted_after_its_commit(db_path: Path) -> None:
    now = _store_with_hot_and_cold_secrets(db_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            str(db_path),
            "forget-hot-committed",
            "cold",
            now.isoformat(),
        ],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == 17
    store = MemoryStore(db_path, clock=fixed(now + timedelta(minutes=1)))
    assert store.storage.hot.execute("SELECT count(*) FROM pending_scrubs").fetchone()[0] == 1
    run_once(store, ["settle"])
    assert files_containing(db_path, SECRET_COLD.encode()) == []
    assert store.storage.hot.execute("SELECT count(*) FROM pending_scrubs").fetchone()[0] == 0
    store.close()


def test_forget_drops_the_keyword_postings_kept_in_memory(db_path: Path) -> None:
    """A search keeps a small user's keyword postings in the process (store/bm25_index.py);
    a forget must not leave the erased values there until they happen to be evicted."""
    from memkeeper.store import bm25_index

    store = MemoryStore(db_path, clock=fixed(T0))
    store.remember("carol", "city", "Zanzibarville")
    store.remember("dave", "city", "Lisbon")
    assert store.search("carol", "Zanzibarville")
    assert store.search("dave", "Lisbon")

    def kept_values() -> set[str]:
        return {row[2] for index in bm25_index._kept.values() for row in index.rows}

    assert "Zanzibarville" in kept_values()
    store.forget_user("carol")
    assert "Zanzibarville" not in kept_values()
    assert store.search("dave", "Lisbon")  # other users are searched as before
    store.close()
