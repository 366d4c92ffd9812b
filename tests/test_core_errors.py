"""Every error from the API is memkeeper's own; no single entry fails a job for everyone;
a full disk loses nothing (issue 8, items 5, 10 and 14)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers import current_images, locations, replay

from memkeeper import MemoryStore
from memkeeper.clock import fixed
from memkeeper.config import parse_config
from memkeeper.errors import ConfigError, InvalidInput, MemkeeperError, StorageFull
from memkeeper.maintenance.runner import run_once
from memkeeper.store.core import StoreCore

T0 = datetime(2026, 1, 1, 9, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.remember("u", "k", "v", confidence=10**400),
        lambda s: s.add_note("u", "n", confidence=-(10**400)),
        lambda s: s.remember("u", "k", "v", ttl_days=1_000_000),
        lambda s: s.remember("u", "k", "v", ttl_days=2**64),
        lambda s: s.add_note("u", "n", ttl_days=36_501),
        lambda s: s.history("u", "s", limit=10**20),
        lambda s: s.episodes("u", limit=2**63),
        lambda s: s.changes(limit=10**30),
    ],
)
def test_enormous_numbers_are_invalid_input_and_store_nothing(store: MemoryStore, call) -> None:
    before = current_images(store)
    with pytest.raises(InvalidInput) as raised:
        call(store)
    assert len(str(raised.value)) < 200  # the number is cut short in the message
    assert current_images(store) == before


def test_a_century_is_the_longest_ttl(store: MemoryStore) -> None:
    assert store.remember("u", "k", "v", ttl_days=36_500).ttl_days == 36_500


@pytest.mark.parametrize("key", ["fact", "preference", "note"])
def test_config_refuses_a_ttl_beyond_a_century(key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        parse_config({"jobs": {"expire": {"ttl_days": {key: 1_000_000}}}}, Path("c.toml"))


def test_an_entry_whose_ttl_cannot_be_computed_is_skipped_not_fatal(db_path: Path) -> None:
    store = MemoryStore(db_path, clock=fixed(T0))
    odd = store.remember("odd", "k", "v", ttl_days=30)
    others = [store.remember(f"user{i}", "k", "v") for i in range(3)]
    store.close()
    # Written before TTLs were bounded (or by hand): the API no longer accepts it.
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE memories SET ttl_days = 1000000 WHERE id = ?", [odd.id])
    conn.commit()
    conn.close()
    store = MemoryStore(db_path, clock=fixed(T0 + 400 * DAY))
    (result,) = run_once(store, ["expire"]).results
    assert result.status == "ok", result.error
    assert result.skipped_entries >= 1
    assert all(store.get(m.id).state == "pending_review" for m in others)
    assert store.get(odd.id).state == "active"
    store.close()


def test_a_recall_from_cold_racing_a_newer_remember_returns_the_newer_value(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore(db_path, clock=fixed(T0))
    old = store.remember("u", "city", "Paris")
    store.close()
    later = T0 + 400 * DAY
    store = MemoryStore(db_path, clock=fixed(later))
    run_once(store, ["expire"])
    store.clock = fixed(later + 30 * DAY)
    run_once(store, ["expire"])
    assert store.get(old.id).state == "cold"
    other = MemoryStore(db_path, clock=fixed(later + 31 * DAY))
    store.clock = fixed(later + 31 * DAY)
    original = StoreCore.apply
    raced = []

    def racing_apply(self, transitions, verb):
        if not raced and any(t.action == "restore" for t in transitions):
            raced.append(other.remember("u", "city", "Berlin"))  # another agent, just then
        return original(self, transitions, verb)

    monkeypatch.setattr(StoreCore, "apply", racing_apply)
    recalled = store.recall("u", "city")
    assert raced and recalled.value == "Berlin" and recalled.id == raced[0].id
    assert store.get(old.id).state == "cold"  # the older value stays retired
    assert all(len(places) == 1 for places in locations(db_path).values())
    assert replay(store) == current_images(store)
    store.close()
    other.close()


# -- a full disk -----------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 16 MB tmpfs, where the machine lets us mount one."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(directory: Path) -> Path:
    filler = directory / "filler"
    fd = os.open(filler, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def test_a_full_disk_is_one_clear_error_and_loses_nothing(small_disk: Path) -> None:
    db_path = small_disk / "memory.db"
    store = MemoryStore(db_path, clock=fixed(T0))
    for i in range(40):
        store.remember("u", f"k{i}", f"first {i} " + "x" * 500)
    store.clock = fixed(T0 + DAY)
    for i in range(40):
        store.remember("u", f"k{i}", f"second {i} " + "y" * 500)
    before = current_images(store)
    filler = _fill(small_disk)

    with pytest.raises(StorageFull, match="full"):
        for i in range(200):  # an agent keeps writing until the disk refuses
            store.remember("u", f"new{i}", "z" * 2000)
    # A job moving entries to cold storage on the full disk: one clear failure.
    store.clock = fixed(T0 + 60 * DAY)
    try:
        report = run_once(store, ["settle"])
        failed = [r for r in report.results if r.status != "ok"]
        assert failed and "full" in (failed[0].error or "")
    except MemkeeperError as exc:  # e.g. the cold file cannot even be created
        assert "full" in str(exc)
    store.close()

    filler.unlink()
    store = MemoryStore(db_path, clock=fixed(T0 + 60 * DAY))
    (result,) = run_once(store, ["settle"]).results
    assert result.status == "ok", result.error
    after = current_images(store)
    for memory_id, image in before.items():
        if image["state"] == "superseded":
            assert after[memory_id]["state"] == "cold"
        else:
            assert after[memory_id] == image
    assert all(len(places) == 1 for places in locations(db_path).values())
    store.close()
    assert _integrity(db_path) == "ok"
    assert _integrity(small_disk / "memory-cold.db") == "ok"
