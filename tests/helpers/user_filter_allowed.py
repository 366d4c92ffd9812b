"""The statements allowed without a user filter, by name (docs/guides/scaling.md,
"Statements without a user filter" explains each name).

Each entry lists **shapes**: a statement as :func:`helpers.user_filter.shape` writes it
(one line, string literals as ``?``, numbers as ``0``, a list of placeholders as one ``%s``,
schema qualifiers dropped). ``...`` in a shape stands for any text. A statement matches an
entry when its shape is one of the entry's, whole; anything else on a distributed table
without a user filter fails the audit. Three kinds:

- ``scan-*``: the jobs' scans over every user (partitioned by user hash in the plan);
- ``all-*``: the operator's whole-memory reads (status, export, log), and the migration;
- ``id-*``: rows addressed by their id after a user-filtered read or a job's scan found them;
  on one primary an index look-up, on a distributed memory a statement on every shard: the
  work list of docs/guides/scaling.md, "Before distributing".
"""

from __future__ import annotations

# PostgreSQL finds a job's due rows by its predicate, then re-reads each batch by id in owner
# order (storage/postgres/due_walk.py).
_BY_USE = (
    "(state = %s AND kind = %s AND updated_at < %s AND last_used_at < %s AND confidence < %s"
    " AND pinned = 0)",
    "(state = ? AND kind = %s AND updated_at < %s AND last_used_at < %s AND pinned = 0"
    " AND ttl_days IS NULL)",
    "(state = ? AND ttl_days = %s AND updated_at < %s AND last_used_at < %s AND pinned = 0)",
)
_BY_STATE = ("(state = ? AND state_since < %s AND pinned = 0)", "(state = ? AND state_since < %s)")
_OWNER_ORDER = "ORDER BY user_id, namespace, id"


def _due_batches() -> tuple[str, ...]:
    shapes = []
    for where in (*_BY_USE, *_BY_STATE):
        for keyset in ("", " AND (user_id, namespace, id) > (%s)"):
            shapes.append(
                f"SELECT user_id, namespace, id FROM memories WHERE {where}{keyset}"
                f" {_OWNER_ORDER} LIMIT %s"
            )
        shapes.append(f"SELECT * FROM memories WHERE id IN (%s) AND {where} {_OWNER_ORDER}")
    return tuple(shapes)


_COUNTED = ("memories", "cold_memories", "messages", "episodes", "changes", "uses", "vectors")

ALLOWED: dict[str, tuple[str, ...]] = {
    # -- the jobs' scans over every user -------------------------------------------------
    "scan-due": _due_batches(),
    "scan-over-cap": (
        "SELECT user_id, namespace, count(*) AS n FROM memories WHERE kind = ? AND state = ? "
        "GROUP BY user_id, namespace HAVING count(*) > %s ORDER BY user_id, namespace",
    ),
    "scan-ttl-overrides": ("SELECT DISTINCT ttl_days FROM memories WHERE ttl_days IS NOT NULL",),
    "scan-cold-retired": (
        "SELECT rowid AS rowid_, * FROM cold_memories WHERE retired_at = %s AND rowid > %s "
        "ORDER BY rowid LIMIT %s",
        "SELECT rowid AS rowid_, * FROM cold_memories WHERE retired_at > %s AND retired_at < %s "
        "ORDER BY retired_at, rowid LIMIT %s",
    ),
    "scan-merge-pairs": (
        "SELECT user_id, namespace FROM memories WHERE state IN (?) AND pinned = 0 AND "
        "(kind != ? OR key IS NULL) GROUP BY user_id, namespace HAVING count(*) > 0 "
        "ORDER BY user_id, namespace",
        "SELECT user_id, namespace FROM changes WHERE id > %s AND user_id IS NOT NULL AND "
        "(run_id IS NULL OR run_id != %s) UNION SELECT m.user_id, m.namespace FROM vectors AS v "
        "JOIN memories AS m ON m.id = v.memory_id WHERE v.rowid > %s ORDER BY 0, 0",
        "SELECT coalesce(max(id), 0) FROM changes",
        "SELECT coalesce(max(rowid), 0) FROM vectors",
    ),
    "scan-sessions": (
        "SELECT user_id, namespace, session_id, count(*) AS n, min(id) AS first FROM messages "
        "WHERE summarized_at IS NULL GROUP BY user_id, namespace, session_id "
        "HAVING count(*) > %s ORDER BY first",
        "SELECT count(*) FROM messages WHERE summarized_at IS NOT NULL AND summarized_at < %s",
        "DELETE FROM messages WHERE id IN (SELECT id FROM messages WHERE summarized_at IS NOT "
        "NULL AND summarized_at < %s ORDER BY summarized_at LIMIT %s)",
    ),
    "scan-change-log": (
        "SELECT id, at, run_id, action, before IS NULL AND after IS NULL AS bare, "
        "(coalesce(after, before)::jsonb ->> ?) IS NOT NULL AS thinned FROM changes "
        "WHERE id > %s ORDER BY id LIMIT %s",
        "UPDATE changes SET before = CASE WHEN before IS NULL THEN NULL ELSE ... END WHERE id IN "
        "(%s) AND action != ? AND (before IS NOT NULL OR after IS NOT NULL) AND "
        "(coalesce(after, before)::jsonb ->> ?) IS NULL",
        "SELECT 0 FROM changes WHERE run_id = %s AND (coalesce(after, before)::jsonb ->> ?) "
        "IS NOT NULL LIMIT 0",
    ),
    "scan-embedding-backfill": (
        "SELECT memory_id, vector FROM vectors WHERE embedding IS NULL AND vector IS NOT NULL "
        "ORDER BY rowid LIMIT %s",
    ),
    "scan-stale-vectors": (
        "SELECT m.id, m.kind, m.key, m.value FROM memories AS m LEFT JOIN vectors AS v ON "
        "v.memory_id = m.id WHERE m.state IN (%s) AND (v.memory_id IS NULL OR ... "
        "ORDER BY m.rowid LIMIT %s",
    ),
    # -- the operator's whole-memory reads, and the migration ------------------------------
    "all-status": (
        "SELECT kind, count(*) AS n FROM cold_memories GROUP BY kind",
        "SELECT state, kind, count(*) AS n FROM memories GROUP BY state, kind",
        "SELECT count(*), count(*) - count(summarized_at) FROM messages",
        "SELECT count(*) FROM vectors WHERE 0 = 0",
        "SELECT count(*) FROM vectors WHERE 0 = 0 AND model = %s AND dims = %s",
        *(f"SELECT count(*) FROM {table}" for table in _COUNTED),
    ),
    "all-listing": tuple(
        f"SELECT * FROM {table}{where} ORDER BY created_at, id"
        for table in ("memories", "cold_memories")
        for where in (
            "",
            " WHERE kind = %s",
            " WHERE namespace = %s",
            " WHERE state = %s",
            " WHERE kind = %s AND state = %s",
        )
    ),
    "all-change-log": (
        "SELECT * FROM changes ORDER BY id ASC",
        "SELECT * FROM changes ORDER BY id DESC LIMIT %s",
        "SELECT * FROM changes WHERE action = %s ORDER BY id ASC",
        "SELECT * FROM changes WHERE action = %s ORDER BY id DESC LIMIT %s",
        "SELECT * FROM changes WHERE namespace = %s ORDER BY id ASC",
        "SELECT * FROM changes WHERE run_id = %s ORDER BY id ASC",
        "SELECT * FROM changes WHERE run_id = %s ORDER BY id DESC",
        "SELECT * FROM changes WHERE run_id = %s ORDER BY id DESC LIMIT %s",
        "SELECT id, at, user_id, namespace, details FROM changes WHERE action = %s ORDER BY id",
    ),
    "all-migration": tuple(
        f'SELECT setval(pg_get_serial_sequence(%s), COALESCE(max("{column}"), 0), '
        f'max("{column}") IS NOT NULL) FROM {table}'
        for table, column in (
            ("changes", "id"),
            ("episodes", "id"),
            ("messages", "id"),
            ("cold_memories", "rowid"),
            ("memories", "rowid"),
            ("vectors", "rowid"),
        )
    ),
    # a keyword-only search's look for any vector at all (to warn that it cannot use them)
    "all-vector-presence": ("SELECT max(rowid) FROM vectors",),
    # memkeeper ui (storage/ui_reads.py): the overview's 90 days of the change log and the
    # uses per day, a page of the users, the review queue of every user, a run's changes.
    "all-ui": (
        "SELECT substr(at, 0, 0) AS day, action, actor, count(*) AS n FROM changes "
        "WHERE at >= %s GROUP BY 0, 0, 0",
        "SELECT day, sum(count) AS n FROM uses WHERE day >= %s GROUP BY day",
        "SELECT user_id FROM memories GROUP BY user_id ORDER BY user_id LIMIT %s OFFSET %s",
        "SELECT * FROM memories WHERE state = %s ORDER BY state_since, id LIMIT %s OFFSET %s",
        "SELECT count(*) FROM memories WHERE state = %s",
        "SELECT * FROM changes WHERE run_id = %s ORDER BY id LIMIT %s OFFSET %s",
        "SELECT count(*) FROM changes WHERE run_id = %s",
    ),
    # memkeeper bench --forget --postgres (bench/forget_postgres.py): after the forget, every
    # row of every table read as text for the erased value (a scratch database; never a store's).
    "all-bench-erasure-check": tuple(
        f"SELECT count(*) FROM {table} AS r WHERE strpos(lower(r::text), %s) > 0"
        for table in (
            "memories",
            "cold_memories",
            "vectors",
            "uses",
            "messages",
            "episodes",
            "changes",
        )
    ),
    # -- rows addressed by id (the work list before distributing) --------------------------
    "id-images": (
        "SELECT * FROM memories WHERE id IN (%s)",
        "SELECT * FROM cold_memories WHERE id IN (%s)",
        "SELECT * FROM memories WHERE id IN (%s) AND state IN (?)",
        "SELECT * FROM memories WHERE id = %s",
        "SELECT * FROM cold_memories WHERE id = %s",
        # whose locks a flush of buffered uses takes (storage/use_buffer.py, _owners)
        "SELECT user_id FROM memories WHERE id IN (%s)",
        "SELECT user_id FROM cold_memories WHERE id IN (%s)",
    ),
    "id-writes": (
        "UPDATE memories SET ... WHERE id = %s",
        # many rows by id in one statement (storage/postgres/dialect.py, many_updates)
        *(
            f"UPDATE {table} AS t SET ... FROM jsonb_populate_recordset(NULL::{table}, %s::jsonb)"
            " AS v WHERE t.id = v.id"
            for table in ("memories", "cold_memories")
        ),
        "DELETE FROM memories WHERE id = %s",
        *(
            f"DELETE FROM {table} WHERE {column} IN (%s)"
            for table, column in (
                ("memories", "id"),
                ("cold_memories", "id"),
                ("changes", "id"),
                ("changes", "memory_id"),
                ("uses", "memory_id"),
                ("vectors", "memory_id"),
            )
        ),
    ),
    "id-uses": (
        "INSERT INTO uses (memory_id, day, count, first_at, last_at) VALUES (%s...) ON CONFLICT "
        "(memory_id, day) DO UPDATE SET ...",
        "SELECT day, count, first_at, last_at FROM uses WHERE memory_id = %s ORDER BY day",
    ),
    "id-vectors": (
        "SELECT memory_id, value_hash, vector FROM vectors WHERE model = %s AND dims = %s AND "
        "memory_id IN (%s)",
        "SELECT 0 FROM vectors WHERE model = %s AND dims = %s AND memory_id IN (%s) LIMIT 0",
        "DELETE FROM vectors WHERE memory_id = %s",
        "INSERT INTO vectors (memory_id, model, dims, value_hash, vector) SELECT %s WHERE EXISTS "
        "(SELECT 0 FROM memories WHERE id = %s)",
        "INSERT INTO vectors (memory_id, model, dims, value_hash, vector, embedding, user_id, "
        "namespace) SELECT %s, CAST(%s AS vector), m.user_id, m.namespace FROM memories AS m "
        "WHERE m.id = %s",
        "UPDATE vectors SET embedding = CAST(%s AS vector), user_id = coalesce(user_id, (SELECT "
        "user_id FROM memories WHERE id = %s)), namespace = coalesce(namespace, (SELECT namespace "
        "FROM memories WHERE id = %s)) WHERE memory_id = %s AND embedding IS NULL",
    ),
    "id-messages": (
        "SELECT count(*) FROM messages WHERE id IN (%s) AND summarized_at IS NULL",
        "UPDATE messages SET summarized_at = %s, summary_id = %s WHERE id IN (%s) AND "
        "summarized_at IS NULL",
        "UPDATE messages SET summarized_at = NULL, summary_id = NULL WHERE summary_id = %s",
    ),
    "id-changes": (
        "SELECT id, action FROM changes WHERE memory_id = %s",
        "SELECT id, memory_id, user_id, namespace, before, after FROM changes WHERE memory_id = %s",
        "SELECT * FROM changes WHERE memory_id = %s ORDER BY id ASC",
        "SELECT * FROM changes WHERE memory_id = %s ORDER BY id ASC LIMIT %s",
        "SELECT * FROM changes WHERE memory_id = %s ORDER BY id DESC LIMIT %s",
        "SELECT * FROM changes WHERE memory_id = %s AND action = %s ORDER BY id ASC",
    ),
}
