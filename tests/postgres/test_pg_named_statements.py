"""An agent's use is a statement its session keeps prepared, and never counted twice.

The use's data-modifying ``WITH`` (a recall's, a search's) goes as ``PREPARE`` the first time
on a connection and ``EXECUTE`` from then on (:mod:`memkeeper.storage.postgres.
named_statements`). Where the session does not hold what the connection believes (someone
deallocated its statements; a pooler in transaction mode gave another session that already
holds one), the string fails with nothing committed, goes once more as plain text, and that
connection sends plain text from then on. Each case counts every use exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from helpers.logs import capture_logs
from helpers.postgres import kill_backends

from memkeeper import MemoryStore
from memkeeper.storage.postgres.named_statements import numbered, statement_name, statements_of

OFF = "named statements off for this connection"


@contextmanager
def _sent() -> Iterator[list[str]]:
    """The strings sent meanwhile through psycopg's ``Connection.execute``."""
    sent: list[str] = []
    execute = psycopg.Connection.execute

    def counted(self, query, params=None, **kw):  # type: ignore[no-untyped-def]
        sent.append(str(query))
        return execute(self, query, params, **kw)

    psycopg.Connection.execute = counted  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        psycopg.Connection.execute = execute  # type: ignore[method-assign]


def _uses(store: MemoryStore, memory_id: str) -> tuple[int, int]:
    """The entry's access count and its uses counted in ``uses``."""
    counted = store.storage.hot.query(
        "SELECT coalesce(sum(count), 0) AS n FROM uses WHERE memory_id = ?", [memory_id]
    )
    return store.get(memory_id).access_count, int(next(counted)["n"])


def _prepares(sent: list[str]) -> list[str]:
    return [part for text in sent for part in text.split("; ") if part.startswith("PREPARE ")]


def _executes(sent: list[str]) -> list[str]:
    return [part for text in sent for part in text.split("; ") if part.startswith("EXECUTE ")]


def test_placeholders_are_numbered_as_prepare_takes_them() -> None:
    text = "SELECT %s WHERE a LIKE 'x%%' AND b IN (%s, %s)"
    assert numbered(text) == "SELECT $1 WHERE a LIKE 'x%' AND b IN ($2, $3)"
    assert statement_name(text) == statement_name(text) != statement_name(text + " ")


def test_a_use_is_prepared_once_per_session_then_executed(pg_database: str) -> None:
    with MemoryStore(pg_database) as store:
        oslo = store.remember("ann", "city", "Oslo")
        with _sent() as first:
            assert store.recall("ann", "city").value == "Oslo"
        with _sent() as second:
            assert store.recall("ann", "city").value == "Oslo"
        [prepare] = _prepares(first)
        name = prepare.split()[1]
        assert prepare.startswith(f"PREPARE {name} AS WITH found AS (SELECT")
        assert len(_executes(first)) == 1
        assert not _prepares(second)
        assert [e.partition("(")[0] for e in _executes(second)] == [f"EXECUTE {name}"]
        assert _uses(store, oslo.id) == (2, 2)


def test_a_session_whose_statements_were_deallocated_counts_the_use_once(
    pg_database: str,
) -> None:
    with MemoryStore(pg_database) as store:
        oslo = store.remember("ann", "city", "Oslo")
        store.recall("ann", "city")  # prepared on the store's connection
        with store.storage.lock:  # behind memkeeper's back, on that session
            store.storage.hot.raw.execute("DEALLOCATE ALL")
        with capture_logs() as lines, _sent() as sent:
            assert store.recall("ann", "city").value == "Oslo"
        assert OFF in [line["event"] for line in lines]
        assert _executes(sent) and sent[-1].count("WITH found AS") == 1  # then plain text
        assert _uses(store, oslo.id) == (2, 2)
        with _sent() as later:
            store.recall("ann", "city")
        assert not _executes(later) and not _prepares(later)
        assert _uses(store, oslo.id) == (3, 3)


def test_a_statement_the_session_holds_already_is_not_prepared_twice(pg_database: str) -> None:
    with MemoryStore(pg_database) as store:
        oslo = store.remember("ann", "city", "Oslo")
        store.recall("ann", "city")
        with store.storage.lock:  # as if another session than the one prepared on
            statements_of(store.storage.hot.raw).known.clear()
        with capture_logs() as lines:
            assert store.recall("ann", "city").value == "Oslo"
        assert OFF in [line["event"] for line in lines]
        assert _uses(store, oslo.id) == (2, 2)


def test_a_new_session_after_a_lost_link_prepares_again(pg_database: str) -> None:
    with MemoryStore(pg_database) as store:
        oslo = store.remember("ann", "city", "Oslo")
        store.recall("ann", "city")
        kill_backends(pg_database, store)
        with capture_logs() as lines, _sent() as sent:
            assert store.recall("ann", "city").value == "Oslo"
        assert _prepares(sent) and OFF not in [line["event"] for line in lines]
        assert _uses(store, oslo.id) == (2, 2)


def test_a_search_marks_its_hits_through_the_prepared_statement(pg_database: str) -> None:
    with MemoryStore(pg_database) as store:
        ids = [store.remember("ann", f"k{n}", f"report number {n}").id for n in range(4)]
        store.search("ann", "report", limit=4)
        with _sent() as sent:
            hits = store.search("ann", "report", limit=4)
        assert sorted(h.memory.id for h in hits) == sorted(ids)
        assert _executes(sent) and not _prepares(sent)
        assert [_uses(store, i) for i in ids] == [(2, 2)] * 4


@pytest.mark.parametrize("broken", ["DEALLOCATE ALL", None])
def test_an_error_of_the_use_itself_is_raised_and_commits_nothing(
    pg_database: str, broken: str | None
) -> None:
    """A failing statement is not retried as plain text forever: its own error is raised."""
    with MemoryStore(pg_database) as store:
        oslo = store.remember("ann", "city", "Oslo")
        store.recall("ann", "city")
        with store.storage.lock:
            if broken:
                store.storage.hot.raw.execute(broken)
            store.storage.hot.raw.execute("ALTER TABLE uses RENAME TO uses_gone")
        try:
            with pytest.raises(Exception, match="uses"):
                store.recall("ann", "city")
        finally:
            with store.storage.lock:
                store.storage.hot.raw.execute("ALTER TABLE uses_gone RENAME TO uses")
        assert _uses(store, oslo.id) == (1, 1)


def test_a_search_whose_statements_were_deallocated_finds_the_same_hits(pg_database: str) -> None:
    """The search's read of the user's rows is a named statement too; gone from the session,
    it is read again as plain text, and the hits are the same."""
    with MemoryStore(pg_database) as store:
        ids = [store.remember("ann", f"k{n}", f"report number {n}").id for n in range(4)]
        first = [h.memory.id for h in store.search("ann", "report", limit=4)]
        with store.storage.lock:
            store.storage.hot.raw.execute("DEALLOCATE ALL")
        with capture_logs() as lines, _sent() as sent:
            again = [h.memory.id for h in store.search("ann", "report", limit=4)]
        assert sorted(again) == sorted(first) == sorted(ids)
        assert OFF in [line["event"] for line in lines]
        assert sent[0].startswith("EXECUTE memkeeper_") and sent[1].startswith("SELECT m.rowid")
        assert [_uses(store, i) for i in ids] == [(2, 2)] * 4


def test_a_column_added_under_a_prepared_statement_is_read_as_plain_text(
    pg_database: str,
) -> None:
    """A schema changed under a session's prepared ``RETURNING m.*`` (another host's newer
    memkeeper): the server refuses the cached plan; the use goes as plain text, counted once."""
    with MemoryStore(pg_database) as store:
        oslo = store.remember("ann", "city", "Oslo")
        store.recall("ann", "city")
        with psycopg.connect(pg_database, autocommit=True) as other:
            other.execute("ALTER TABLE memkeeper.memories ADD COLUMN extra_note text")
        assert store.recall("ann", "city").value == "Oslo"
        assert _uses(store, oslo.id) == (2, 2)


def test_a_session_keeps_a_bounded_number_of_statements_and_sends_the_rest_as_text(
    pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search's use has one text per number of hits: a session prepares at most
    MOST_PER_SESSION statements, and sends any other as plain text, counted as well."""
    from memkeeper.storage.postgres import named_statements

    monkeypatch.setattr(named_statements, "MOST_PER_SESSION", 1)
    with MemoryStore(pg_database) as store:
        oslo = store.remember("ann", "city", "Oslo")
        ids = [store.remember("ann", f"k{n}", f"report number {n}").id for n in range(3)]
        store.recall("ann", "city")  # the one statement the session keeps
        with _sent() as sent:
            assert store.recall("ann", "city").value == "Oslo"
            hits = store.search("ann", "report", limit=3)
        assert sorted(h.memory.id for h in hits) == sorted(ids)
        assert len(_executes(sent)) == 1 and not _prepares(sent)  # the recall's, prepared
        assert sent[1].startswith("SELECT m.rowid") and "WITH found AS" in sent[-1]
        assert _uses(store, oslo.id) == (2, 2)
        assert [_uses(store, i) for i in ids] == [(1, 1)] * 3
        with store.storage.lock:
            assert len(named_statements.statements_of(store.storage.hot.raw).known) == 1


def test_a_read_inside_a_transaction_is_sent_as_plain_text(pg_database: str) -> None:
    """A named read is sent only outside a transaction (so that its failure can be sent
    again whole); inside one, the small user's read goes as the transaction's own text."""
    from memkeeper.storage.keywords import small_user_rows
    from memkeeper.storage.transaction import write_transaction

    with MemoryStore(pg_database) as store:
        ids = [store.remember("ann", f"k{n}", f"report number {n}").id for n in range(3)]
        with _sent() as sent, write_transaction(store.storage, users={"ann"}) as hot:
            rows = small_user_rows(
                hot,
                table="memories",
                user_id="ann",
                namespaces=("",),
                kinds=None,
                states=("active",),
                columns=("id", "value"),
            )
        assert rows is not None and sorted(row[0] for row in rows) == sorted(ids)
        assert not _executes(sent) and not _prepares(sent)
        assert any("SELECT m.rowid, m.id, m.value" in text for text in sent)
