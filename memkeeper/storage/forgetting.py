"""Erasure: a user's "forget this" removes every trace of the content, everywhere.

Forgetting deletes the entries from the hot file and from cold storage, deletes every
change-log row about them (their before/after images hold the content), their counted
uses (:mod:`memkeeper.storage.uses`) and their embedding vectors
(:mod:`memkeeper.storage.vectors`), and writes one change-log row saying what was erased,
when and by whom — ids and counts, never content. In the same commit it records hashed
tombstones (:mod:`memkeeper.storage.tombstones`): the scope asked for (and, below a whole
user, each erased id), so that a backup taken earlier can be pruned of the erased entries
and nothing re-imports them. A forget by id of a keyed entry (fact, preference) also
tombstones its key.
Then, on SQLite (:mod:`memkeeper.storage.sqlite.erasure`), :mod:`memkeeper.storage.sqlite.scrub`
makes sure no byte of an erased text is left in either file or its write-ahead log, including
stale copies in the unused space of live pages.

Forgetting something that is not there changes nothing: no change-log row, no tombstone.

On PostgreSQL (:mod:`memkeeper.storage.postgres.forgetting`) the same rows
(:func:`remove_rows`) go in one transaction, then the tables are vacuumed; the byte scrub,
``pending_scrubs`` and its lock files below are SQLite's (:mod:`memkeeper.storage.sqlite.erasure`).

Retryable until no byte remains. The steps are: cold rows deleted (cold commit); hot rows,
change-log rows, tombstone and a ``pending_scrubs`` row (hot commit); scrub; the
``pending_scrubs`` row removed. A crash after the cold commit leaves the entry's change-log
rows in the hot file: a retry finds the entry through them (by id, or by owner and key in
their images) and finishes. A crash after the hot commit leaves the ``pending_scrubs`` row:
the next erasure, or the next job run, rebuilds both files. A row is taken for interrupted
only when its owner is gone: the owner holds a flock on the row's own lock file from before
the commit until the row is deleted (:mod:`memkeeper.storage.sqlite.scrub_owners`), so a
forget still scrubbing in another process is left to finish.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memkeeper.clock import to_db
from memkeeper.storage import derived, erased_values, redaction, transitions
from memkeeper.storage.base import Storage
from memkeeper.storage.batches import delete_in
from memkeeper.storage.changelog import change_row, insert_changes
from memkeeper.storage.tombstones import record as record_tombstone
from memkeeper.storage.transaction import immediate_transaction
from memkeeper.storage.uses import delete_uses
from memkeeper.storage.vectors import delete_vectors

SOURCE_LABEL_CHARS = 12
"""A source shorter than this ("api", "chat") is a label of where a value came from, found
in nearly every row: the byte scrub does not look for it (:func:`_scrubbed`)."""


def _scrubbed(image: Any) -> list[str | None]:
    """The texts of an erased entry the byte scrub looks for: key, value, and its source
    unless it is a short label."""
    source = image.get("source")
    return [image.get("key"), image.get("value")] + (
        [source] if source and len(source) >= SOURCE_LABEL_CHARS else []
    )


# Tables of an owner's that a whole-user or whole-namespace erasure empties, with their texts.
OWNER_TABLES = (
    ("messages", ("content",)),
    ("episodes", ("task_name", "input_summary", "output_summary", "user_feedback")),
)


@dataclass(frozen=True)
class Selection:
    """What to erase: one entry by id, one key of an owner, one namespace of a user (a
    project), or everything of a user."""

    user_id: str | None = None
    namespace: str | None = None
    key: str | None = None
    memory_id: str | None = None

    @property
    def whole_user(self) -> bool:
        return self.memory_id is None and self.key is None and self.namespace is None

    @property
    def whole_namespace(self) -> bool:
        return self.memory_id is None and self.key is None and self.namespace is not None

    def owner_where(self) -> tuple[str, list[Any]]:
        """For a whole user or namespace: a WHERE clause on any table with the owner's
        columns (memories, changes, messages, episodes)."""
        if self.whole_namespace:
            return "user_id = ? AND namespace = ?", [self.user_id, self.namespace]
        return "user_id = ?", [self.user_id]

    def memory_where(self) -> tuple[str, list[Any]]:
        """A WHERE clause valid for both memory tables."""
        if self.memory_id is not None:
            return "id = ?", [self.memory_id]
        if self.whole_user or self.whole_namespace:
            return self.owner_where()
        return "user_id = ? AND namespace = ? AND key = ?", [self.user_id, self.namespace, self.key]

    def change_where(self) -> tuple[str, list[Any]]:
        """A WHERE clause on ``changes`` finding the rows of entries no table holds any more."""
        if self.memory_id is not None:
            return "memory_id = ?", [self.memory_id]
        if self.whole_user or self.whole_namespace:
            return self.owner_where()
        return (
            "user_id = ? AND namespace = ? AND memory_id IS NOT NULL"
            " AND ? IN (json_extract(before, '$.key'), json_extract(after, '$.key'))",
            [self.user_id, self.namespace, self.key],
        )


def _texts_of_changes(rows: Sequence[dict[str, Any]]) -> list[str]:
    texts = []
    for row in rows:
        for column in ("before", "after"):
            if row[column]:
                image = json.loads(row[column])
                texts.extend(_scrubbed(image))
    return texts


def _tombstones(
    selection: Selection,
    rows: Sequence[dict[str, Any]],
    orphans: Sequence[dict[str, Any]],
    ids: Sequence[str],
) -> list[tuple[str, tuple[str, ...]]]:
    """The tombstones an erasure records: the scope asked for, each erased id, and (for a
    forget by id or of a namespace) the key of each keyed entry, found in its row or its
    change-log images."""
    found: list[tuple[str, tuple[str, ...]]] = []
    if selection.memory_id is not None or selection.whole_namespace:
        images = list(rows)
        for row in orphans:
            images += [json.loads(row[c]) for c in ("before", "after") if row[c]]
        keys = {
            (str(image["user_id"]), str(image["namespace"]), str(image["key"]))
            for image in images
            if image.get("key") is not None and image.get("kind") != "note"
        }
        found += [("key", key) for key in sorted(keys)]
    elif selection.whole_user:
        return [("user", (str(selection.user_id),))]  # covers every id; one row per user
    else:
        key = (str(selection.user_id), str(selection.namespace), str(selection.key))
        found.append(("key", key))
    found += [("memory", (memory_id,)) for memory_id in sorted(ids)]
    return found


def erase(
    storage: Storage, selection: Selection, *, actor: str, now: datetime, reason: str
) -> dict[str, int]:
    """Erase what ``selection`` names, with its change-log rows; returns counts.

    With a whole-user or whole-namespace selection, also the owner's messages and episodes.
    Returns counts of what was erased (all zero when nothing was there).
    """
    if storage.hot.dialect == "postgres":
        from memkeeper.storage.postgres.forgetting import erase as erase_on_server

        return erase_on_server(storage, selection, actor=actor, now=now, reason=reason)
    from memkeeper.storage.sqlite.erasure import erase as erase_in_files  # it calls back here

    return erase_in_files(storage, selection, actor=actor, now=now, reason=reason)


def preview(storage: Storage, selection: Selection, *, now: datetime) -> Removed:
    """What :func:`erase` would do with ``selection``, computed and not written: the counts,
    the ids it would erase and what it would reach (:class:`Removed` with no texts)."""
    with storage.lock:
        return remove_rows(storage, selection, actor="preview", now=now, reason="", dry_run=True)


@dataclass
class Removed:
    """What :func:`remove_rows` deleted: counts, the erased texts (for the scrub), ids, and
    what it reached beyond them (None for a whole user or namespace)."""

    counts: dict[str, int]
    texts: list[str]
    ids: list[str]
    reach: derived.Reach | None = None
    kinds: dict[str, str] = field(default_factory=dict)  # of the entries the forget named

    @property
    def anything(self) -> bool:
        return any(self.counts.values())


def remove_rows(
    storage: Storage,
    selection: Selection,
    *,
    actor: str,
    now: datetime,
    reason: str,
    dry_run: bool = False,
) -> Removed:
    """Delete what ``selection`` names, everywhere, and log it; inside the caller's write
    transaction on the hot database (one of both backends' erasures).

    Cold rows (their own commit when cold storage is another file), hot rows, change-log
    rows, uses, vectors, and for a whole user or namespace its messages and episodes; what
    the erasure reaches beyond them (:mod:`memkeeper.storage.derived`: derived entries erased,
    carriers redacted); then, if anything was there, the content-free ``forget`` row, the
    tombstones and the erased values' hashes. ``dry_run``: count all of it, write nothing.
    """
    where, params = selection.memory_where()
    hot = storage.hot
    hot_rows = list(hot.query(f"SELECT * FROM memories WHERE {where}", params))
    cold = storage.cold(create=False)
    cold_rows = (
        list(cold.query(f"SELECT * FROM cold_memories WHERE {where}", params))
        if cold is not None
        else []
    )
    change_sql, change_params = selection.change_where()
    orphans = list(
        hot.query(
            f"SELECT id, memory_id, user_id, namespace, before, after FROM changes"
            f" WHERE {change_sql}",
            change_params,
        )
    )
    named = sorted(
        {r["id"] for r in hot_rows}
        | {r["id"] for r in cold_rows}
        | {r["memory_id"] for r in orphans if r["memory_id"]}
    )
    owner = (hot_rows or cold_rows or orphans or [{}])[0]
    user_id = selection.user_id or owner.get("user_id")
    namespace = selection.namespace if not selection.memory_id else owner.get("namespace")
    values = derived.erased_values_of(hot_rows + cold_rows, orphans)
    reach, hashed = derived.reach_of(
        storage, selection, user_id, namespace, named, values, write=not dry_run
    )
    more = sorted(reach.derived) if reach else []
    all_ids = sorted({*named, *more})
    texts = [text for row in hot_rows + cold_rows for text in _scrubbed(row)]
    texts += _texts_of_changes(orphans)
    if reach is not None:
        texts += sorted(reach.taken)
        texts += [reach.images[i]["value"] for i in more if i in reach.images]
        texts += [v[3] for v in values]
    counts = {"memories": len(named)}
    if dry_run:
        counts.update(_previewed(storage, selection, all_ids, reach))
        kinds = {row["id"]: row["kind"] for row in hot_rows + cold_rows}
        return Removed(counts, [], all_ids, reach, kinds)
    more_cold = [
        i for i in more if reach and i in reach.images and reach.images[i]["state"] == "cold"
    ]
    if cold is not None and (cold_rows or more_cold or (reach and reach.cold_entries)):
        with immediate_transaction(cold):
            delete_in(cold.conn, "cold_memories", "id", [r["id"] for r in cold_rows] + more_cold)
            if reach is not None:
                redaction.apply_cold(cold, reach)
        transitions.step_hook("forget-cold-committed")
    conn = hot.conn
    delete_in(conn, "memories", "id", [r["id"] for r in hot_rows] + more)
    counts["changes"] = delete_in(conn, "changes", "memory_id", all_ids)
    counts["changes"] += delete_in(conn, "changes", "id", [r["id"] for r in orphans])
    delete_uses(hot, all_ids)  # ids and times only: not counted as erased content
    delete_vectors(hot, all_ids)  # embeddings: no text, but derived from it
    if selection.whole_user or selection.whole_namespace:
        owner_sql, owner_params = selection.owner_where()
        for table, columns in OWNER_TABLES:
            rows = list(
                hot.query(
                    f"SELECT {', '.join(columns)} FROM {table} WHERE {owner_sql}",
                    owner_params,
                )
            )
            texts += [row[c] for row in rows for c in columns]
            counts[table] = conn.execute(
                f"DELETE FROM {table} WHERE {owner_sql}", owner_params
            ).rowcount
    if reach is not None:
        redaction.apply(storage, reach, actor=actor, now=now, reason=_REDACT_REASON)
        delete_vectors(hot, sorted(reach.entries))  # re-embedded from the redacted text
        counts.update(reach.counts())
    removed = Removed(counts, texts, all_ids, reach)
    if removed.anything:
        insert_changes(
            hot,
            [
                change_row(
                    at=to_db(now),
                    actor=actor,
                    action="forget",
                    reason=reason,
                    before=None,
                    after=None,
                    user_id=user_id,
                    namespace=namespace,
                    details={"memory_ids": all_ids, "erased": counts},
                )
            ],
        )
        for scope, parts in _tombstones(selection, hot_rows + cold_rows, orphans, all_ids):
            record_tombstone(conn, scope, parts, now)
        if user_id is not None:
            erased_values.record(conn, user_id, hashed, now)
    return removed


_REDACT_REASON = "redacted by a forget at the user's request: an erased value became [erased]"


def _change_ids(hot: Any, ids: Sequence[str], reach: derived.Reach | None) -> set[int]:
    marks = ", ".join("?" for _ in ids)
    sql = f"SELECT id FROM changes WHERE memory_id IN ({marks})"
    params: list[Any] = list(ids)
    if reach is not None:
        sql += " AND user_id = ?"
        params.append(reach.user_id)
    return {row["id"] for row in hot.query(sql, params)}


def _previewed(
    storage: Storage,
    selection: Selection,
    all_ids: Sequence[str],
    reach: derived.Reach | None,
) -> dict[str, int]:
    """The counts a dry run reports: what the same erasure would delete and redact."""
    hot = storage.hot
    counts: dict[str, int] = {}
    if selection.whole_user or selection.whole_namespace:
        owner_sql, owner_params = selection.owner_where()
        for table, _columns in (("changes", ()), *OWNER_TABLES):
            sql = f"SELECT count(*) AS n FROM {table} WHERE {owner_sql}"
            counts[table] = int(next(iter(hot.query(sql, owner_params)))["n"])
    else:
        counts["changes"] = len(_change_ids(hot, all_ids, reach)) if all_ids else 0
    if reach is not None:
        counts.update(reach.counts())
    return counts


def finish_interrupted(storage: Storage) -> bool:
    """Rebuild both files if an erasure was interrupted after its commit. True if it was.

    Interrupted means its owner is gone (:mod:`~memkeeper.storage.sqlite.scrub_owners`): a row
    whose owner is still scrubbing, in this or another process, is left to it.
    """
    if storage.hot.dialect == "postgres":
        return False  # a PostgreSQL erasure has nothing left to finish after its commit
    from memkeeper.storage.sqlite.erasure import finish_interrupted as finish_in_files

    return finish_in_files(storage)


def purge_pending_indexes(storage: Storage) -> list[str]:
    """Rewrite the keyword indexes that still hold trigrams of erased texts (SQLite's FTS5;
    the nightly settle run calls it first). Returns the files done; PostgreSQL has nothing
    pending (its trigram index is of the row versions, which the erasure's VACUUM removes)."""
    if storage.hot.dialect == "postgres":
        return []
    from memkeeper.storage.sqlite.erasure import purge_indexes

    return purge_indexes(storage)


def index_purge_pending_since(storage: Storage) -> str | None:
    """Since when a keyword index holds trigrams of erased texts (None: none does)."""
    if storage.hot.dialect == "postgres":
        return None
    from memkeeper.storage.sqlite.erasure import pending_index_purge

    return pending_index_purge(storage)
