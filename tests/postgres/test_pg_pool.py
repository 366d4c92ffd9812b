"""The connection pool on a real server: open and close, a wrong password, a dead host."""

from __future__ import annotations

import logging
import socket
import threading
import uuid

import psycopg
import pytest
from helpers.logs import capture_logs
from psycopg import sql

from memkeeper.errors import (
    EXIT_BUSY,
    EXIT_NO_PERMISSION,
    AuthenticationFailed,
    DatabaseUnreachable,
)
from memkeeper.storage.postgres.pool import Pool, PoolClosed, connect
from memkeeper.storage.postgres.url import parse_url

PASSWORD = "s3cret-Pa55word"


@pytest.fixture
def role(pg_database: str) -> str:
    """A login role with PASSWORD; returns its name. The server checks its password."""
    name = f"mk_role_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(name), sql.Literal(PASSWORD)
            )
        )
    yield name
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def _as(url: str, user: str, password: str) -> str:
    return url.replace("postgres:@", f"{user}:{password}@", 1)


def test_a_pool_opens_serves_and_closes(pg_schema: tuple[str, str]) -> None:
    url, schema = pg_schema
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    pool = Pool(parse_url(url), schema=schema, max_size=2).open()
    try:
        with pool.connection() as conn:
            (path,) = conn.execute("SHOW search_path").fetchone()
            (app,) = conn.execute("SHOW application_name").fetchone()
        assert path.split(", ")[0] == schema
        assert app == "memkeeper"
        assert pool.stats()["pool_size"] >= 1
    finally:
        pool.close()
    assert pool.closed
    with pytest.raises(PoolClosed), pool.connection():
        pass


def test_a_wrong_password_is_our_error_without_the_password(
    pg_database: str, role: str, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "Wr0ng-" + PASSWORD
    url = parse_url(_as(pg_database, role, wrong))
    with psycopg.connect(_as(pg_database, role, PASSWORD)) as conn:  # the right one works
        assert conn.execute("SELECT current_user").fetchone() == (role,)
    caplog.set_level(logging.DEBUG)
    with capture_logs() as lines, pytest.raises(AuthenticationFailed) as caught:
        Pool(url, schema="memkeeper", connect_timeout=5).open()
    message = str(caught.value)
    assert caught.value.exit_code == EXIT_NO_PERMISSION == 77
    assert "\n" not in message
    assert role in message and "password authentication failed" in message
    for text in (message, repr(caught.value), str(url), repr(url), caplog.text, str(lines)):
        assert wrong not in text
        assert PASSWORD not in text
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_password_from_pgpassword_works(
    pg_database: str, role: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    url = parse_url(pg_database.replace("postgres:@", f"{role}@", 1))
    assert not url.has_password
    with connect(url) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (role,)
    monkeypatch.setenv("PGPASSWORD", "not-" + PASSWORD)
    with pytest.raises(AuthenticationFailed) as caught:
        connect(url)
    assert PASSWORD not in str(caught.value)


def test_a_refused_connection_names_host_and_port_not_the_password() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    url = parse_url(f"postgresql://agent:{PASSWORD}@127.0.0.1:{port}/memory")
    with pytest.raises(DatabaseUnreachable) as caught:
        Pool(url, schema="memkeeper", connect_timeout=2).open()
    message = str(caught.value)
    assert caught.value.exit_code == EXIT_BUSY
    assert f"127.0.0.1:{port}" in message and "refused" in message.lower()
    assert PASSWORD not in message and "\n" not in message


def test_a_server_that_never_answers_times_out() -> None:
    # A socket that accepts connections (the kernel's backlog) but never speaks: libpq sends
    # its startup packet and waits; only connect_timeout ends the wait.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        url = parse_url(f"postgresql://agent:{PASSWORD}@127.0.0.1:{port}/memory")
        outcome: list[BaseException] = []

        def attempt() -> None:
            try:
                Pool(url, schema="memkeeper", connect_timeout=2).open()
            except BaseException as exc:
                outcome.append(exc)

        worker = threading.Thread(target=attempt, daemon=True)
        worker.start()
        worker.join(60)  # a liveness guard: without the timeout the attempt never returns
        assert not worker.is_alive(), "connecting to a silent server did not time out"
    assert len(outcome) == 1 and isinstance(outcome[0], DatabaseUnreachable), outcome
    message = str(outcome[0])
    assert f"127.0.0.1:{port}" in message and "timeout" in message.lower()
    assert PASSWORD not in message
