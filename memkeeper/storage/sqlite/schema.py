"""The tables and indexes of memkeeper's two files, as ordered migrations.

The hot file (``memory.db``) holds live memories, conversation messages, episodes, the change
log and job runs. The cold file (``memory-cold.db``) holds retired memories. Each file has its
own migration set (sqlite-utils ``Migrations``, registered through
:class:`~memkeeper.storage.sqlite.steps.Steps`); a new schema step is a new decorated
function at the end of the list, never an edit to an old one, and gets a test that builds the older
schema, fills it and migrates it forward.

Indexes are chosen so that every maintenance rule finds what is due with a range scan, and
end in ``id`` so that the jobs' keyset pagination on (time, id) seeks straight to the next
batch even when many rows share a time:
``memories_due_by_use`` (state, kind, last use) serves expiry and demotion,
``memories_due_by_state`` (state, since when) serves the review grace period and settling,
``memories_by_kind_state`` finds the users over the fact cap,
``messages_unsummarized`` serves summarization, and the partial unique index
``memories_current_key`` keeps at most one current (active or pending-review) entry per
user, namespace, kind and key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memkeeper.storage.sqlite.fts import create_index
from memkeeper.storage.sqlite.opening import FileKind
from memkeeper.storage.sqlite.space import convert_to_incremental
from memkeeper.storage.sqlite.steps import Steps

if TYPE_CHECKING:  # a step is given the file as sqlite-utils' Database (its Migrations run it)
    from sqlite_utils import Database

HOT_APPLICATION_ID = 0x4D4B4844  # "MKHD"
COLD_APPLICATION_ID = 0x4D4B434C  # "MKCL"

# The columns of a memory image: memkeeper.storage.columns (both backends hold them).

hot_migrations = Steps("memkeeper")
cold_migrations = Steps("memkeeper-cold")
_HOT_STEPS: list[str] = []
_COLD_STEPS: list[str] = []


def _step(
    migrations: Steps, steps: list[str], name: str, *, transactional: bool = True
) -> Callable[[Any], Any]:
    """Register a migration step and remember its name (what this version knows).

    ``transactional=False``: a step that cannot run in a transaction (a ``VACUUM``); it must
    be idempotent (see :func:`memkeeper.storage.sqlite.opening.migrate`).
    """
    steps.append(name)
    return migrations(name=name, transactional=transactional)


_MEMORY_COLUMNS_SQL = """
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    namespace TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL CHECK (kind IN ('fact', 'preference', 'note')),
    key TEXT CHECK (key IS NOT NULL OR kind = 'note'),
    value TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT '',
    confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
    ttl_days INTEGER CHECK (ttl_days IS NULL OR ttl_days > 0),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    last_accessed_at TEXT,
    access_count INTEGER NOT NULL DEFAULT 0 CHECK (access_count >= 0),
    state_since TEXT NOT NULL,
    last_used_at TEXT NOT NULL
"""


@_step(hot_migrations, _HOT_STEPS, "0001_initial")
def _hot_initial(db: Database) -> None:
    db.executescript(
        f"""
        CREATE TABLE memories (
            {_MEMORY_COLUMNS_SQL},
            state TEXT NOT NULL CHECK (state IN ('active', 'pending_review', 'superseded'))
        );
        CREATE UNIQUE INDEX memories_current_key
            ON memories (user_id, namespace, kind, key)
            WHERE state IN ('active', 'pending_review') AND key IS NOT NULL;
        CREATE INDEX memories_by_owner ON memories (user_id, namespace, kind, state);
        CREATE INDEX memories_by_kind_state ON memories (kind, state, user_id, namespace);
        CREATE INDEX memories_by_key ON memories (user_id, namespace, key);
        CREATE INDEX memories_due_by_use ON memories (state, kind, last_used_at, id);
        CREATE INDEX memories_due_by_state ON memories (state, state_since, id);
        CREATE INDEX memories_ttl_override ON memories (ttl_days, last_used_at, id)
            WHERE ttl_days IS NOT NULL;

        CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id TEXT NOT NULL,
            namespace TEXT NOT NULL DEFAULT '',
            session_id TEXT NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
            content TEXT NOT NULL,
            created_at TEXT NOT NULL,
            summarized_at TEXT,
            summary_id TEXT
        );
        CREATE INDEX messages_by_session
            ON messages (user_id, namespace, session_id, summarized_at, id);
        CREATE INDEX messages_unsummarized
            ON messages (user_id, namespace, session_id, id) WHERE summarized_at IS NULL;
        CREATE INDEX messages_summarized_at
            ON messages (summarized_at) WHERE summarized_at IS NOT NULL;

        CREATE TABLE episodes (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id TEXT NOT NULL,
            namespace TEXT NOT NULL DEFAULT '',
            task_name TEXT NOT NULL,
            input_summary TEXT NOT NULL DEFAULT '',
            output_summary TEXT NOT NULL DEFAULT '',
            user_feedback TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX episodes_by_owner ON episodes (user_id, namespace, created_at);

        CREATE TABLE changes (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            actor TEXT NOT NULL,
            run_id TEXT,
            action TEXT NOT NULL,
            memory_id TEXT,
            user_id TEXT,
            namespace TEXT,
            reason TEXT NOT NULL,
            source TEXT,
            before TEXT,
            after TEXT,
            details TEXT
        );
        CREATE INDEX changes_by_memory ON changes (memory_id, id);
        CREATE INDEX changes_by_run ON changes (run_id, id);
        CREATE INDEX changes_by_user ON changes (user_id, namespace, id);
        CREATE INDEX changes_by_action ON changes (action, id);

        CREATE TABLE job_runs (
            run_id TEXT PRIMARY KEY,
            job TEXT NOT NULL,
            trigger TEXT NOT NULL,
            scheduled_for TEXT,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            status TEXT NOT NULL,
            counts TEXT,
            error TEXT,
            dry_run INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX job_runs_by_job ON job_runs (job, started_at);
        """
    )


@_step(hot_migrations, _HOT_STEPS, "0002_pending_scrubs")
def _hot_pending_scrubs(db: Database) -> None:
    # An erasure commits a row here with its deletes and removes it once no erased byte is
    # left in either file; a row still here means an erasure was interrupted before that, so
    # the next erasure (or job run) rebuilds both files. Holds no content: an id and a time.
    db.execute("CREATE TABLE pending_scrubs (id INTEGER PRIMARY KEY, at TEXT NOT NULL)")


@_step(hot_migrations, _HOT_STEPS, "0003_uses")
def _hot_uses(db: Database) -> None:
    # Recalls of active entries, aggregated per entry and UTC day (memkeeper.storage.uses):
    # a use is not a state change, so it is counted here instead of logged with images.
    # first_at / last_at are UTC times of `day` (HH:MM:SS.ffffff), to keep rows small.
    # Ids and times only, no content. Older databases keep their logged ``recall`` rows.
    db.execute(
        """
        CREATE TABLE uses (
            memory_id TEXT NOT NULL,
            day TEXT NOT NULL,
            count INTEGER NOT NULL CHECK (count > 0),
            first_at TEXT NOT NULL,
            last_at TEXT NOT NULL,
            PRIMARY KEY (memory_id, day)
        ) WITHOUT ROWID
        """
    )


@_step(hot_migrations, _HOT_STEPS, "0004_incremental_vacuum", transactional=False)
def _hot_incremental_vacuum(db: Database) -> None:
    # Free pages go back to the file system in bounded steps (memkeeper.storage.sqlite.space).
    convert_to_incremental(db)


@_step(hot_migrations, _HOT_STEPS, "0005_fewer_indexes")
def _hot_fewer_indexes(db: Database) -> None:
    # Every index costs every transition. (user_id, namespace, key) duplicated what the
    # current-key index serves for recall and the owner index serves for forget by key.
    # The rules' indexes carry the columns their filters read, so a pass with nothing due
    # answers from the index alone instead of reading every long-unused row.
    db.executescript(
        """
        DROP INDEX IF EXISTS memories_by_key;
        DROP INDEX IF EXISTS memories_due_by_use;
        CREATE INDEX memories_due_by_use
            ON memories (state, kind, last_used_at, confidence, pinned, id);
        DROP INDEX IF EXISTS memories_ttl_override;
        CREATE INDEX memories_ttl_override ON memories (ttl_days, state, last_used_at, id)
            WHERE ttl_days IS NOT NULL;
        """
    )


@_step(hot_migrations, _HOT_STEPS, "0006_keywords")
def _hot_keywords(db: Database) -> None:
    # FTS5 (trigram) over key and value, kept in step by triggers (memkeeper.storage.sqlite.fts).
    create_index(db, "memories")


@_step(hot_migrations, _HOT_STEPS, "0007_vectors")
def _hot_vectors(db: Database) -> None:
    # One embedding per hot entry (memkeeper.storage.vectors): float32 blob, no text. A rowid
    # table: rows of kilobytes are a poor fit for WITHOUT ROWID.
    db.execute(
        """
        CREATE TABLE vectors (
            memory_id TEXT PRIMARY KEY,
            model TEXT NOT NULL,
            dims INTEGER NOT NULL,
            value_hash TEXT NOT NULL,
            vector BLOB NOT NULL
        )
        """
    )


@_step(hot_migrations, _HOT_STEPS, "0008_tombstones")
def _hot_tombstones(db: Database) -> None:
    # One row per erasure scope (memkeeper.storage.tombstones): the sha256 of an erased
    # entry's id, of a (user, namespace, key), or of a user id — never the identity or a
    # value. Kept forever, so that restoring or pruning a backup, or an extraction, cannot
    # bring an erased memory back.
    db.executescript(
        """
        CREATE TABLE tombstones (
            id INTEGER PRIMARY KEY,
            scope TEXT NOT NULL CHECK (scope IN ('memory', 'key', 'user')),
            digest TEXT NOT NULL,
            erased_at TEXT NOT NULL
        );
        CREATE INDEX tombstones_by_digest ON tombstones (scope, digest);
        """
    )


@_step(hot_migrations, _HOT_STEPS, "0009_erased_values")
def _hot_erased_values(db: Database) -> None:
    # Keyed hashes of erased values (memkeeper.storage.erased_values), so that nothing derives
    # an erased value again: per user digest, with the digests of the key it was stored under
    # and (a project's value) of the one namespace it is blocked in.
    # The HMAC key is one random row of erasure_secret. Never a value or an identity.
    db.executescript(
        """
        CREATE TABLE erased_values (
            id INTEGER PRIMARY KEY,
            user_digest TEXT NOT NULL,
            key_digest TEXT NOT NULL,
            namespace_digest TEXT,
            length INTEGER NOT NULL,
            digest TEXT NOT NULL,
            erased_at TEXT NOT NULL
        );
        CREATE INDEX erased_values_by_user ON erased_values (user_digest);
        CREATE TABLE erasure_secret (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            secret TEXT NOT NULL
        );
        -- A file whose keyword index still holds trigrams of erased texts, since when: the
        -- nightly settle run rewrites that index (memkeeper.storage.sqlite.erasure). No content.
        CREATE TABLE pending_index_purges (
            file TEXT PRIMARY KEY CHECK (file IN ('hot', 'cold')),
            since TEXT NOT NULL
        );
        """
    )


@_step(cold_migrations, _COLD_STEPS, "0001_initial")
def _cold_initial(db: Database) -> None:
    db.executescript(
        f"""
        CREATE TABLE cold_memories (
            {_MEMORY_COLUMNS_SQL},
            state TEXT NOT NULL CHECK (state = 'cold'),
            cold_reason TEXT NOT NULL,
            retired_at TEXT NOT NULL
        );
        CREATE INDEX cold_by_owner ON cold_memories (user_id, namespace, kind, key);
        CREATE INDEX cold_by_retired ON cold_memories (retired_at);

        -- Ids whose move between the two files has started but may not have finished.
        CREATE TABLE moves_in_flight (
            id TEXT PRIMARY KEY,
            started_at TEXT NOT NULL
        );
        """
    )


@_step(cold_migrations, _COLD_STEPS, "0002_incremental_vacuum", transactional=False)
def _cold_incremental_vacuum(db: Database) -> None:
    convert_to_incremental(db)


@_step(cold_migrations, _COLD_STEPS, "0003_keywords")
def _cold_keywords(db: Database) -> None:
    create_index(db, "cold_memories")


_HOT_ROLE = "hot (memory.db)"
_COLD_ROLE = "cold-storage (memory-cold.db)"
HOT = FileKind(
    _HOT_ROLE,
    HOT_APPLICATION_ID,
    hot_migrations,
    steps=tuple(_HOT_STEPS),
    others=((COLD_APPLICATION_ID, _COLD_ROLE),),
)
COLD = FileKind(
    _COLD_ROLE,
    COLD_APPLICATION_ID,
    cold_migrations,
    steps=tuple(_COLD_STEPS),
    others=((HOT_APPLICATION_ID, _HOT_ROLE),),
)
