"""The quick start (memkeeper.cli.quick) answers exactly as the click command line does.

Every command line below runs twice on two copies of one database: through ``memkeeper.cli
.main`` (the quick start when it takes the line) and through the click command line alone
(``memkeeper.cli.app.main``). Output, exit code and the stored memories must be the same; the
quick start must take the plain lines and leave the others to click.
"""

from __future__ import annotations

import io
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import click
import pytest
from freezegun import freeze_time

from memkeeper.cli import app, main, output, quick
from memkeeper.store import MemoryStore

TAKEN = [
    ["recall", "bob", "city"],
    ["recall", "bob", "city", "--json"],
    ["recall", "--json", "bob", "city"],
    ["recall", "bob", "tone", "-n", "acme"],
    ["recall", "bob", "tone", "--namespace=acme", "--kind", "preference"],
    ["recall", "bob", "tone", "--namespace", "acme", "--kind", "fact"],
    ["recall", "bob", "nothing"],
    ["recall", "nobody", "city", "--yes"],
    ["recall", "bob", "city", "--kind", "preference", "--kind", "fact"],
    ["remember", "bob", "city", "Lyon"],
    ["remember", "bob", "city", "Lyon", "--json"],
    ["remember", "bob", "city", "Lyon", "--json", "--yes"],
    ["remember", "bob", "style", "short", "--kind", "preference", "-n", "acme"],
    ["remember", "bob", "city", "Rome", "--confidence", "0.6", "--source", "chat"],
    ["remember", "bob", "city", "Rome", "--confidence", "1", "--pin"],
    ["remember", "bob", "city", "Rome", "--confidence", ".25", "--pin", "--no-pin"],
    ["remember", "bob", "city", "Rome", "--ttl-days", "7"],
    ["remember", "bob", "city", ""],
    ["remember", "bob", "city", "a\x1b[31mred\nline"],
    ["remember", "bob", "emoji", "北京 🙂"],
    ["search", "bob", "Paris"],
    ["search", "bob", "Paris", "--json"],
    ["search", "bob", "Paris", "--limit", "1"],
    ["search", "bob", "Paris", "--kind", "note", "--kind", "fact", "--include-cold"],
    ["search", "bob", "brief", "-n", "acme"],
    ["search", "nobody", "anything"],
]
"""Plain command lines: the quick start runs them."""

LEFT = [
    ["recall", "bob", "city", "--help"],
    ["recall", "-h"],
    ["recall", "bob"],
    ["recall", "bob", "city", "extra"],
    ["recall", "", "city"],
    ["recall", "  ", "city"],
    ["recall", "bob", "city", "--kind", "note"],
    ["recall", "bob", "city", "--kind", "FACT"],
    ["recall", "bob", "city", "--json=1"],
    ["recall", "bob", "city", "-n"],
    ["recall", "bob", "city", "-nacme"],
    ["recall", "bob", "city", "--namespace", "--json"],
    ["recall", "--", "bob", "city"],
    ["recall", "bob", "-", "city"],
    ["recall", "bob", "city", "--db", "x.db"],
    ["recall", "bob", "city", "--unknown"],
    ["remember", "bob", "temp", "-5"],
    ["remember", "bob", "city", "Rome", "--confidence", "1.5"],
    ["remember", "bob", "city", "Rome", "--confidence", "nan"],
    ["remember", "bob", "city", "Rome", "--confidence", " 0.5"],
    ["remember", "bob", "city", "Rome", "--ttl-days", "0"],
    ["remember", "bob", "city", "Rome", "--ttl-days", "+3"],
    ["remember", "bob", "city", "Rome", "--ttl-days", "1_0"],
    ["remember", "bob", "city", "Rome", "--pin=yes"],
    ["search", "bob", "Paris", "--limit", "0"],
    ["search", "bob", "Paris", "--limit", "1000001"],
    ["search", "bob", "Paris", "--limit", "x"],
    ["search", "bob", ""],
    ["note", "bob", "a note"],
    ["-v", "recall", "bob", "city"],
    ["--version"],
    ["--now", "2030-01-01T00:00:00Z", "recall", "bob", "city"],
    [],
]
"""Everything else: the quick start leaves them to click."""


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    path = tmp_path / "seed" / "memory.db"
    path.parent.mkdir()
    with MemoryStore(path) as store:
        store.remember("bob", "city", "Paris")
        store.remember("bob", "tone", "brief", kind="preference", namespace="acme")
        store.add_note("bob", "met Carla in Paris")
    return path


def _copy(seeded: Path, name: str) -> Path:
    target = seeded.parent.parent / name / "memory.db"
    target.parent.mkdir()
    shutil.copy2(seeded, target)
    return target


_ID = re.compile(r'(?<=[ "])[0-9a-f]{16}\b')
_TIMING = re.compile(r"\d+\.\d ms")


def _normal(text: str) -> str:
    """Output less what differs between any two runs at one frozen time: ids and timings."""
    return _TIMING.sub("N ms", _ID.sub("ID", text))


def _memories(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT user_id, namespace, kind, key, value, source, state, confidence, pinned,"
            " ttl_days, access_count FROM memories"
            " ORDER BY user_id, namespace, kind, key, value, state"
        ).fetchall()


def _run(runner, db: Path, args: list[str], capsys) -> tuple[int | None, str, str]:
    try:
        code = runner(["--db", str(db), *args])
    except SystemExit as exc:  # --version and --help leave click as SystemExit
        code = exc.code
    captured = capsys.readouterr()
    return code, _normal(captured.out), _normal(captured.err)


@pytest.mark.parametrize("args", TAKEN + LEFT, ids=lambda args: " ".join(args) or "(none)")
def test_the_quick_start_and_click_give_the_same_answer(seeded: Path, args, capsys) -> None:
    quick_db, click_db = _copy(seeded, "quick"), _copy(seeded, "click")
    with freeze_time("2026-12-02T08:00:00Z"):
        by_main = _run(main, quick_db, args, capsys)
        by_click = _run(app.main, click_db, args, capsys)
    assert by_main == by_click
    assert _memories(quick_db) == _memories(click_db)


@pytest.mark.parametrize("args", TAKEN, ids=" ".join)
def test_the_quick_start_takes_the_plain_lines(args) -> None:
    assert quick.parse(["--db", "memory.db", *args]) is not None
    assert quick.parse(["--db=memory.db", *args]) is not None
    assert quick.parse(args) is not None


@pytest.mark.parametrize("args", LEFT, ids=lambda args: " ".join(args) or "(none)")
def test_the_quick_start_leaves_everything_else_to_click(args) -> None:
    assert quick.parse(["--db", "memory.db", *args]) is None


def test_a_db_that_is_a_directory_or_unreadable_is_left_to_click(tmp_path: Path) -> None:
    assert quick.parse(["--db", str(tmp_path), "recall", "bob", "city"]) is None
    assert quick.parse(["--db", "", "recall", "bob", "city"]) is None
    assert quick.parse(["--dbx", "a.db", "recall", "bob", "city"]) is None


def test_a_pretend_clock_or_shell_completion_is_left_to_click(monkeypatch) -> None:
    monkeypatch.setenv("MEMKEEPER_NOW", "2030-01-01T00:00:00Z")
    assert quick.run_quick(["recall", "bob", "city"]) is None
    monkeypatch.delenv("MEMKEEPER_NOW")
    monkeypatch.setenv("_MEMKEEPER_COMPLETE", "bash_complete")
    assert quick.run_quick(["recall", "bob", "city"]) is None


def test_echo_writes_what_click_echo_writes(monkeypatch) -> None:
    for text in ("plain", "北京 🙂", "a\x1b[31mred\x1b[0m", ""):
        for err in (False, True):
            ours, theirs = io.StringIO(), io.StringIO()
            name = "stderr" if err else "stdout"
            monkeypatch.setattr(sys, name, ours)
            output.echo(text, err=err)
            monkeypatch.setattr(sys, name, theirs)
            click.echo(text, err=err)
            assert ours.getvalue() == theirs.getvalue()


def test_a_plain_recall_loads_neither_click_nor_the_command_table_nor_logging(seeded: Path) -> None:
    code = (
        "import sys\n"
        "from memkeeper.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "loaded = [m for m in ('click', 'memkeeper.cli.app', 'memkeeper.cli.memory_cmd',"
        " 'platformdirs', 'logging') if m in sys.modules]\n"
        "print(code, loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--db", str(seeded), "recall", "bob", "city"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.splitlines() == ["Paris", "0 []"]
