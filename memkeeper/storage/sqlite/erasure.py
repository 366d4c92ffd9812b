"""Erasure on SQLite: the rows go in the files' commits, then no byte of them is left.

The rows are the same as on PostgreSQL (:func:`memkeeper.storage.forgetting.remove_rows`);
what is SQLite's is the rest (see :mod:`memkeeper.storage.forgetting` for the steps): the
``pending_scrubs`` row written in the hot commit, its owner's lock file
(:mod:`memkeeper.storage.sqlite.scrub_owners`), the byte scrub of both files and their
write-ahead logs (:mod:`memkeeper.storage.sqlite.scrub`), and the purge of the FTS5
indexes' deleted trigrams, left to the nightly settle run (:func:`purge_indexes`).
:func:`memkeeper.storage.forgetting.erase` and
:func:`memkeeper.storage.forgetting.finish_interrupted` dispatch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memkeeper.clock import to_db
from memkeeper.storage import transitions
from memkeeper.storage.base import Storage
from memkeeper.storage.batches import delete_in
from memkeeper.storage.forgetting import Selection, remove_rows
from memkeeper.storage.sqlite import fts, scrub_owners
from memkeeper.storage.sqlite.scrub import needles_of, scrub
from memkeeper.storage.transaction import immediate_transaction
from memkeeper.storage.transitions import reconcile


def erase(
    storage: Storage, selection: Selection, *, actor: str, now: datetime, reason: str
) -> dict[str, int]:
    """Erase ``selection`` from both files and scrub them; counts of what was erased."""
    held: dict[int, int | None] = {}  # pending_scrubs rows this call owns, with their locks
    with storage.lock:
        try:
            return _erase(storage, selection, held, actor=actor, now=now, reason=reason)
        finally:
            scrub_owners.release(storage.hot_path, held)


def _erase(
    storage: Storage,
    selection: Selection,
    held: dict[int, int | None],
    *,
    actor: str,
    now: datetime,
    reason: str,
) -> dict[str, int]:
    hot = storage.hot
    with immediate_transaction(hot):
        reconcile(storage)
        pending = [row["id"] for row in hot.query("SELECT id FROM pending_scrubs")]
        held.update(scrub_owners.claim_abandoned(storage.hot_path, pending))
        interrupted = list(held)
        removed = remove_rows(storage, selection, actor=actor, now=now, reason=reason)
        conn = hot.conn
        marker = None
        if removed.anything or interrupted:
            marker = conn.execute(
                "INSERT INTO pending_scrubs (at) VALUES (?) RETURNING id", [to_db(now)]
            ).fetchone()[0]
            files = ["hot", "cold"] if storage.cold(create=False) is not None else ["hot"]
            conn.executemany(
                "INSERT INTO pending_index_purges (file, since) VALUES (?, ?)"
                " ON CONFLICT (file) DO NOTHING",
                [(file, to_db(now)) for file in files],
            )
            # Held before the row commits, released after it is deleted: others see a
            # row whose owner is scrubbing, never one that looks abandoned.
            held[marker] = scrub_owners.hold(storage.hot_path, marker)
        transitions.step_hook("forget-hot-written")
    transitions.step_hook("forget-hot-committed")
    if marker is not None:
        needles = None if interrupted else needles_of(removed.texts)
        finish_scrub(storage, needles, [*interrupted, marker])
    return removed.counts


def finish_scrub(storage: Storage, needles: set[bytes] | None, markers: Sequence[int]) -> None:
    """Scrub both files (see :mod:`~memkeeper.storage.sqlite.scrub`), then drop those
    markers. The keyword indexes' deleted trigrams are left to :func:`purge_indexes`."""
    files = [(storage.hot, storage.hot_path, storage.hot_raw)]
    cold = storage.cold(create=False)
    if cold is not None:
        files.append((cold, storage.cold_path, storage.cold_raw))
    scrub(files, needles, timeout_s=storage.busy_timeout_ms / 1000)
    transitions.step_hook("forget-scrubbed")
    with immediate_transaction(storage.hot):
        delete_in(storage.hot.conn, "pending_scrubs", "id", markers)


def pending_index_purge(storage: Storage) -> str | None:
    """Since when a keyword index holds trigrams of erased texts (None: neither does)."""
    row = storage.hot.conn.execute("SELECT min(since) FROM pending_index_purges").fetchone()
    return row[0] if row else None


def purge_indexes(storage: Storage) -> list[str]:
    """Rewrite each keyword index that still holds trigrams of erased texts; the files done.

    An FTS5 delete only appends a marker: the erased row's trigrams stay in older segments
    until the index is rewritten (:func:`memkeeper.storage.sqlite.fts.purge_deleted`), which
    re-reads every row of the file under the write lock (about 24 s at a million memories).
    So a forget leaves it pending (``pending_index_purges``) and the nightly settle run does
    it (:data:`memkeeper.maintenance.runner.INDEX_PURGE_JOB`), once for every forget of the
    day: agents wait for it once a night, in the maintenance window, not at every forget.
    """
    done = []
    with storage.lock:
        rows = storage.hot.query("SELECT file FROM pending_index_purges ORDER BY file DESC")
        pending = [row["file"] for row in rows]
        for file in pending:
            db = storage.hot if file == "hot" else storage.cold(create=False)
            if db is not None:
                with immediate_transaction(db):
                    fts.purge_deleted(db, fts.TABLES[0] if file == "hot" else fts.TABLES[1])
            with immediate_transaction(storage.hot):
                delete_in(storage.hot.conn, "pending_index_purges", "file", [file])
            done.append(file)
    return done


def finish_interrupted(storage: Storage) -> bool:
    """Rebuild both files if an erasure was interrupted after its commit. True if it was.

    Interrupted means its owner is gone (:mod:`~memkeeper.storage.sqlite.scrub_owners`): a row
    whose owner is still scrubbing, in this or another process, is left to it.
    """
    held: dict[int, int | None] = {}
    with storage.lock:
        try:
            with immediate_transaction(storage.hot):
                pending = [row["id"] for row in storage.hot.query("SELECT id FROM pending_scrubs")]
                held.update(scrub_owners.claim_abandoned(storage.hot_path, pending))
            if held:
                finish_scrub(storage, None, list(held))
            return bool(held)
        finally:
            scrub_owners.release(storage.hot_path, held)
