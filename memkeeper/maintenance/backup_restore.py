"""Restoring a backup in place of the live files, all or nothing, keeping the old files aside.

Order of work, so that a refusal or a failure at any step leaves the live files as they were:

1. the backup is verified (:func:`memkeeper.storage.sqlite.backup_check.verify`: sizes, sha256,
   integrity, application ids, a schema no newer than this memkeeper, row counts);
2. the service instance lock and the job-run lock (:mod:`memkeeper.maintenance.locks`) are
   taken without waiting — a running service or job run is refused, not raced — and held
   to the end, so neither can start meanwhile;
3. each live file is locked exclusively through SQLite
   (:func:`~memkeeper.storage.sqlite.restore_hold.hold_alone`): if another process (an agent, a
   server) has it open, the lock is refused and so is the restore — renaming a file under
   an open connection would send that agent's next writes into the file set aside. "In
   use" is asked of the locks, never inferred from a ``-wal`` file. The lock is held until
   just before the renames, so nobody opens the files meanwhile;
4. the backup files are copied beside the live ones under temporary names and the live
   database's tombstones are applied to them (:mod:`memkeeper.storage.sqlite.backup_prune`): a
   restore never brings back what was erased after the backup was taken;
5. the live files are linked to ``<name>.replaced-<UTC time>`` and the copies renamed over
   them (cold first, then hot: each rename is atomic, and they follow each other at once).
"""

from __future__ import annotations

import os
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from memkeeper.clock import ensure_utc
from memkeeper.errors import LockBusy, StorageUnwritable
from memkeeper.maintenance.locks import daemon_lock, jobs_lock
from memkeeper.storage.sqlite.backup import fsync_path, new_private_file, remove_with_sidecars
from memkeeper.storage.sqlite.backup_check import (
    FILES,
    check_file,
    describe,
    open_read_only,
    sha256_of,
    verify,
)
from memkeeper.storage.sqlite.backup_prune import apply_tombstones
from memkeeper.storage.sqlite.files import SqliteStorage
from memkeeper.storage.sqlite.restore_hold import (
    Held,
    hold_alone,
    let_go,
    live_erased_values,
    live_tombstones,
)

RESTORING = ".restoring"


def _take(lock: Any, what: str) -> None:
    try:
        lock.acquire(0)
    except LockBusy as exc:
        raise LockBusy(
            f"cannot restore while {what} runs ({exc}); stop it first "
            "(e.g. systemctl --user stop memkeeper) and run restore-backup again"
        ) from None


def _set_aside(path: Path, stamp: str) -> Path | None:
    """Keep the live file under a new name (a hard link: the live name never disappears)."""
    if not path.exists():
        return None
    aside = path.with_name(f"{path.name}.replaced-{stamp}")
    if aside.exists():
        raise StorageUnwritable(f"{aside} already exists; nothing was restored")
    try:
        os.link(path, aside)
    except OSError:  # a file system without hard links
        shutil.copy2(path, aside)
    return aside


def restore(
    directory: Path, hot_path: Path, cold_path: Path, *, now: datetime, busy_timeout_ms: int
) -> dict[str, Any]:
    """Replace the live files with the backup in ``directory``; returns what was done."""
    directory = Path(directory)
    manifest = verify(directory)
    live = {"hot": Path(hot_path), "cold": Path(cold_path)}
    temp = {role: path.with_name(f".{path.name}{RESTORING}") for role, path in live.items()}
    daemon, jobs = daemon_lock(live["hot"]), jobs_lock(live["hot"])
    live["hot"].parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _take(daemon, "the memkeeper service")
    try:
        _take(jobs, "a job run")
        held: list[Held | None] = []
        try:
            for path in live.values():
                held.append(hold_alone(path, busy_timeout_ms))
            for role, (name, _) in FILES.items():
                temp[role].parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                new_private_file(temp[role])
                shutil.copyfile(directory / name, temp[role])
            copy = SqliteStorage(
                temp["hot"], temp["cold"], busy_timeout_ms=busy_timeout_ms, create=False
            )
            try:
                applied = apply_tombstones(
                    copy,
                    live_tombstones(live["hot"]),
                    now=now,
                    erased=live_erased_values(live["hot"]),
                )
            finally:
                copy.close()
            for role, (_, kind) in FILES.items():
                conn = open_read_only(temp[role])
                try:
                    found = describe(conn, kind)
                finally:
                    conn.close()
                check_file(temp[role], kind, _as_expected(temp[role], found))
                fsync_path(temp[role])
            while held:  # WAL folded into the file before it is set aside
                let_go(held.pop())
            stamp = ensure_utc(now).strftime("%Y%m%dT%H%M%S%fZ")
            aside = {role: _set_aside(live[role], stamp) for role in ("cold", "hot")}
            for role in ("cold", "hot"):
                os.replace(temp[role], live[role])
                fsync_path(live[role].parent)
        finally:
            for conn in held:
                let_go(conn)
            for path in temp.values():
                remove_with_sidecars(path)
            jobs.release()
    finally:
        daemon.release()
    return {
        "restored_from": str(directory),
        "taken_at": manifest["taken_at"],
        "hot": str(live["hot"]),
        "cold": str(live["cold"]),
        "set_aside": {role: str(path) if path else None for role, path in aside.items()},
        "erased_since_backup": applied,
    }


def _as_expected(path: Path, found: dict[str, Any]) -> dict[str, Any]:
    """What :func:`check_file` compares a restored copy against: itself, freshly described
    (its rows may differ from the manifest by what the live tombstones erased)."""
    return {**found, "bytes": path.stat().st_size, "sha256": sha256_of(path)}
