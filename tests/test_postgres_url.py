"""PostgreSQL URLs: recognised, parsed as libpq reads them, and never shown with a password."""

from __future__ import annotations

import logging

import pytest
from helpers.logs import capture_logs

from memkeeper.errors import InvalidInput
from memkeeper.paths import is_database_url
from memkeeper.storage.postgres.url import mask_url, parse_url

SECRET = "p@ss/w?rd&x"  # every character a URL parser trips on


def test_urls_are_told_from_paths() -> None:
    for url in ("postgresql://h/db", "postgres://h/db", "POSTGRESQL://h", "postgresql://"):
        assert is_database_url(url)
    for path in ("memory.db", "/srv/postgresql/memory.db", "postgresql:/x", "./postgres://x"):
        assert not is_database_url(path)


def test_a_full_url_is_parsed() -> None:
    url = parse_url(
        "postgresql://agent:pw@db.example:6543/memory?sslmode=require&connect_timeout=3"
    )
    assert url.hosts == (("db.example", 6543),)
    assert (url.dbname, url.user, url.has_password) == ("memory", "agent", True)
    assert url.target() == "db.example:6543"
    assert (
        str(url)
        == "postgresql://agent:***@db.example:6543/memory?sslmode=require&connect_timeout=3"
    )
    assert url.conninfo().startswith("postgresql://agent:pw@")


def test_hosts_sockets_and_the_environment() -> None:
    multi = parse_url("postgres://a:1,b,[::1]:7/db")
    assert multi.hosts == (("a", 1), ("b", None), ("::1", 7))
    socket = parse_url("postgresql://agent@/memory?host=/var/run/postgresql")
    assert socket.hosts == (("/var/run/postgresql", None),) and not socket.has_password
    service = parse_url("postgresql:///?service=memory")
    assert (service.hosts, service.dbname, service.user) == ((), None, None)
    assert str(service) == "postgresql:///?service=memory"


def test_target_falls_back_to_libpq_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGHOST", "pg.internal")
    monkeypatch.setenv("PGPORT", "5433")
    assert parse_url("postgresql:///memory").target() == "pg.internal:5433"
    monkeypatch.delenv("PGHOST")
    monkeypatch.delenv("PGPORT")
    assert parse_url("postgresql:///memory").target() == "the local socket:5432"


@pytest.mark.parametrize(
    "text",
    [
        f"postgresql://agent:{SECRET}@db:5432/memory",
        "postgresql://agent:" + "p%40ss%2Fw%3Frd%26x" + "@db/memory",
        f"postgresql://db/memory?user=agent&password={SECRET}",
        f"postgresql://db/memory?sslpassword={SECRET}&password={SECRET}",
        f"postgresql://agent:{SECRET}@db:notaport/memory",
    ],
)
def test_the_password_never_shows(text: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    secrets = {SECRET, "p%40ss%2Fw%3Frd%26x", "ss/w", "w?rd", "rd&x"}
    shown = [mask_url(text)]
    with capture_logs() as lines:
        try:
            url = parse_url(text)
            shown += [str(url), repr(url), f"{url}", str(url.params), url.target()]
            assert url.has_password
            assert url.conninfo() == text  # the driver gets it unchanged
        except InvalidInput as exc:
            shown += [str(exc), repr(exc)]
    shown += [caplog.text, str(lines)]
    for text_shown in shown:
        for secret in secrets:
            assert secret not in text_shown, text_shown
    assert "***" in shown[0]


def test_malformed_urls_are_our_error() -> None:
    for text in ("postgresql://db:0/x", "postgresql://db:99999/x", "mysql://db/x"):
        with pytest.raises(InvalidInput):
            parse_url(text)
