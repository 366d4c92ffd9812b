"""A driver's error that escapes the storage layer still becomes one line and an exit code."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from memkeeper.errors import EXIT_BUSY, EXIT_CANT_CREATE, EXIT_DATABASE
from memkeeper.logs import expected_failure
from memkeeper.storage.driver_errors import explain


@pytest.mark.parametrize(
    ("error", "code", "words"),
    [
        (sqlite3.OperationalError("database or disk is full"), EXIT_CANT_CREATE, "disk is full"),
        (
            sqlite3.OperationalError("attempt to write a readonly database"),
            EXIT_CANT_CREATE,
            "read-only",
        ),
        (sqlite3.DatabaseError("file is not a database"), EXIT_DATABASE, "database error"),
        (psycopg.OperationalError("server closed the connection\nmore"), EXIT_BUSY, "PostgreSQL"),
        (psycopg.errors.UndefinedTable('relation "x" does not exist'), EXIT_DATABASE, "PostgreSQL"),
    ],
)
def test_a_drivers_error_is_worded_with_its_exit_code(error, code: int, words: str) -> None:
    message, exit_code = explain(error)
    assert exit_code == code and words in message and "\n" not in message


def test_other_errors_are_not_a_drivers() -> None:
    assert explain(ValueError("x")) is None


def test_the_drivers_operational_errors_are_expected_failures_not_bugs() -> None:
    assert expected_failure(sqlite3.OperationalError("disk I/O error"))
    assert expected_failure(psycopg.OperationalError("connection lost"))
    assert not expected_failure(sqlite3.IntegrityError("constraint"))
    assert not expected_failure(KeyError("bug"))
