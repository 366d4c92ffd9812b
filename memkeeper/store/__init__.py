"""MemoryStore: the API agents use to write and read memory.

One object over the two files (hot database and cold storage), safe to use from several
processes (SQLite WAL, immediate write transactions, a busy timeout) and threads at once.
Every change goes through :mod:`memkeeper.storage.transitions`, logged in its transaction;
erasure goes through :mod:`memkeeper.storage.forgetting`.

``MemoryStore`` is a facade: each method hands the call to the module of its concern, which
checks the input and does the work on the store's shared :class:`~memkeeper.store.core.StoreCore`
(the files, settings, clock and actor):

* :mod:`~memkeeper.store.entries` — the engine functions on entries (the current value of a
  key, a new entry's image, what remembering a value changes), shared with imports,
  curation, undo and the summarize job;
* :mod:`~memkeeper.store.writing` — ``remember`` and ``add_note``;
* :mod:`~memkeeper.store.conversations` — messages, episodes and ``history``;
* ``recall``, ``search``, ``get``/``list_memories`` and the prompt prefill: in
  :mod:`~memkeeper.store.recall`, ``search``, ``listing`` and ``context``;
* :mod:`~memkeeper.store.forgetting` — the ``forget`` calls and their previews;
* :mod:`~memkeeper.store.inspection` — the change log, ``explain``, job runs and ``status``;
* :mod:`~memkeeper.store.transfer` — importing and exporting files.
"""

from __future__ import annotations

import builtins
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memkeeper.clock import Clock, system_now
from memkeeper.settings import database_paths, resolve
from memkeeper.storage.base import Storage
from memkeeper.storage.opening import open_storage
from memkeeper.store.core import Concern as _Concern
from memkeeper.store.core import StoreCore
from memkeeper.store.entries import DEFAULT_CONFIDENCE, new_memory_id

if TYPE_CHECKING:
    from memkeeper.config import Config
    from memkeeper.records import Change, Context, Episode, JobRun, Memory, Message, SearchResults

__all__ = ["DEFAULT_CONFIDENCE", "MemoryStore", "new_memory_id", "resolve_paths"]


context = _Concern("context")
conversations = _Concern("conversations")
forgetting = _Concern("forgetting")
inspection = _Concern("inspection")
listing = _Concern("listing")
recall = _Concern("recall")
search = _Concern("search")
writing = _Concern("writing")


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
    :mod:`memkeeper.settings` and the Configuration reference. ``MemoryStore(path)`` opens
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
        storage = open_storage(settings, create=create)
        self._core = StoreCore(storage, settings.config, clock or system_now, actor)

    # -- plumbing: the shared state lives on the core, so every concern sees a change -------

    @property
    def storage(self) -> Storage:
        """The two files (:class:`~memkeeper.storage.base.Storage`)."""
        return self._core.storage

    @storage.setter
    def storage(self, storage: Storage) -> None:
        self._core.storage = storage

    @property
    def config(self) -> Config:
        """The settings in force (the daemon replaces them when it reloads its config)."""
        return self._core.config

    @config.setter
    def config(self, config: Config) -> None:
        self._core.config = config

    @property
    def clock(self) -> Clock:
        """What supplies "now"."""
        return self._core.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self._core.clock = clock

    @property
    def actor(self) -> str:
        """The prefix of the change log's actor column for this store's changes."""
        return self._core.actor

    @actor.setter
    def actor(self, actor: str) -> None:
        self._core.actor = actor

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
        return self._core.now()

    def close(self) -> None:
        """Close the database connections."""
        self.storage.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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
        return writing.remember(
            self._core,
            user_id,
            key,
            value,
            namespace=namespace,
            kind=kind,
            confidence=confidence,
            source=source,
            pinned=pinned,
            ttl_days=ttl_days,
        )

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
        return writing.add_note(
            self._core,
            user_id,
            text,
            namespace=namespace,
            source=source,
            confidence=confidence,
            pinned=pinned,
            ttl_days=ttl_days,
        )

    def append_message(
        self, user_id: str, session_id: str, role: str, content: str, *, namespace: str = ""
    ) -> Message:
        """Append one message to a session's conversation history."""
        return conversations.append_message(
            self._core, user_id, session_id, role, content, namespace=namespace
        )

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
        return conversations.record_episode(
            self._core,
            user_id,
            task_name,
            namespace=namespace,
            input_summary=input_summary,
            output_summary=output_summary,
            user_feedback=user_feedback,
            status=status,
        )

    # -- reading ----------------------------------------------------------------------------

    def recall(
        self, user_id: str, key: str, *, namespace: str = "", kind: str | None = None
    ) -> Memory | None:
        """The current value of ``key`` for ``user_id`` in ``namespace``, marked as used; or
        ``None`` when there is none. A missing key is not an error: nothing is raised.
        Returns a :class:`~memkeeper.records.Memory` (``.value``, ``.confidence``, ``.id``...)
        or ``None``, so check before reading it::

            memory = store.recall("alice", "city")
            city = memory.value if memory is not None else "unknown"

        ``None``: no fact or preference (``kind`` None: either; notes have no key) holds
        ``key`` now for this user in this namespace. It was never remembered, erased by a
        ``forget`` (which leaves nothing behind: a forgotten key reads as one never stored),
        or remembered only in another namespace (the profile is ``""``) or for another user.
        A replaced value is not returned; the newer one is. Bad arguments raise InvalidInput.

        A pending-review entry is renewed to active and an entry found only in cold storage
        is brought back to active: logged changes (``renew``, ``restore``). Recalling an
        active entry is one short write that updates its use in place and counts it in the
        ``uses`` table, without a change-log row (:mod:`memkeeper.store.recall`).
        """
        return recall.recall(self._core, user_id, key, namespace=namespace, kind=kind)

    def get(self, memory_id: str) -> Memory | None:
        """One memory by id, wherever it lives (hot or cold), with its state; None if absent."""
        return listing.get(self._core, memory_id)

    def list_memories(
        self,
        user_id: str | None = None,
        *,
        namespace: str | None = None,
        state: str | None = None,
        kind: str | None = None,
    ) -> builtins.list[Memory]:
        """Memories matching the filters (None = any), hot first then cold, oldest first."""
        return listing.list_memories(
            self._core, user_id, namespace=namespace, state=state, kind=kind
        )

    list = list_memories

    def history(
        self, user_id: str, session_id: str, *, namespace: str = "", limit: int | None = None
    ) -> builtins.list[Message]:
        """A session's unsummarized messages, oldest first (the newest ``limit`` if given)."""
        return conversations.history(
            self._core, user_id, session_id, namespace=namespace, limit=limit
        )

    def episodes(
        self, user_id: str, *, namespace: str = "", limit: int = 20
    ) -> builtins.list[Episode]:
        """The project's most recent ``limit`` episodes, in time order (a timeline)."""
        return conversations.episodes(self._core, user_id, namespace=namespace, limit=limit)

    def search(
        self,
        user_id: str,
        query: str,
        *,
        namespace: str = "",
        kinds: builtins.list[str] | None = None,
        limit: int | None = None,
        include_cold: bool = False,
    ) -> SearchResults:
        """The ``limit`` (``[search] limit``, 3) entries most relevant to ``query`` in the
        namespace and the user's profile, ranked with each score component, marked used as
        recall marks them; empty when retrieval is off (:mod:`memkeeper.store.search`). The
        result is a list with the query embedding's cost apart (``embed_ms``, ``search_ms``).
        """
        return search.search(
            self._core,
            user_id,
            query,
            namespace=namespace,
            kinds=kinds,
            limit=limit,
            include_cold=include_cold,
        )

    def context(
        self,
        user_id: str,
        *,
        namespace: str = "",
        limit: int | None = None,
        query: str | None = None,
    ) -> Context:
        """The prompt prefill: at most ``limit`` (``[context] limit``) best active entries
        (not marked used), the entries relevant to ``query`` (marked used) and the recent
        episodes, each a section of ``text`` (:mod:`memkeeper.store.context`)."""
        return context.context(self._core, user_id, namespace=namespace, limit=limit, query=query)

    # -- forgetting -------------------------------------------------------------------------

    def forget(self, user_id: str, key: str, *, namespace: str = "", dry_run: bool = False) -> Any:
        """Erase every value ``key`` ever had for the user (hot, cold, log) and what memkeeper
        derived from it in every namespace of the user; returns how many entries it had.
        ``dry_run=True`` returns what it would erase, redact and rebuild instead (ids, kinds
        and counts, never a value) and changes nothing."""
        return forgetting.forget(self._core, user_id, key, namespace=namespace, dry_run=dry_run)

    def forget_memory(self, memory_id: str, *, dry_run: bool = False) -> Any:
        """Erase one entry by id, with its history and what was derived from it (a summary's
        earlier summaries; its facts stay). 1, or 0 if absent; ``dry_run`` as forget."""
        return forgetting.forget_memory(self._core, memory_id, dry_run=dry_run)

    def forget_namespace(self, user_id: str, namespace: str, *, dry_run: bool = False) -> Any:
        """Erase a project: its memories, messages, episodes, log rows (``dry_run``: preview)."""
        return forgetting.forget_namespace(self._core, user_id, namespace, dry_run=dry_run)

    def forget_user(self, user_id: str, *, dry_run: bool = False) -> Any:
        """Erase everything about a user: memories, messages, episodes, log rows (or preview)."""
        return forgetting.forget_user(self._core, user_id, dry_run=dry_run)

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
        return inspection.changes(
            self._core,
            memory_id=memory_id,
            run_id=run_id,
            user_id=user_id,
            namespace=namespace,
            action=action,
            limit=limit,
            newest_first=newest_first,
        )

    def explain(self, memory_id: str) -> str:
        """One memory's whole life in plain words."""
        return inspection.explain(self._core, memory_id)

    def job_runs(self, *, job: str | None = None, limit: int = 20) -> builtins.list[JobRun]:
        """Recent job runs, newest first."""
        return inspection.job_runs(self._core, job=job, limit=limit)

    def status(self) -> dict[str, Any]:
        """Counts per state and kind, the files (sizes, pages, each table's rows and bytes),
        warnings when the change log or a WAL outgrows ``[status]``, each job's last run."""
        return inspection.status(self._core)
