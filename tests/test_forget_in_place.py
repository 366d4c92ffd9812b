"""A forget zeroes erased bytes where SQLite no longer reads them, in place, without
rebuilding the file (memkeeper/storage/sqlite/zeroing.py); the rebuild stays the fallback.

Each test checks the file's raw bytes from a child process (tests/helpers), and that the
files are intact (``PRAGMA integrity_check``) after pages were written under SQLite.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import files_containing
from helpers.databases import needles_in_files
from helpers.locks import integrity
from test_forget_residue import LAYOUT_SEEDS, churned_store

from memkeeper import MemoryStore
from memkeeper.paths import cold_path_for
from memkeeper.storage.sqlite import pages, scrub, zeroing

RESIDUE_SEEDS = [27, 32, 42]
"""Layouts in which the erased values' own bytes are left in unused space of live pages
(found by trying 60 layouts): the zeroing has real work there."""


class Watch:
    """What the scrub did: the files it rebuilt and the pages it zeroed in place."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rebuilt: list[Path] = []
        self.zeroed: list[dict[str, Any]] = []
        self.fallbacks: list[str] = []
        rebuild = scrub.rebuild

        def counted(db: Any, path: Path, *, timeout_s: float) -> None:
            self.rebuilt.append(path)
            rebuild(db, path, timeout_s=timeout_s)

        watch = self

        class Log:
            def info(self, event: str, **fields: Any) -> None:
                watch.zeroed.append(fields)

            def warning(self, event: str, **fields: Any) -> None:
                watch.fallbacks.append(fields.get("reason", event))

        monkeypatch.setattr(scrub, "rebuild", counted)
        monkeypatch.setattr(scrub, "log", Log())  # the fallbacks
        monkeypatch.setattr(zeroing, "log", Log())  # the pages zeroed


def _both_intact(db_path: Path) -> None:
    assert integrity(db_path) == ["ok"]
    assert integrity(cold_path_for(db_path)) == ["ok"]


@pytest.mark.parametrize("seed", [*LAYOUT_SEEDS, RESIDUE_SEEDS[0]])
def test_forgotten_keys_are_zeroed_in_place_whatever_the_layout(
    db_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = churned_store(db_path, seed, monkeypatch)
    watch = Watch(monkeypatch)
    victims = [m for m in store.list_memories("u3") if m.key][:8]
    markers = [m.value.split("Z")[0].encode() + b"Z" for m in victims]
    for memory in victims:
        assert store.forget("u3", memory.key) >= 1
    left = needles_in_files(db_path, markers)
    assert [marker for marker, files in left.items() if files] == []
    assert watch.rebuilt == [] and watch.fallbacks == []
    _both_intact(db_path)
    assert store.list_memories("u1")  # the bystander's rows are all still readable
    store.close()


def test_the_residue_layouts_do_need_pages_zeroed(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Across the layouts where secure_delete alone left copies, zeroing really happens
    (the tests above are not passing for want of residue)."""
    zeroed = 0
    for seed in RESIDUE_SEEDS:
        path = db_path.with_name(f"seed{seed}.db")
        store, _ = churned_store(path, seed, monkeypatch)
        watch = Watch(monkeypatch)
        for memory in [m for m in store.list_memories("u3") if m.key][:8]:
            store.forget("u3", memory.key)
        zeroed += sum(entry["pages"] for entry in watch.zeroed)
        store.close()
    assert zeroed > 0


def test_the_same_text_in_another_users_live_row_is_left_alone(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = "Shared-Text-Zanzibar-4711"
    store = MemoryStore(db_path)
    for index in range(200):  # enough rows for page splits around both entries
        store.remember("filler", f"f{index}", "x" * random.Random(index).randint(0, 900))
        if index == 100:
            store.remember("alice", "city", shared)
            store.remember("bob", "city", shared)
    watch = Watch(monkeypatch)
    store.forget("alice", "city")
    assert watch.rebuilt == [] and watch.fallbacks == []
    assert store.recall("bob", "city").value == shared
    assert store.recall("alice", "city") is None
    assert files_containing(db_path, shared.encode())  # bob's row: live, kept
    _both_intact(db_path)
    store.close()


def test_the_rebuild_is_the_fallback_when_a_page_cannot_be_read(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = churned_store(db_path, RESIDUE_SEEDS[0], monkeypatch)
    watch = Watch(monkeypatch)
    monkeypatch.setattr(pages.FileView, "layout", lambda self, number: None)
    victims = [m for m in store.list_memories("u3") if m.key][:8]
    for victim in victims:  # one of them leaves bytes in unused space
        store.forget("u3", victim.key)
    assert watch.rebuilt and watch.fallbacks
    assert "cannot be proven" in watch.fallbacks[0]
    for victim in victims:
        assert files_containing(db_path, victim.value.split("Z")[0].encode() + b"Z") == []
    _both_intact(db_path)
    store.close()


def test_the_rebuild_can_be_forced(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore(db_path)
    store.remember("u", "k", "FORCED-REBUILD-SECRET")
    watch = Watch(monkeypatch)
    monkeypatch.setattr(scrub, "ZERO_IN_PLACE", False)
    store.forget("u", "k")
    assert watch.rebuilt == [db_path]  # the cold file holds nothing: scanned, not rebuilt
    assert files_containing(db_path, b"FORCED-REBUILD-SECRET") == []
    store.close()


def test_agents_reading_and_writing_meanwhile_see_no_error(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other connections (stores of their own, as other processes would have) recall and
    remember throughout a series of forgets that zero pages in place."""
    store, _ = churned_store(db_path, LAYOUT_SEEDS[1], monkeypatch)
    watch = Watch(monkeypatch)
    stop = threading.Event()
    errors: list[str] = []
    calls = [0]

    def agent(number: int) -> None:
        mine = MemoryStore(db_path)
        rng = random.Random(number)
        try:
            while not stop.is_set():
                key = f"a{rng.randrange(30)}"
                try:
                    if rng.random() < 0.5:
                        mine.remember(
                            f"agent{number}", key, f"v{calls[0]}" + "y" * rng.randrange(800)
                        )
                    else:
                        mine.recall(f"agent{number}", key)
                    mine.list_memories("u1")
                except Exception as exc:  # every error is the finding
                    errors.append(f"{type(exc).__name__}: {exc}")
                calls[0] += 1
                time.sleep(0.002)  # an agent between two calls
        finally:
            mine.close()

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    try:
        victims = [m for m in store.list_memories("u3") if m.key][:10]
        for memory in victims:
            store.forget("u3", memory.key)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert errors == []
    assert calls[0] > 20
    assert watch.rebuilt == [] and watch.fallbacks == []
    markers = [m.value.split("Z")[0].encode() + b"Z" for m in victims]
    assert [m for m, files in needles_in_files(db_path, markers).items() if files] == []
    _both_intact(db_path)
    store.close()


def test_a_read_only_descriptor_falls_back_to_scan_and_rebuild(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore(db_path)
    store.remember("u", "k", "READ-ONLY-RAW-SECRET")
    monkeypatch.setattr(store.storage.hot_raw, "writable", False)
    watch = Watch(monkeypatch)
    store.forget("u", "k")
    assert files_containing(db_path, b"READ-ONLY-RAW-SECRET") == []
    assert watch.zeroed == []
    store.close()
    assert os.path.exists(db_path)


def test_needles_sharing_their_first_bytes_are_each_found(tmp_path: Path) -> None:
    """One search per distinct start: versions of a value, and an occurrence across the
    boundary between two reads, are all found, each with its own length."""
    from memkeeper.storage.sqlite import rawfile

    first = b"SHARED-START-0123 version 1"
    second = b"SHARED-START-0123 version 22"
    data = bytearray(b"x" * (rawfile.CHUNK + 64))
    data[10 : 10 + len(first)] = first
    at = rawfile.CHUNK - 5  # across the first read's end
    data[at : at + len(second)] = second
    path = tmp_path / "bytes"
    path.write_bytes(bytes(data))
    fd = os.open(path, os.O_RDONLY)
    try:
        found = rawfile.find_all(fd, [first, second, b"absent-needle-here"])
    finally:
        os.close(fd)
    assert found == [(10, 10 + len(first)), (at, at + len(second))]
