"""The user-filter audit's own tests (issue 23 item 7, docs/guides/scaling.md): the checker finds a
planted unfiltered statement, passes filtered ones, and a run that records one fails, with
and without pytest-xdist. The audit of the real statements runs on every suite run
(tests/helpers/statement_audit.py) and alone in tests/postgres/test_user_filter.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.user_filter import DISTRIBUTED, judge, shape
from helpers.user_filter_allowed import ALLOWED

TESTS = Path(__file__).resolve().parent

FILTERED = [
    "SELECT * FROM memories WHERE user_id = %s AND namespace = %s",
    "SELECT * FROM memories WHERE user_id IN (%s, %s) AND state = 'active'",
    "SELECT * FROM memories WHERE user_id = ANY(%s)",
    "SELECT * FROM memories WHERE (user_id, namespace) IN ((%s, %s))",
    "UPDATE memories SET value = %s WHERE user_id = %(user)s AND id = %(id)s",
    "DELETE FROM cold_memories WHERE user_id = %s",
    "INSERT INTO memories (id, user_id, value) VALUES (%s, %s, %s)",
    "INSERT INTO episodes (user_id, task_name) SELECT user_id, %s FROM memories WHERE user_id = %s",
    # a colocated join: both sides by the same user
    "SELECT m.id FROM memories AS m JOIN vectors AS v ON v.memory_id = m.id "
    "AND v.user_id = m.user_id WHERE m.user_id = %s",
    # a correlated subquery of a filtered outer row
    "SELECT * FROM memories AS m WHERE m.user_id = %s AND NOT EXISTS "
    "(SELECT 1 FROM changes AS c WHERE c.user_id = m.user_id AND c.memory_id = m.id)",
    "WITH mine AS (SELECT id FROM memories WHERE user_id = %s) SELECT * FROM mine",
    # tables that are not distributed, and statements that are not judged
    "SELECT * FROM job_runs ORDER BY rowid",
    "SELECT count(*) FROM tombstones WHERE digest = %s",
    "CREATE INDEX x ON memories (value)",
    "SET search_path TO memkeeper",
    "BEGIN; SELECT pg_advisory_xact_lock(1, 2)",
]

PLANTED = [
    "SELECT * FROM memories WHERE namespace = %s",
    "SELECT * FROM memories WHERE user_id = %s OR namespace = %s",  # an OR is no filter
    "SELECT * FROM memories WHERE NOT user_id = %s",
    "SELECT * FROM memories WHERE user_id != %s",
    "UPDATE memories SET pinned = 1 WHERE key = %s",
    "DELETE FROM messages WHERE session_id = %s",
    "INSERT INTO memories (id, value) VALUES (%s, %s)",
    "INSERT INTO episodes (user_id, task_name) SELECT user_id, %s FROM memories",
    # the outer table is filtered, the subquery's own table is not
    "SELECT * FROM memories WHERE user_id = %s AND id IN (SELECT memory_id FROM uses)",
    # the same table inside: its own rows, not the outer's
    "SELECT * FROM memories WHERE user_id = %s AND id IN (SELECT id FROM memories)",
    # joined, but not on the user: the second table is read for every user
    "SELECT m.id FROM memories AS m JOIN vectors AS v ON v.memory_id = m.id WHERE m.user_id = %s",
    "SELECT count(*) FROM episodes WHERE status = %s",
    "TRUNCATE memories",
    "WITH every AS (SELECT id FROM memories) SELECT * FROM every",
]


@pytest.mark.parametrize("statement", FILTERED)
def test_a_filtered_statement_passes(statement: str) -> None:
    assert judge(statement) is None


@pytest.mark.parametrize("statement", PLANTED)
def test_a_planted_unfiltered_statement_is_a_violation(statement: str) -> None:
    problem = judge(statement, "memkeeper/planted.py:1 here")
    assert problem is not None
    assert set(problem.tables) <= DISTRIBUTED
    assert "memkeeper/planted.py:1 here" in str(problem)


def test_an_allowed_scan_passes_and_nothing_else_of_its_table_does() -> None:
    scan = (
        "SELECT user_id, namespace, id FROM memories WHERE (state = 'pending_review' AND "
        "state_since < %s) ORDER BY user_id, namespace, id LIMIT %s"
    )
    assert judge(scan) is None
    assert judge(scan.replace("ORDER BY", "AND kind = %s ORDER BY")) is not None


def test_a_statement_the_parser_cannot_read_is_reported() -> None:
    problem = judge("SELECT * FROM memories WHERE (((", "memkeeper/x.py:1 f")
    assert problem is not None and "could not parse" in problem.origin


def test_pgvector_distances_are_read_and_judged_like_any_statement() -> None:
    nearest = "SELECT memory_id FROM vectors WHERE {} ORDER BY embedding <=> %s::vector LIMIT 5"
    assert judge(nearest.format("user_id = %s AND model = %s"), allow=False) is None
    caught = judge(nearest.format("model = %s"), allow=False)
    assert caught is not None and "could not parse" not in caught.origin
    assert caught.tables == ("vectors",)


def test_statements_sent_together_are_judged_one_by_one_with_their_values_quoted_in() -> None:
    # storage/postgres/round_trips.py sends statements that need no answer with the next
    # one, in one string, their parameters bound client-side.
    from helpers.user_filter import violations

    together = (
        'BEGIN; SELECT pg_advisory_xact_lock(7); SAVEPOINT "memkeeper_3"; '
        "SELECT * FROM memories WHERE id IN ('a;b', 'c'); "
        "UPDATE messages SET summarized_at = 'x', summary_id = 'y' WHERE id IN (1, 2, 3)"
        " AND summarized_at IS NULL; COMMIT"
    )
    assert violations({together: "here"}) == []
    planted = together.replace("COMMIT", "DELETE FROM memories WHERE value = 'Oslo'; COMMIT")
    [found] = violations({planted: "here"})
    assert found.statement == "DELETE FROM memories WHERE value = 'Oslo'"


def test_a_prepared_statement_is_judged_as_it_was_prepared() -> None:
    # storage/postgres/named_statements.py sends PREPARE name AS ... once per session, then
    # EXECUTE name(...), which names no table: the PREPARE's statement is what is judged.
    from helpers.user_filter import violations

    filtered = (
        "BEGIN; PREPARE memkeeper_ab12 AS SELECT id FROM memories WHERE user_id = $1"
        " AND id IN ($2, $3); EXECUTE memkeeper_ab12('ann', 'a', 'b'); COMMIT"
    )
    assert violations({filtered: "here"}) == []
    planted = "PREPARE memkeeper_cd34 AS DELETE FROM memories WHERE value = $1"
    [found] = violations({planted: "here"})
    assert found.tables == ("memories",)


def test_the_shape_keeps_the_structure_and_drops_the_values() -> None:
    a = 'SELECT * FROM "memkeeper"."memories" WHERE id IN (%s, %s, %s) AND state = \'x\''
    assert shape(a) == "SELECT * FROM memories WHERE id IN (%s) AND state = ?"
    assert shape("SELECT 1 -- a comment\n  FROM t") == "SELECT 0 FROM t"


def test_every_allowed_shape_is_unfiltered_and_matched_by_its_entry() -> None:
    """An entry for a filtered statement, or one its own shape does not match, is a typo."""
    assert [n for n in ALLOWED if not n.startswith(("scan-", "all-", "id-"))] == []
    for name, shapes in ALLOWED.items():
        for statement in shapes:
            if "..." in statement:
                continue
            text = statement.replace("?", "'x'")
            assert judge(text, allow=False) is not None, (name, statement)
            assert judge(text) is None, (name, statement)


PLANTED_RUN = """
from helpers import statements

def test_sends_an_unfiltered_statement(monkeypatch):
    monkeypatch.setattr(statements, "_origin", lambda: "memkeeper/planted.py:7 plant")
    statements._note(None, "SELECT * FROM memories WHERE namespace = %s")

def test_sends_a_filtered_one(monkeypatch):
    monkeypatch.setattr(statements, "_origin", lambda: "memkeeper/planted.py:9 plant")
    statements._note(None, "SELECT * FROM memories WHERE user_id = %s")
"""


@pytest.mark.parametrize("workers", ["0", "1"])
def test_a_run_that_sent_an_unfiltered_statement_fails(tmp_path: Path, workers: str) -> None:
    """The whole path: recorded in a test, judged at the end of the (worker's) session,
    reported by the controller, and the run's exit status is 1 although every test passed."""
    (tmp_path / "test_planted.py").write_text(PLANTED_RUN)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "helpers.statement_audit", "-p",
         "no:cacheprovider", "-n", workers, "-c", os.devnull, "--rootdir", str(tmp_path),
         str(tmp_path / "test_planted.py")],
        check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = run.stdout + run.stderr
    assert "2 passed" in out, out
    assert run.returncode == 1, out
    assert "1 statement(s) without a user filter" in out, out
    assert "memkeeper/planted.py:7 plant" in out, out
    assert "WHERE namespace = %s" in out
    assert "planted.py:9" not in out
