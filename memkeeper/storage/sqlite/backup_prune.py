"""Erasures reach copies: apply a database's tombstones to a backup (or a file being restored).

A forget erases the live files only; a backup taken before it still holds what was erased.
:func:`apply_tombstones` brings a copy in line: every tombstone the live database holds more
often than the copy does (matched by scope and digest, so a forget repeated after a value
was re-remembered counts again) is an erasure the copy has not seen. The copy's rows whose
identity hashes to such a digest are erased with the same code as a forget
(:func:`memkeeper.storage.forgetting.erase`, and its scrub), so no byte of them remains in
the copy; then the copy receives the live tombstones it lacks, so it knows every erasure the
live database knows.

A tombstone the copy already holds is not applied: that erasure happened before the copy was
taken, and an entry matching it in the copy was written afterwards (the user said it again).
This decides by the tombstones themselves, not by clocks, so a forget whose time was taken
just before the snapshot but which committed just after it is still applied.

:func:`prune` does this to a backup directory: it works on temporary copies of the backup's
files and renames them into place only once they pass the backup checks, then rewrites the
manifest (``taken_at`` unchanged, ``pruned_at`` added).
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from memkeeper.clock import to_db
from memkeeper.storage import erased_values
from memkeeper.storage.base import Storage
from memkeeper.storage.forgetting import Selection, erase
from memkeeper.storage.sqlite.backup import (
    PARTIAL,
    clear_leftovers,
    file_entry,
    new_private_file,
    remove_with_sidecars,
    to_rollback_journal,
    write_manifest,
)
from memkeeper.storage.sqlite.backup_check import (
    FILES,
    check_file,
    describe,
    open_read_only,
    verify,
)
from memkeeper.storage.sqlite.files import SqliteStorage
from memkeeper.storage.tombstones import Tombstone, copy_in, digest_of, since
from memkeeper.storage.transaction import immediate_transaction

ACTOR = "backup:prune-forgotten"
_ORDER = {"user": 0, "key": 1, "memory": 2}


def _identities(target: Storage) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Every (scope, identity) the copy holds anything about: entries, log rows, messages."""
    tables = [(target.hot, "memories")]
    cold = target.cold(create=False)
    if cold is not None:
        tables.append((cold, "cold_memories"))
    for db, table in tables:
        for memory_id, user_id, namespace, key, kind in db.execute(
            f"SELECT id, user_id, namespace, key, kind FROM {table}"
        ):
            yield "memory", (memory_id,)
            yield "user", (user_id,)
            if key is not None and kind != "note":
                yield "key", (user_id, namespace, key)
    for memory_id, user_id, namespace, before_key, after_key in target.hot.execute(
        "SELECT DISTINCT memory_id, user_id, namespace, json_extract(before, '$.key'),"
        " json_extract(after, '$.key') FROM changes"
    ):
        if memory_id is not None:
            yield "memory", (memory_id,)
        if user_id is not None:
            yield "user", (user_id,)
            for key in {before_key, after_key} - {None}:
                if namespace is not None:
                    yield "key", (user_id, namespace, str(key))
    for table in ("messages", "episodes"):
        for (user_id,) in target.hot.execute(f"SELECT DISTINCT user_id FROM {table}"):
            yield "user", (user_id,)


def _selection(scope: str, parts: tuple[str, ...]) -> Selection:
    if scope == "memory":
        return Selection(memory_id=parts[0])
    if scope == "user":
        return Selection(user_id=parts[0])
    return Selection(user_id=parts[0], namespace=parts[1], key=parts[2])


def apply_tombstones(
    target: Storage,
    tombstones: list[Tombstone],
    *,
    now: datetime,
    erased: tuple[bytes | None, list[tuple[Any, ...]]] = (None, []),
) -> dict[str, int]:
    """Erase from ``target`` what the given (live) tombstones erased and it has not seen,
    with what each erasure reaches there (:mod:`memkeeper.storage.derived`: the copy's
    summaries, extracted facts and merged notes built from an erased value, and its texts
    that carry one). ``erased``: the live database's erased-value hashes
    (:func:`memkeeper.storage.erased_values.carried_over`), copied in first so that the
    copy, once restored, refuses the same values.

    Returns counts: tombstones new to the copy, erasures run, and what they erased.
    """
    with immediate_transaction(target.hot):
        erased_values.copy_in(target.hot.conn, *erased)
    wanted = Counter((t.scope, t.digest) for t in tombstones)
    had = Counter((t.scope, t.digest) for t in since(target.hot, None))
    pending = {pair for pair, count in wanted.items() if count > had[pair]}
    matched = sorted(
        {
            (scope, parts)
            for scope, parts in _identities(target)
            if (scope, digest_of(scope, *parts)) in pending
        },
        key=lambda item: (_ORDER[item[0]], item[1]),
    )
    totals: Counter[str] = Counter(tombstones=len(pending), erasures=len(matched))
    for scope, parts in matched:
        counts = erase(
            target,
            _selection(scope, parts),
            actor=ACTOR,
            now=now,
            reason="applied an erasure recorded after this copy was taken",
        )
        totals.update(counts)
    have = Counter((t.scope, t.digest) for t in since(target.hot, None))
    missing = []
    for tombstone in tombstones:
        pair = (tombstone.scope, tombstone.digest)
        if have[pair] > 0:
            have[pair] -= 1
        else:
            missing.append(tombstone)
    with immediate_transaction(target.hot):
        copy_in(target.hot, missing)
    return dict(totals)


def prune(live: Storage, directory: Path, *, now: datetime, version: str) -> dict[str, Any]:
    """Apply ``live``'s tombstones to the backup in ``directory``; returns the new manifest
    with the counts applied under ``pruned``."""
    if live.hot.dialect == "postgres":
        from memkeeper.storage.postgres.backups import refuse

        raise refuse("backup --prune-forgotten", str(live.hot_path))
    directory = Path(directory)
    manifest = verify(directory)
    clear_leftovers(directory)  # a killed prune's copies and journals: never reuse them
    with live.lock:
        tombstones = since(live.hot, None)
        erased = erased_values.carried_over(live.hot.conn)
    partial = {role: directory / f"{name}{PARTIAL}" for role, (name, _) in FILES.items()}
    try:
        for role, (name, _) in FILES.items():
            new_private_file(partial[role])
            shutil.copyfile(directory / name, partial[role])
        copy = SqliteStorage(
            partial["hot"], partial["cold"], busy_timeout_ms=live.busy_timeout_ms, create=False
        )
        try:
            counts = apply_tombstones(copy, tombstones, now=now, erased=erased)
        finally:
            copy.close()
        files = {}
        for role, (_name, kind) in FILES.items():
            to_rollback_journal(partial[role])
            conn = open_read_only(partial[role])
            try:
                described = describe(conn, kind)
            finally:
                conn.close()
            files[role] = file_entry(partial[role], described)
            check_file(partial[role], kind, files[role])
        for role, (name, _) in FILES.items():
            partial[role].replace(directory / name)
    finally:
        for path in partial.values():
            remove_with_sidecars(path)
    manifest = {
        **manifest,
        "files": files,
        "pruned_at": to_db(now),
        "pruned_by_version": version,
        "pruned": counts,
    }
    write_manifest(directory, manifest)
    return manifest
