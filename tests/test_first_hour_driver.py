"""A PostgreSQL URL on an install without the ``postgres`` extra: one line naming the extra.

Without the driver, ``--db postgresql://…`` used to end in ``internal error
(ModuleNotFoundError: No module named 'psycopg')``, exit 1. Now the library raises
:class:`~memkeeper.errors.DriverMissing` (a MemkeeperError) and the command line exits 78
(the install's configuration) with ``pip install 'memkeeper[postgres]'`` in its one line.
The driver is made unimportable by an import hook, in this process and in a real one.
"""

from __future__ import annotations

import importlib.abc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memkeeper import DriverMissing, MemkeeperError, MemoryStore
from memkeeper.cli import main
from memkeeper.cli.failures import exit_code_of
from memkeeper.errors import EXIT_CONFIG

URL = "postgresql://mk:S3cret-pw@db.invalid/memory"
INSTALL = "pip install 'memkeeper[postgres]'"
DRIVER = ("psycopg", "psycopg_pool", "pgvector")


class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if name.split(".", maxsplit=1)[0] in DRIVER:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


@pytest.fixture
def no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """psycopg and the rest of the extra cannot be imported, as on an install without it
    (what this process imported already is forgotten until the test ends)."""
    for name in list(sys.modules):
        top = name.split(".")[0]
        driven = name.startswith("memkeeper.storage.postgres.") and not name.endswith(
            (".driver", ".url")
        )
        if top in DRIVER or driven:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_Block(), *sys.meta_path])


def _one_line_naming_the_extra(stderr: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert INSTALL in lines[0] and "psycopg" in lines[0]
    assert "internal error" not in stderr and "Traceback" not in stderr
    assert "S3cret-pw" not in stderr and "mk:***@db.invalid" in stderr


@pytest.mark.usefixtures("no_driver")
def test_the_library_raises_our_error_naming_the_extra() -> None:
    with pytest.raises(DriverMissing) as caught:
        MemoryStore(URL)
    assert isinstance(caught.value, MemkeeperError)
    assert caught.value.exit_code == EXIT_CONFIG == 78
    message = str(caught.value)
    assert INSTALL in message and "no module named 'psycopg'" in message
    assert "S3cret-pw" not in message and "postgresql://mk:***@db.invalid/memory" in message
    assert caught.value.__cause__ is None  # one error, not a chained ImportError


@pytest.mark.usefixtures("no_driver")
@pytest.mark.parametrize(
    "command",
    [["recall", "ann", "city"], ["remember", "ann", "city", "Oslo"], ["status"], ["run-once"]],
    ids=["quick-read", "quick-write", "click-read", "run-once"],
)
def test_the_command_line_exits_78_with_one_line(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--db", URL, *command])
    captured = capsys.readouterr()
    assert code == 78, captured.err
    _one_line_naming_the_extra(captured.err)


@pytest.mark.usefixtures("no_driver")
def test_migrate_to_a_url_without_the_driver(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    MemoryStore(tmp_path / "memory.db").close()
    code = main(["--db", str(tmp_path / "memory.db"), "migrate-to", URL])
    assert code == 78
    _one_line_naming_the_extra(capsys.readouterr().err)


def test_an_import_of_the_driver_anywhere_reads_the_same(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The edge's safety net: a driver import that fails past every opening (a path not
    known today) is still the one line and exit 78, not an internal error."""
    code = exit_code_of(ModuleNotFoundError("No module named 'psycopg_pool'", name="psycopg_pool"))
    err = capsys.readouterr().err
    assert code == 78 and INSTALL in err and "internal error" not in err
    assert exit_code_of(ModuleNotFoundError("No module named 'yaml'", name="yaml")) == 1


BLOCKER = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("psycopg", "psycopg_pool", "pgvector"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
from memkeeper.entry import entry
sys.argv = ["memkeeper", *sys.argv[1:]]
entry()
"""


@pytest.mark.parametrize(
    "command", [["remember", "ann", "city", "Oslo"], ["run-once", "--json"]], ids=str
)
def test_a_real_process_without_the_driver(tmp_path: Path, command: list[str]) -> None:
    script = tmp_path / "blocked.py"
    script.write_text(BLOCKER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMKEEPER_")}
    env["HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, str(script), "--db", URL, *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 78, done.stderr
    assert done.stdout == ""
    _one_line_naming_the_extra(done.stderr)
