"""What the maintenance jobs select: due rows in batches, counts, and the groups they judge.

A job decides *what* is due; the statements that find it are here, so that another backend
can offer the same functions. Two shapes:

* a job whose rule is a plain condition on a memory's columns (expire, demote, settle) keeps
  that condition in the job as a *predicate*: the body of a ``WHERE`` with ``?`` parameters,
  made of column names, comparisons, ``AND``/``OR``/``NOT``, ``IS [NOT] NULL``, ``IN``,
  parentheses and quoted or numeric literals — no function, no SQLite dialect, so every
  backend runs it as it is (:func:`portable` refuses anything else);
  :func:`select_batches` and :func:`count` run it here, in the table and order the job names;
* a job whose selection is a query of its own (prune's groups over the cap, retain's cold
  rows past the purge age, expire's overriding TTLs) calls a function named for it.

Readers only: the rows go to the shared transition mechanism
(:mod:`memkeeper.storage.transitions`), which changes them and writes their change-log rows
in one transaction. The caller holds ``storage.lock`` where it shares a connection.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from memkeeper.storage.batches import chunks, placeholders
from memkeeper.storage.changelog import image_of
from memkeeper.storage.handle import Handle

_TOKEN = re.compile(
    r"\s*(?:(?P<word>[A-Za-z_][A-Za-z0-9_]*)|'[^']*'|-?\d+(?:\.\d+)?|<=|>=|!=|<>|[=<>?(),])"
)
_KEYWORDS = {"AND", "OR", "NOT", "IS", "NULL", "IN"}


def portable(where: str) -> str:
    """``where`` itself when it is a portable predicate (see the module docstring).

    Raises ValueError naming what is not: a function call (``datetime(``, ``json_extract(``),
    an operator or keyword of one dialect (``||``, ``GLOB``), a comment, a second statement.
    Words are lower-case column names or the upper-case keywords above; a column name
    followed by ``(`` is a call.
    """
    position, after_column = 0, False
    while where[position:].strip():
        found = _TOKEN.match(where, position)
        if found is None:
            raise ValueError(f"not a portable predicate at {where[position:][:30]!r}: {where!r}")
        word = found.group("word")
        if found.group().strip() == "(" and after_column:
            raise ValueError(f"not a portable predicate (a function call): {where!r}")
        if word is not None and word not in _KEYWORDS and word != word.lower():
            raise ValueError(f"not a portable predicate (word {word!r}): {where!r}")
        after_column = word is not None and word not in _KEYWORDS
        position = found.end()
    return where


def select_batches(
    db: Handle,
    table: str,
    where: str,
    params: Sequence[Any],
    *,
    order: str,
    size: int,
) -> Iterator[list[dict[str, Any]]]:
    """Rows of ``table`` matching ``where``, in batches: on SQLite by keyset pagination on
    (order, id); on PostgreSQL found set-based and handed out in owner order, ``order``
    unused (:mod:`memkeeper.storage.postgres.due_walk` says why).

    Keyset pagination (rather than re-running the query) keeps the walk correct both in a
    dry run, where nothing leaves the selection, and when rows are skipped because an agent
    touched them in the meantime. ``table`` and ``order`` are memkeeper's own names.
    """
    portable(where)
    if getattr(db, "dialect", "sqlite") == "postgres":
        from memkeeper.storage.postgres.due_walk import owner_ordered_batches

        yield from owner_ordered_batches(db, table, where, params, size=size)
        return
    last: list[Any] = []
    while True:
        sql = f"SELECT * FROM {table} WHERE ({where})"
        if last:
            sql += f" AND ({order}, id) > (?, ?)"
        sql += f" ORDER BY {order}, id LIMIT ?"
        rows = [image_of(row) for row in db.query(sql, [*params, *last, size])]
        if not rows:
            return
        yield rows
        last = [rows[-1][order], rows[-1]["id"]]


def count(db: Handle, where: str, params: Sequence[Any]) -> int:
    """How many hot memories match ``where`` (through the same index the selection uses)."""
    row = db.execute(f"SELECT count(*) FROM memories WHERE {portable(where)}", params)
    return int(row.fetchone()[0])


def ttl_overrides(db: Handle) -> list[Any]:
    """Every TTL some memory sets for itself (``ttl_days``), whatever its state.

    The state is left to the selection that follows: asking for it here made SQLite read
    every active row instead of the small TTL index. Values are as stored (a hand-written
    one may be out of any date's range: the caller checks).
    """
    rows = db.query("SELECT DISTINCT ttl_days FROM memories WHERE ttl_days IS NOT NULL")
    return [row["ttl_days"] for row in rows]


_OVER_CAP = (
    "SELECT user_id, namespace, count(*) AS n FROM memories"
    " WHERE kind = 'fact' AND state = 'active'"
    " GROUP BY user_id, namespace HAVING count(*) > ? ORDER BY user_id, namespace"
)


def over_cap_groups(db: Handle, max_facts: int) -> list[dict[str, Any]]:
    """(user_id, namespace, n) of every owner with more than ``max_facts`` active facts."""
    return list(db.query(_OVER_CAP, [max_facts]))


_OWNERS_PER_READ = 200  # users named in one statement: well under SQLite's variable limit


def active_facts_of(
    db: Handle, owners: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every active fact of each (user, namespace) of ``owners``, as images (pinned ones
    included), by owner; one statement per :data:`_OWNERS_PER_READ` owners (prune reads its
    groups over the cap a few hundred at a time instead of one statement apiece).

    The statement names the users, and the namespaces are matched here: SQLite's planner
    takes ``(user_id, namespace) IN (...)`` (or an ``OR`` of pairs) through the index on
    (state, kind) and reads every active fact: for 100 owners at 1,000,000 memories 1.3-2.5 s
    against 28 ms (measured).
    """
    found: dict[tuple[str, str], list[dict[str, Any]]] = {owner: [] for owner in owners}
    for part in chunks(list(owners), _OWNERS_PER_READ):
        asked = set(part)
        users = sorted({user_id for user_id, _ in asked})
        rows = db.query(
            "SELECT * FROM memories WHERE user_id IN"
            f" ({placeholders(len(users))}) AND kind = 'fact' AND state = 'active'",
            users,
        )
        for row in rows:
            owner = (row["user_id"], row["namespace"])
            if owner in asked:
                found[owner].append(image_of(row))
    return found


def count_active_facts(db: Handle, user_id: str, namespace: str) -> int:
    """How many active facts one (user, namespace) has (what the prune cap counts)."""
    (active,) = db.execute(
        "SELECT count(*) FROM memories WHERE user_id = ? AND namespace = ?"
        " AND kind = 'fact' AND state = 'active'",
        [user_id, namespace],
    ).fetchone()
    return int(active)


# Keyset pagination on (retired_at, rowid), which the index on retired_at holds (it has no
# id): first the rest of the last batch's time, then later times. Many entries share one
# retired_at (a job retires a whole batch at one instant), so a row-value comparison would
# rescan them for every batch.
_SAME_TIME = (
    "SELECT rowid AS rowid_, * FROM cold_memories WHERE retired_at = ? AND rowid > ?"
    " ORDER BY rowid LIMIT ?"
)
_LATER = (
    "SELECT rowid AS rowid_, * FROM cold_memories WHERE retired_at > ? AND retired_at < ?"
    " ORDER BY retired_at, rowid LIMIT ?"
)


def cold_retired_before(
    cold: Handle, after: tuple[str, int], before: str, size: int
) -> list[dict[str, Any]]:
    """The next ``size`` cold rows retired before ``before``, after position ``after``.

    ``after`` is the (``retired_at``, ``rowid_``) of the last row of the previous batch
    (``("", 0)`` to start). Rows carry ``rowid_`` for the next call; the caller makes them
    images (:func:`~memkeeper.storage.changelog.image_of`).
    """
    last_at, last_rowid = after
    rows = list(cold.query(_SAME_TIME, [last_at, last_rowid, size]))
    if len(rows) < size:
        rows += cold.query(_LATER, [last_at, before, size - len(rows)])
    return rows
