"""The user-filter rule on a representative workload, alone (docs/guides/scaling.md).

The suite's audit (tests/helpers/statement_audit.py) judges every statement of a whole run;
this module runs the agents' calls and a maintenance pass on PostgreSQL under a recorder of
its own and applies the same rule, so that the rule is tested when this file runs alone:
every statement on a distributed table names its user, but the documented scans and by-id
statements (tests/helpers/user_filter_allowed.py); and the agents' calls send none of the
jobs' scans.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from freezegun import freeze_time
from helpers.backends import empty_memory
from helpers.statements import Recorder
from helpers.user_filter import DISTRIBUTED, allowed_as, violations

from memkeeper import MemoryStore
from memkeeper.maintenance.runner import run_once
from memkeeper.maintenance.undo import undo_run

START = datetime(2026, 1, 1, 9, tzinfo=UTC)


def _agents(store: MemoryStore) -> None:
    """An agent's day: every call of the API that reads or writes one user's memory."""
    for index in range(6):
        store.remember("ana", f"fact{index}", f"value {index}", namespace="p1")
    store.remember("ana", "style", "short answers", kind="preference")
    store.remember("ana", "fact0", "a new value", namespace="p1")  # supersedes
    store.add_note("ana", "met Bo about the pdf export", namespace="p1")
    store.append_message("ana", "s1", "user", "hello", namespace="p1")
    store.record_episode("ana", "export", namespace="p1", status="completed")
    store.recall("ana", "fact1", namespace="p1")
    store.search("ana", "pdf export", namespace="p1")
    store.context("ana", namespace="p1", query="value")
    store.list_memories("ana", namespace="p1")
    store.history("ana", "s1", namespace="p1")
    store.episodes("ana", namespace="p1")
    store.changes(user_id="ana")
    memory = store.recall("ana", "fact2", namespace="p1")
    assert memory is not None
    store.explain(memory.id)
    store.forget("ana", "fact3", namespace="p1")
    store.forget_memory(memory.id)


def _recorded(url: str, work) -> dict[str, str]:
    recorder = Recorder()
    with recorder.recording():
        work(url)
    return recorder.seen


def test_the_agents_calls_name_their_user(pg_suite_url: str) -> None:
    empty_memory(pg_suite_url)

    def work(url: str) -> None:
        with freeze_time(START), MemoryStore(url) as store:
            _agents(store)

    seen = _recorded(pg_suite_url, work)
    on_tables = [t for t in seen if any(table in t for table in DISTRIBUTED)]
    assert len(on_tables) > 20  # the recorder saw the store's statements
    assert violations(seen) == []
    scans = {allowed_as(t) for t in on_tables} - {None}
    # No job's scan; at most one whole-table read: a keyword-only search for want of a key
    # looks for any vector at all (docs/guides/scaling.md, "all-vector-presence"; for want of
    # a local model it does not); rows by id after a user-filtered read.
    assert {n for n in scans if not n.startswith("id-")} <= {"all-vector-presence"}, scans


def test_a_pass_and_its_undo_send_only_filtered_or_documented_statements(
    pg_suite_url: str,
) -> None:
    empty_memory(pg_suite_url)
    with freeze_time(START), MemoryStore(pg_suite_url) as store:
        _agents(store)
        for index in range(8):
            store.remember(f"user{index}", "city", "Lyon", confidence=0.75)

    def work(url: str) -> None:
        with freeze_time(START + timedelta(days=400)), MemoryStore(url) as store:
            result = run_once(store)
            assert any(r.counts for r in result.results)
            undo_run(store, result.results[0].run_id)
            store.status()

    seen = _recorded(pg_suite_url, work)
    assert violations(seen) == []
    used = {allowed_as(t) for t in seen} - {None}
    assert "scan-due" in used  # the jobs' scans are recorded, and allowed by name
