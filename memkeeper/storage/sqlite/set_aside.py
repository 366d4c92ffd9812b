"""Files set aside by ``restore-backup`` are reached by every later forget.

A restore keeps the replaced files as ``<name>.replaced-<UTC time>`` beside the new ones
(:mod:`memkeeper.maintenance.backup_restore`). They hold everything the database held then,
so a value forgotten afterwards would live on in them. After each forget, :func:`reach` runs
the same erasure (:func:`memkeeper.storage.forgetting.erase`: the same selection, its
tombstones and its scrub) on every such pair, so no byte of the erased value stays there
either — also when the value was only there (a forget of something the restored files never
held erases nothing live and records no tombstone, so pruning by tombstones would miss it).
Chosen over only naming the files in the forget's report: a user's "forget this" is a hard
delete everywhere memkeeper keeps data, and a file memkeeper itself set aside is such a place.
A pair that cannot be opened (damaged, or made by a newer memkeeper) is named in a warning
(and in the result, for callers that want it), never a reason for the forget to fail: the
live erasure is committed.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from memkeeper import logs
from memkeeper.errors import MemkeeperError
from memkeeper.storage.base import Storage
from memkeeper.storage.forgetting import Selection, erase
from memkeeper.storage.sqlite.files import SqliteStorage

log = logs.get_logger("memkeeper.forget")

MARK = ".replaced-"


def pairs(hot_path: Path, cold_path: Path) -> list[tuple[Path, Path]]:
    """Every (hot, cold) pair set aside beside the live files, oldest first."""
    hot_path, cold_path = Path(hot_path), Path(cold_path)
    if not hot_path.parent.is_dir():
        return []
    found = []
    for aside in sorted(hot_path.parent.glob(f"{hot_path.name}{MARK}*")):
        stamp = aside.name[len(hot_path.name) + len(MARK) :]
        if aside.is_file() and stamp and "-" not in stamp and "." not in stamp:
            found.append((aside, cold_path.with_name(f"{cold_path.name}{MARK}{stamp}")))
    return found


def reach(
    live: Storage, selection: Selection, *, actor: str, now: datetime, reason: str
) -> dict[str, Any]:
    """Erase ``selection`` in every set-aside pair too; what was erased where.

    Returns ``{"reached": {path: counts}, "unreachable": {path: reason}}``.
    """
    result: dict[str, Any] = {"reached": {}, "unreachable": {}}
    for hot, cold in pairs(live.hot_path, live.cold_path):
        try:
            aside = SqliteStorage(hot, cold, busy_timeout_ms=live.busy_timeout_ms, create=False)
            try:
                result["reached"][str(hot)] = erase(
                    aside, selection, actor=actor, now=now, reason=reason
                )
            finally:
                aside.close()
        except MemkeeperError as exc:
            result["unreachable"][str(hot)] = str(exc)
            log.warning(
                "a file set aside by restore-backup could not be reached by a forget and may "
                "still hold what was erased; delete it if it is not needed",
                path=str(hot),
                error=str(exc),
            )
    return result
