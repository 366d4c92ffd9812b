"""The command line on PostgreSQL: the commands an agent's operator runs, and the errors of
a server that refuses the password or does not answer (one line, exit 77 / 75, the password
nowhere in the output). tests/test_cli.py runs the foundation commands on both backends;
this module adds what only a server has: roles, passwords, libpq's environment, hosts.
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import psycopg
import pytest
from helpers.postgres import ROLE_PASSWORD as PASSWORD
from helpers.postgres import as_role

from memkeeper.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_an_agents_commands_work_on_postgresql_as_a_role_with_a_password(
    pg_database: str, role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = as_role(pg_database, role, PASSWORD)
    steps = [
        ("remember", "alice", "city", "Beijing", "--source", "chat"),
        ("remember", "alice", "tone", "brief", "--kind", "preference", "-n", "p"),
        ("note", "alice", "Met Bob about the Q3 report", "-n", "p"),
    ]
    for step in steps:
        code, _, err = run(capsys, "--db", url, *step)
        assert code == 0, err
    code, out, err = run(capsys, "--db", url, "recall", "alice", "city")
    assert (code, out.strip()) == (0, "Beijing"), err
    code, out, _ = run(capsys, "--db", url, "search", "alice", "Q3 report", "-n", "p", "--json")
    assert code == 0
    hits = json.loads(out)
    assert hits and hits[0]["memory"]["value"] == "Met Bob about the Q3 report"
    code, out, _ = run(capsys, "--db", url, "context", "alice", "-n", "p", "--query", "tone")
    assert code == 0 and "brief" in out and "Met Bob" in out
    code, out, _ = run(capsys, "--db", url, "list", "--user", "alice", "--json")
    listed = json.loads(out)
    memories = listed["memories"] if isinstance(listed, dict) else listed
    assert code == 0 and len(memories) == 3
    city = next(m for m in memories if m.get("key") == "city")
    code, out, _ = run(capsys, "--db", url, "explain", city["id"])
    assert code == 0 and "Beijing" in out and "chat" in out
    # Nothing the commands printed holds the password.
    assert PASSWORD not in out


def test_libpqs_environment_supplies_the_password_and_memkeeper_db_the_url(
    pg_database: str, role: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    monkeypatch.setenv("MEMKEEPER_DB", as_role(pg_database, role, None))
    assert run(capsys, "remember", "alice", "city", "Oslo")[0] == 0
    code, out, _ = run(capsys, "recall", "alice", "city")
    assert (code, out.strip()) == (0, "Oslo")
    with psycopg.connect(pg_database) as conn:
        [(value,)] = conn.execute("SELECT value FROM memkeeper.memories").fetchall()
    assert value == "Oslo"


@pytest.mark.parametrize("verbose", [[], ["-vv"]], ids=["quiet", "debug"])
def test_a_wrong_password_is_one_line_exit_77_without_the_password(
    pg_database: str, role: str, capsys: pytest.CaptureFixture[str], verbose: list[str]
) -> None:
    wrong = "Wr0ng-" + PASSWORD
    url = as_role(pg_database, role, wrong)
    code, out, err = run(capsys, *verbose, "--db", url, "recall", "alice", "city")
    assert code == 77 and out == ""
    line = err.strip().splitlines()[-1]
    assert line.startswith("memkeeper: error: PostgreSQL at ") and role in line
    assert "password authentication failed" in line
    if not verbose:
        one_line(err)
    assert wrong not in err and PASSWORD not in err
    code, out, err = run(capsys, *verbose, "--db", url, "remember", "alice", "city", "Oslo")
    assert code == 77 and wrong not in err + out
    with psycopg.connect(pg_database) as conn:  # nothing was created by the refused commands
        assert conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'memkeeper'"
        ).fetchone() == (0,)


def test_a_refused_connection_is_one_line_exit_75(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    url = f"postgresql://agent:{PASSWORD}@127.0.0.1:{port}/memory"
    code, out, err = run(capsys, "--db", url, "recall", "alice", "city")
    assert code == 75 and out == ""
    line = one_line(err)
    assert f"cannot connect to PostgreSQL at 127.0.0.1:{port}" in line
    assert PASSWORD not in err


def test_a_server_that_never_answers_is_a_bounded_wait_then_exit_75(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[database]\nconnect_timeout_s = 2\n", encoding="utf-8")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        url = f"postgresql://agent:{PASSWORD}@127.0.0.1:{port}/memory"
        outcome: list[int] = []
        worker = threading.Thread(
            target=lambda: outcome.append(
                main(["--config", str(config), "--db", url, "recall", "alice", "city"])
            ),
            daemon=True,
        )
        worker.start()
        worker.join(60)  # a liveness guard: without the timeout the command never returns
        assert not worker.is_alive(), "the command kept waiting for a silent server"
    captured = capsys.readouterr()
    assert outcome == [75]
    line = one_line(captured.err)
    assert f"127.0.0.1:{port}" in line and "timeout" in line.lower()
    assert PASSWORD not in captured.err + captured.out


def test_migrate_to_names_the_target_with_its_password_masked(
    tmp_path: Path, pg_database: str, role: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "memory.db")
    assert run(capsys, "--db", db, "remember", "alice", "city", "Oslo")[0] == 0
    url = as_role(pg_database, role, PASSWORD)
    code, out, err = run(capsys, "--db", db, "migrate-to", url)
    assert code == 0, err
    assert f"{role}:***@" in out and PASSWORD not in out + err
    code, out, err = run(capsys, "--db", db, "migrate-to", url, "--json")
    assert code == 73 and PASSWORD not in out + err and f"{role}:***@" in err
    code, out, _ = run(capsys, "--db", url, "recall", "alice", "city")
    assert (code, out.strip()) == (0, "Oslo")


def test_a_failing_statement_is_one_line_exit_74(
    pg_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "--db", pg_database, "remember", "alice", "city", "Oslo")[0] == 0
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("DROP TABLE memkeeper.messages")  # an operator's mistake, say
    code, out, err = run(capsys, "--db", pg_database, "history", "alice", "s1")
    assert code == 74 and out == ""
    line = one_line(err)
    assert line.startswith("memkeeper: error: database error (PostgreSQL")
    assert 'relation "messages" does not exist' in line


def test_a_connection_killed_mid_write_is_one_line_exit_75_and_writes_nothing(
    pg_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "--db", pg_database, "remember", "alice", "city", "Oslo")[0] == 0
    with psycopg.connect(pg_database, autocommit=True) as conn:
        # The server ends the writer's own session while its transaction is open.
        conn.execute(
            "CREATE FUNCTION memkeeper.kill_writer() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER kill_writer BEFORE INSERT ON memkeeper.memories"
            " FOR EACH ROW EXECUTE FUNCTION memkeeper.kill_writer()"
        )
    code, out, err = run(capsys, "--db", pg_database, "remember", "bob", "city", "Rome")
    assert code == 75 and out == ""
    line = one_line(err)
    assert "the connection to " in line and " was lost" in line
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("DROP TRIGGER kill_writer ON memkeeper.memories")
        users = conn.execute("SELECT user_id FROM memkeeper.memories").fetchall()
        changes = conn.execute("SELECT count(*) FROM memkeeper.changes").fetchone()
    assert users == [("alice",)] and changes == (1,)  # the change and its log row: neither
    assert run(capsys, "--db", pg_database, "remember", "bob", "city", "Rome")[0] == 0
