"""MemoryStore: the API agents use to write and read memory.

One object over the two files (hot database and cold storage), safe to use from several
processes at once (SQLite WAL, immediate write transactions, a busy timeout) and from several
threads of one process (an internal lock). Every change to a memory goes through
:mod:`memkeeper.storage.transitions` and is logged in the same transaction; erasure goes through
:mod:`memkeeper.storage.forgetting`.
"""

from __future__ import annotations

import builtins
import secrets
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from memkeeper import validation
from memkeeper.audit.explain import explain as render_explanation
from memkeeper.audit.log import query_changes
from memkeeper.clock import Clock, system_now, to_db
from memkeeper.config import Config
from memkeeper.errors import InvalidInput, NotFound, StorageUnwritable
from memkeeper.records import (
    KEYED_KINDS,
    Change,
    Context,
    Episode,
    JobRun,
    Memory,
    Message,
)
from memkeeper.scoring import rank_key, retention_score
from memkeeper.settings import database_paths, resolve
from memkeeper.storage.changelog import image_of
from memkeeper.storage.files import Storage
from memkeeper.storage.forgetting import Selection, erase
from memkeeper.storage.sqlite import immediate_transaction
from memkeeper.storage.transitions import (
    Image,
    Outcome,
    Transition,
    apply,
    hot_image,
    supersede,
    used_image,
    with_changes,
)

log = structlog.get_logger("memkeeper.store")

DEFAULT_CONFIDENCE = 0.9
"""Confidence of a remembered value when the caller does not say (≈ stated by the user)."""


def new_memory_id() -> str:
    """A fresh random memory id (16 hex digits)."""
    return secrets.token_hex(8)


def resolve_paths(path: str | Path | None, config: Config) -> tuple[Path, Path]:
    """The hot and cold file paths, by :func:`memkeeper.settings.database_paths` (the one
    resolution shared with the CLI and the service; README "Configuration")."""
    hot, cold, _source = database_paths(path, config)
    return hot, cold


class MemoryStore:
    """The memory of every user and agent, in one SQLite database (and its cold storage).

    ``MemoryStore()`` opens (creating on first use) the database and settings the CLI and the
    service use: ``MEMKEEPER_DB``, else ``database.path`` of the config file
    (``MEMKEEPER_CONFIG``, else the per-user one), else the per-user data directory — see
    :mod:`memkeeper.settings` and the README's "Configuration". ``MemoryStore(path)`` opens
    another file; ``config`` is a Config or a config file path (default: the config file, so
    ``[limits]`` etc. apply to every caller alike). ``clock`` supplies "now" (tests and the
    CLI's ``--now`` pass a fixed one); ``actor`` prefixes the change log's actor column.
    ``create=False`` opens an existing database only: a missing one raises
    :class:`~memkeeper.errors.DatabaseMissing` instead of being created (read commands use it).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        config: Config | str | Path | None = None,
        clock: Clock | None = None,
        actor: str = "api",
        create: bool = True,
    ) -> None:
        # The same resolution as the CLI and the service: a Config, a config file, or None
        # for MEMKEEPER_CONFIG / the per-user config file (missing = defaults).
        settings = resolve(path, config)
        self.config = settings.config
        hot, cold = settings.hot_path, settings.cold_path
        self.clock: Clock = clock or system_now
        self.actor = actor
        self.storage = Storage(
            hot, cold, busy_timeout_ms=self.config.database.busy_timeout_ms, create=create
        )

    # -- plumbing ---------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The hot database file."""
        return self.storage.hot_path

    @property
    def cold_path(self) -> Path:
        """The cold-storage file (it may not exist yet)."""
        return self.storage.cold_path

    def now(self) -> datetime:
        """The store's current time (aware UTC)."""
        return self.clock()

    def close(self) -> None:
        """Close the database connections."""
        self.storage.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _apply(self, transitions: Sequence[Transition], verb: str) -> list[Outcome]:
        return apply(self.storage, transitions, actor=f"{self.actor}:{verb}", now=self.now())

    def _owner(self, user_id: str, namespace: str) -> tuple[str, str]:
        limit = self.config.limits.max_key_chars
        return (
            validation.identifier("user_id", user_id, max_chars=limit),
            validation.identifier("namespace", namespace, max_chars=limit, allow_empty=True),
        )

    def _key(self, key: str) -> str:
        return validation.identifier("key", key, max_chars=self.config.limits.max_key_chars)

    def _value(self, field: str, value: str) -> str:
        return validation.text(field, value, max_bytes=self.config.limits.max_value_bytes)

    def _source(self, source: str) -> str:
        return validation.text("source", source, max_bytes=1024, allow_empty=True)

    def _lookup(self, *fields: tuple[str, str | None]) -> None:
        """Check ids and filters to look up are text SQLite can bind (None = no filter).

        Without this, a lone surrogate (a non-UTF-8 command-line argument) escaped as a raw
        UnicodeEncodeError from sqlite3 instead of InvalidInput.
        """
        for field, value in fields:
            if value is not None:
                validation.text(
                    field, value, max_bytes=self.config.limits.max_value_bytes, allow_empty=True
                )

    def _new_image(
        self,
        *,
        user_id: str,
        namespace: str,
        kind: str,
        key: str | None,
        value: str,
        source: str,
        confidence: float,
        pinned: bool,
        ttl_days: int | None,
        now: datetime,
        created_at: datetime | None = None,
    ) -> Image:
        stamp = to_db(now)
        created = to_db(created_at) if created_at else stamp
        return {
            "id": new_memory_id(),
            "user_id": user_id,
            "namespace": namespace,
            "kind": kind,
            "key": key,
            "value": value,
            "source": source,
            "confidence": confidence,
            "state": "active",
            "pinned": int(pinned),
            "ttl_days": ttl_days,
            "created_at": created,
            "updated_at": created,
            "last_accessed_at": None,
            "access_count": 0,
            "state_since": stamp,
            "last_used_at": created,
        }

    def _current(self, user_id: str, namespace: str, kind: str, key: str) -> Image | None:
        rows = self.storage.hot.query(
            "SELECT * FROM memories WHERE user_id = ? AND namespace = ? AND kind = ? AND key = ?"
            " AND state IN ('active', 'pending_review')",
            [user_id, namespace, kind, key],
        )
        row = next(iter(rows), None)
        return image_of(row) if row else None

    # -- writing ----------------------------------------------------------------------------

    def remember(
        self,
        user_id: str,
        key: str,
        value: str,
        *,
        namespace: str = "",
        kind: str = "fact",
        confidence: float = DEFAULT_CONFIDENCE,
        source: str = "api",
        pinned: bool | None = None,
        ttl_days: int | None = None,
    ) -> Memory:
        """Remember ``key = value`` for a user; returns the entry that is now current.

        The same value again re-confirms the entry (updated_at refreshed, confidence raised
        to the higher of the two, back to active). A different value is a conflict: the new
        value becomes active and the old one ``superseded`` — kept through its grey period.
        Re-asserting a superseded value during its grey period makes it current again.
        ``pinned`` None keeps the entry's pin (new entries: not pinned); ``ttl_days``
        overrides the kind's TTL for this entry.
        """
        user_id, namespace = self._owner(user_id, namespace)
        key = self._key(key)
        value = self._value("value", value)
        if kind not in KEYED_KINDS:
            if kind == "note":
                raise InvalidInput("notes have no key: use add_note() for kind 'note'")
            validation.kind(kind)
        confidence = validation.confidence(confidence)
        source = self._source(source)
        ttl_days = validation.ttl_days(ttl_days)
        with self.storage.lock, immediate_transaction(self.storage.hot):
            now = self.now()
            transitions, result_id = self._remember_plan(
                user_id, namespace, kind, key, value, confidence, source, pinned, ttl_days, now
            )
            self._apply(transitions, "remember")
            result = self.storage.hot_images([result_id])[result_id]
        return Memory.from_image(result)

    def _remember_plan(
        self,
        user_id: str,
        namespace: str,
        kind: str,
        key: str,
        value: str,
        confidence: float,
        source: str,
        pinned: bool | None,
        ttl_days: int | None,
        now: datetime,
    ) -> tuple[list[Transition], str]:
        stamp = to_db(now)
        current = self._current(user_id, namespace, kind, key)

        def reconfirmed(image: Image, why: str) -> Transition:
            stronger = confidence >= image["confidence"]
            target = with_changes(
                image,
                updated_at=stamp,
                confidence=max(confidence, image["confidence"]),
                source=source if stronger else image["source"],
                pinned=int(pinned) if pinned is not None else image["pinned"],
                ttl_days=ttl_days if ttl_days is not None else image["ttl_days"],
            )
            if target["state"] != "active":
                target = hot_image(target, "active", now)
            return Transition(image["id"], image, target, "reconfirm", why, source=source)

        if current is not None and current["value"] == value:
            return [reconfirmed(current, "the same value was asserted again")], current["id"]

        transitions: list[Transition] = []
        previous = self.storage.hot.query(
            "SELECT * FROM memories WHERE user_id = ? AND namespace = ? AND kind = ? AND key = ?"
            " AND state = 'superseded' AND value = ? ORDER BY updated_at DESC LIMIT 1",
            [user_id, namespace, kind, key, value],
        )
        earlier = next(iter(previous), None)
        if earlier is not None:
            revived = reconfirmed(image_of(earlier), "re-asserted during its grey period")
            new_id = earlier["id"]
        else:
            image = self._new_image(
                user_id=user_id,
                namespace=namespace,
                kind=kind,
                key=key,
                value=value,
                source=source,
                confidence=confidence,
                pinned=bool(pinned),
                ttl_days=ttl_days,
                now=now,
            )
            why = "new value" if current is None else f"new value replacing {current['id']}"
            revived = Transition(image["id"], None, image, "create", why, source=source)
            new_id = image["id"]
        if current is not None:
            transitions.append(
                replace(
                    supersede(
                        current,
                        new_id,
                        now,
                        f"conflicting value: replaced by {new_id}; kept through the grey period",
                    ),
                    source=source,
                )
            )
        transitions.append(revived)
        return transitions, new_id

    def add_note(
        self,
        user_id: str,
        text: str,
        *,
        namespace: str = "",
        source: str = "api",
        confidence: float = DEFAULT_CONFIDENCE,
        pinned: bool = False,
        ttl_days: int | None = None,
    ) -> Memory:
        """Add a note (an event, reminder or summary without a key); returns it."""
        user_id, namespace = self._owner(user_id, namespace)
        text = self._value("note", text)
        image = self._new_image(
            user_id=user_id,
            namespace=namespace,
            kind="note",
            key=None,
            value=text,
            source=self._source(source),
            confidence=validation.confidence(confidence),
            pinned=pinned,
            ttl_days=validation.ttl_days(ttl_days),
            now=self.now(),
        )
        self._apply([Transition(image["id"], None, image, "create", "new note")], "add_note")
        return Memory.from_image(image)

    def append_message(
        self, user_id: str, session_id: str, role: str, content: str, *, namespace: str = ""
    ) -> Message:
        """Append one message to a session's conversation history."""
        user_id, namespace = self._owner(user_id, namespace)
        session_id = validation.identifier(
            "session_id", session_id, max_chars=self.config.limits.max_key_chars
        )
        role = validation.role(role)
        content = self._value("content", content)
        stamp = to_db(self.now())
        with self.storage.lock, immediate_transaction(self.storage.hot):
            cursor = self.storage.hot.conn.execute(
                "INSERT INTO messages (user_id, namespace, session_id, role, content, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [user_id, namespace, session_id, role, content, stamp],
            )
            message_id = cursor.lastrowid
        row = next(
            iter(self.storage.hot.query("SELECT * FROM messages WHERE id = ?", [message_id]))
        )
        return Message.from_row(row)

    def record_episode(
        self,
        user_id: str,
        task_name: str,
        *,
        namespace: str = "",
        input_summary: str = "",
        output_summary: str = "",
        user_feedback: str = "",
        status: str = "completed",
    ) -> Episode:
        """Record one task's episode: what went in, what came out, what the user changed."""
        user_id, namespace = self._owner(user_id, namespace)
        limit = self.config.limits.max_value_bytes
        values = [
            user_id,
            namespace,
            validation.text("task_name", task_name, max_bytes=1024),
            validation.text("input_summary", input_summary, max_bytes=limit, allow_empty=True),
            validation.text("output_summary", output_summary, max_bytes=limit, allow_empty=True),
            validation.text("user_feedback", user_feedback, max_bytes=limit, allow_empty=True),
            validation.episode_status(status),
            to_db(self.now()),
        ]
        with self.storage.lock, immediate_transaction(self.storage.hot):
            cursor = self.storage.hot.conn.execute(
                "INSERT INTO episodes (user_id, namespace, task_name, input_summary,"
                " output_summary, user_feedback, status, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                values,
            )
            episode_id = cursor.lastrowid
        row = next(
            iter(self.storage.hot.query("SELECT * FROM episodes WHERE id = ?", [episode_id]))
        )
        return Episode.from_row(row)

    # -- reading ----------------------------------------------------------------------------

    def recall(
        self, user_id: str, key: str, *, namespace: str = "", kind: str | None = None
    ) -> Memory | None:
        """The current value of ``key`` (None when absent), marked as used.

        A pending-review entry is renewed to active; an entry found only in cold storage is
        brought back to active. Every recall is a logged change (action ``recall``, ``renew``
        or ``restore``), so the change log holds an entry's complete history.
        """
        user_id, namespace = self._owner(user_id, namespace)
        key = self._key(key)
        kinds = KEYED_KINDS if kind is None else (validation.kind(kind),)
        try:
            return self._recall_and_mark(user_id, namespace, key, kinds)
        except StorageUnwritable as exc:
            # A read-only (or full) database still answers; only the use goes unrecorded.
            memory = self._peek(user_id, namespace, key, kinds)
            if memory is not None:
                log.warning(
                    "recalled, but its use could not be recorded",
                    memory_id=memory.id,
                    cause=str(exc),
                )
            return memory

    def _peek(self, user_id: str, namespace: str, key: str, kinds: Sequence[str]) -> Memory | None:
        """The value ``recall`` would return, read without marking anything."""
        sql = (
            " WHERE user_id = ? AND namespace = ? AND key = ?"
            f" AND kind IN ({', '.join('?' * len(kinds))})"
        )
        params = [user_id, namespace, key, *kinds]
        with self.storage.lock:
            rows = builtins.list(
                self.storage.hot.query(
                    f"SELECT * FROM memories{sql} AND state IN ('active', 'pending_review')"
                    " ORDER BY last_used_at DESC LIMIT 1",
                    params,
                )
            )
            cold = self.storage.cold(create=False)
            if not rows and cold is not None:
                rows = builtins.list(
                    cold.query(
                        f"SELECT * FROM cold_memories{sql}"
                        " ORDER BY cold_reason = 'superseded', updated_at DESC LIMIT 1",
                        params,
                    )
                )
        return Memory.from_image(image_of(rows[0])) if rows else None

    def _recall_and_mark(
        self, user_id: str, namespace: str, key: str, kinds: Sequence[str]
    ) -> Memory | None:
        with self.storage.lock:
            with immediate_transaction(self.storage.hot):
                now = self.now()
                rows = self.storage.hot.query(
                    "SELECT * FROM memories WHERE user_id = ? AND namespace = ? AND key = ?"
                    f" AND kind IN ({', '.join('?' * len(kinds))})"
                    " AND state IN ('active', 'pending_review') ORDER BY last_used_at DESC",
                    [user_id, namespace, key, *kinds],
                )
                found = next(iter(rows), None)
                if found is not None:
                    image = image_of(found)
                    target = used_image(image, now)
                    if image["state"] == "pending_review":
                        transition = Transition(
                            image["id"],
                            image,
                            hot_image(target, "active", now),
                            "renew",
                            "recalled while pending review",
                        )
                    else:
                        transition = Transition(image["id"], image, target, "recall", "recalled")
                    self._apply([transition], "recall")
                    return Memory.from_image(transition.target)  # type: ignore[arg-type]
            return self._recall_from_cold(user_id, namespace, key, kinds)

    def _recall_from_cold(
        self, user_id: str, namespace: str, key: str, kinds: Sequence[str]
    ) -> Memory | None:
        cold = self.storage.cold(create=False)
        if cold is None:
            return None
        # Prefer the value that was current when it was retired over superseded ones.
        rows = cold.query(
            "SELECT * FROM cold_memories WHERE user_id = ? AND namespace = ? AND key = ?"
            f" AND kind IN ({', '.join('?' * len(kinds))})"
            " ORDER BY cold_reason = 'superseded', updated_at DESC LIMIT 1",
            [user_id, namespace, key, *kinds],
        )
        found = next(iter(rows), None)
        if found is None:
            return None
        image = image_of(found)
        now = self.now()
        target = used_image(hot_image(image, "active", now), now)
        outcome = self._apply(
            [Transition(image["id"], image, target, "restore", "recalled from cold storage")],
            "recall",
        )[0]
        if not outcome.applied:
            # Someone else moved it meanwhile, or made a newer value current (the newer write
            # wins): look again.
            return self._recall_and_mark(user_id, namespace, key, kinds)
        return Memory.from_image(target)

    def get(self, memory_id: str) -> Memory | None:
        """One memory by id, wherever it lives (hot or cold), with its state; None if absent."""
        self._lookup(("memory_id", memory_id))
        with self.storage.lock:
            image = self.storage.current_images([memory_id]).get(memory_id)
        return Memory.from_image(image) if image else None

    def list_memories(
        self,
        user_id: str | None = None,
        *,
        namespace: str | None = None,
        state: str | None = None,
        kind: str | None = None,
    ) -> builtins.list[Memory]:
        """Memories matching the filters (None = any), hot first then cold, oldest first."""
        if state is not None:
            validation.choice("state", state, ("active", "pending_review", "superseded", "cold"))
        if kind is not None:
            validation.kind(kind)
        self._lookup(("user_id", user_id), ("namespace", namespace))
        where, params = [], []
        for column, value in (("user_id", user_id), ("namespace", namespace), ("kind", kind)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        results: builtins.list[Memory] = []
        with self.storage.lock:
            if state != "cold":
                hot_where = where + (["state = ?"] if state else [])
                sql = "SELECT * FROM memories"
                if hot_where:
                    sql += " WHERE " + " AND ".join(hot_where)
                rows = self.storage.hot.query(
                    sql + " ORDER BY created_at, id", params + ([state] if state else [])
                )
                results.extend(Memory.from_image(image_of(row)) for row in rows)
            cold = self.storage.cold(create=False)
            if cold is not None and state in (None, "cold"):
                sql = "SELECT * FROM cold_memories"
                if where:
                    sql += " WHERE " + " AND ".join(where)
                rows = cold.query(sql + " ORDER BY created_at, id", params)
                seen = {memory.id for memory in results}
                results.extend(
                    Memory.from_image(image_of(row)) for row in rows if row["id"] not in seen
                )
        return results

    list = list_memories

    def history(
        self, user_id: str, session_id: str, *, namespace: str = "", limit: int | None = None
    ) -> builtins.list[Message]:
        """A session's unsummarized messages, oldest first (the newest ``limit`` if given)."""
        user_id, namespace = self._owner(user_id, namespace)
        self._lookup(("session_id", session_id))
        sql = (
            "SELECT * FROM messages WHERE user_id = ? AND namespace = ? AND session_id = ?"
            " AND summarized_at IS NULL ORDER BY id DESC"
        )
        params: builtins.list[Any] = [user_id, namespace, session_id]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(self._limit(limit))
        with self.storage.lock:
            rows = builtins.list(self.storage.hot.query(sql, params))
        return [Message.from_row(row) for row in reversed(rows)]

    def episodes(
        self, user_id: str, *, namespace: str = "", limit: int = 20
    ) -> builtins.list[Episode]:
        """The project's most recent ``limit`` episodes, in time order (a timeline)."""
        user_id, namespace = self._owner(user_id, namespace)
        with self.storage.lock:
            rows = builtins.list(
                self.storage.hot.query(
                    "SELECT * FROM episodes WHERE user_id = ? AND namespace = ?"
                    " ORDER BY created_at DESC, id DESC LIMIT ?",
                    [user_id, namespace, self._limit(limit)],
                )
            )
        return [Episode.from_row(row) for row in reversed(rows)]

    def context(self, user_id: str, *, namespace: str = "", limit: int | None = None) -> Context:
        """The small ranked prefill for a prompt: the user's best active entries and notes.

        Only active entries at or above ``[context] min_confidence``, ranked by the retention
        score (confidence first, then freshness and use), at most ``limit`` (default
        ``[context] limit``, 10). Building a context does not mark entries as used — only
        recall does — so prefilled entries still expire when nobody actually needs them.
        """
        user_id, namespace = self._owner(user_id, namespace)
        limit = self._limit(limit if limit is not None else self.config.context.limit)
        now = self.now()
        with self.storage.lock:
            rows = builtins.list(
                self.storage.hot.query(
                    "SELECT * FROM memories WHERE user_id = ? AND namespace = ?"
                    " AND kind IN ('fact', 'preference', 'note') AND state = 'active'"
                    " AND confidence >= ?",
                    [user_id, namespace, self.config.context.min_confidence],
                )
            )
        memories = [Memory.from_image(image_of(row)) for row in rows]
        scored = [(m, retention_score(m, now, self.config.scoring)) for m in memories]
        scored.sort(key=lambda pair: rank_key(*pair), reverse=True)
        chosen = [memory for memory, _ in scored[:limit]]
        return Context(memories=chosen, text=_prompt_text(chosen))

    # -- forgetting -------------------------------------------------------------------------

    def forget(self, user_id: str, key: str, *, namespace: str = "") -> int:
        """Erase every value ``key`` ever had for the user (hot, cold, log). Returns how many."""
        user_id, namespace = self._owner(user_id, namespace)
        key = self._key(key)
        counts = erase(
            self.storage,
            Selection(user_id=user_id, namespace=namespace, key=key),
            actor=f"{self.actor}:forget",
            now=self.now(),
            reason="erased every value of one key at the user's request",
        )
        return counts["memories"]

    def forget_memory(self, memory_id: str) -> int:
        """Erase one entry (a note, say) by id, with its history. Returns 1, or 0 if absent."""
        self._lookup(("memory_id", memory_id))
        counts = erase(
            self.storage,
            Selection(memory_id=memory_id),
            actor=f"{self.actor}:forget",
            now=self.now(),
            reason="erased one entry at the user's request",
        )
        return counts["memories"]

    def forget_user(self, user_id: str) -> dict[str, int]:
        """Erase everything about a user: memories, messages, episodes, their log rows."""
        user_id = validation.identifier(
            "user_id", user_id, max_chars=self.config.limits.max_key_chars
        )
        return erase(
            self.storage,
            Selection(user_id=user_id),
            actor=f"{self.actor}:forget_user",
            now=self.now(),
            reason="erased everything about the user at their request",
        )

    # -- the change log and runs ------------------------------------------------------------

    def changes(
        self,
        *,
        memory_id: str | None = None,
        run_id: str | None = None,
        user_id: str | None = None,
        namespace: str | None = None,
        action: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> builtins.list[Change]:
        """Change-log rows matching every given filter."""
        filters = {
            "memory_id": memory_id,
            "run_id": run_id,
            "user_id": user_id,
            "namespace": namespace,
            "action": action,
        }
        self._lookup(*filters.items())
        with self.storage.lock:
            return query_changes(
                self.storage.hot,
                filters,
                limit=self._limit(limit) if limit is not None else None,
                newest_first=newest_first,
            )

    def explain(self, memory_id: str) -> str:
        """One memory's whole life in plain words."""
        memory = self.get(memory_id)
        changes = self.changes(memory_id=memory_id)
        if memory is None and not changes:
            with self.storage.lock:
                tombstones = [
                    change
                    for change in query_changes(self.storage.hot, {"action": "forget"})
                    if memory_id in change.details.get("memory_ids", [])
                ]
            if not tombstones:
                raise NotFound(f"no memory with id {memory_id!r}, and none was ever erased")
            changes = tombstones
        return render_explanation(memory, changes, memory_id)

    def job_runs(self, *, job: str | None = None, limit: int = 20) -> builtins.list[JobRun]:
        """Recent job runs, newest first."""
        sql = "SELECT * FROM job_runs"
        params: builtins.list[Any] = []
        if job is not None:
            sql += " WHERE job = ?"
            params.append(job)
        sql += " ORDER BY started_at DESC, run_id DESC LIMIT ?"
        params.append(self._limit(limit))
        with self.storage.lock:
            return [JobRun.from_row(row) for row in self.storage.hot.query(sql, params)]

    def status(self) -> dict[str, Any]:
        """Counts per state and kind, the files and their sizes, and the last run of each job."""
        with self.storage.lock:
            counts: dict[str, dict[str, int]] = {}
            for row in self.storage.hot.query(
                "SELECT state, kind, count(*) AS n FROM memories GROUP BY state, kind"
            ):
                counts.setdefault(row["state"], {})[row["kind"]] = row["n"]
            cold = self.storage.cold(create=False)
            if cold is not None:
                for row in cold.query(
                    "SELECT kind, count(*) AS n FROM cold_memories GROUP BY kind"
                ):
                    counts.setdefault("cold", {})[row["kind"]] = row["n"]
            messages = self.storage.hot.execute(
                "SELECT count(*), count(*) - count(summarized_at) FROM messages"
            ).fetchone()
            episodes = self.storage.hot.execute("SELECT count(*) FROM episodes").fetchone()[0]
            last_runs = {
                row["job"]: JobRun.from_row(row)
                for row in self.storage.hot.query(
                    "SELECT * FROM job_runs WHERE started_at = (SELECT max(started_at) FROM"
                    " job_runs AS newest WHERE newest.job = job_runs.job) ORDER BY job"
                )
            }
        return {
            "counts": counts,
            "messages": {"total": messages[0], "unsummarized": messages[1]},
            "episodes": episodes,
            "files": {
                "hot": _file_sizes(self.path),
                "cold": _file_sizes(self.cold_path),
            },
            "last_runs": last_runs,
        }

    # -- record helpers ---------------------------------------------------------------------

    @staticmethod
    def _limit(limit: int) -> int:
        return validation.limit(limit)


def _file_sizes(path: Path) -> dict[str, Any]:
    sizes = {}
    for suffix in ("", "-wal"):
        candidate = Path(f"{path}{suffix}")
        sizes[suffix.lstrip("-") or "db"] = candidate.stat().st_size if candidate.exists() else None
    return {"path": str(path), "bytes": sizes}


def _prompt_text(memories: Sequence[Memory]) -> str:
    """Render memories as the prompt block seed 000 injects into the system prompt."""
    if not memories:
        return ""
    sections = []
    facts = [m for m in memories if m.kind == "fact"]
    preferences = [m for m in memories if m.kind == "preference"]
    notes = sorted((m for m in memories if m.kind == "note"), key=lambda m: m.created_at)
    if facts:
        sections.append("Known facts:\n" + "\n".join(f"- {m.key}: {m.value}" for m in facts))
    if preferences:
        sections.append("Preferences:\n" + "\n".join(f"- {m.key}: {m.value}" for m in preferences))
    if notes:
        sections.append(
            "Notes:\n" + "\n".join(f"- [{m.created_at:%Y-%m-%d %H:%M}] {m.value}" for m in notes)
        )
    return "\n\n".join(sections)
