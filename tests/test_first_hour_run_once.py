"""``run-once`` says which database it used, and that it just created it when it did.

The first line of its text is ``Database:  PATH`` (as ``status`` begins), followed by
``(new: created by this run)`` on the run that created it; ``--json`` carries ``database``
and ``database_created`` beside the jobs, and stays one JSON document.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memkeeper.cli import main

NEW = "(new: created by this run)"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out


def test_the_first_run_names_the_database_it_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "deep" / "memory.db"
    code, out = _run(capsys, "--db", str(db), "run-once")
    assert code == 0
    assert out.splitlines()[0] == f"Database:  {db} {NEW}"
    assert out.splitlines()[1].startswith("settle ")
    code, out = _run(capsys, "--db", str(db), "run-once")
    assert code == 0
    assert out.splitlines()[0] == f"Database:  {db}"


def test_the_default_database_is_named_too(
    isolated_user_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _run(capsys, "run-once", "--job", "expire")
    assert code == 0
    first = out.splitlines()[0]
    assert first.startswith(f"Database:  {isolated_user_dirs}") and first.endswith(NEW)
    assert Path(first.removeprefix("Database:  ").removesuffix(f" {NEW}")).is_file()


def test_json_carries_the_database_and_stays_one_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "memory.db"
    documents: list[dict[str, Any]] = []
    for _ in range(2):
        code, out = _run(capsys, "--db", str(db), "run-once", "--json")
        assert code == 0
        documents.append(json.loads(out))
    assert [(d["database"], d["database_created"]) for d in documents] == [
        (str(db), True),
        (str(db), False),
    ]
    assert all(d["ok"] and d["jobs"] for d in documents)


def test_a_dry_run_says_so_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "memory.db"
    code, out = _run(capsys, "--db", str(db), "run-once", "--dry-run")
    assert code == 0
    assert out.splitlines()[0] == f"Database:  {db} {NEW}"


def test_on_postgresql_the_url_masked_and_whether_the_schema_is_new(
    pg_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from helpers.postgres import create_database

    url = create_database(pg_server, "mk_first_hour")
    code, out = _run(capsys, "--db", url, "run-once", "--job", "expire")
    assert code == 0, out
    first = out.splitlines()[0]
    assert first.startswith("Database:  postgresql://") and first.endswith(NEW)
    code, out = _run(capsys, "--db", url, "run-once", "--json", "--job", "expire")
    document = json.loads(out)
    assert document["database"].startswith("postgresql://")
    assert document["database_created"] is False
