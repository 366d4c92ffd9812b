"""What the ``memkeeper ui`` tests share (no tests here): a database the demo filled with a
year of maintenance, made once per test process, and a fresh copy of it per test on either
backend (on PostgreSQL: the test database emptied, then ``migrate-to`` from the copy)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.clock import fixed, parse_user_time
from memkeeper.config import Config

NOW = "2028-01-01T12:00:00+00:00"
"""The demo's year runs through 2027; the pages are read at noon of the next day."""
DEMO_MONTHS = 12
ADMIN_TOKEN = "admin-token-0123456789abcdef"
LIN_TOKEN = "lin-token-0123456789abcdefgh"
_made: dict[str, Path] = {}


def demo_database(base: Path) -> Path:
    """The demo's kept database (a year of three agents, maintained on schedule), made once
    per process under ``base``."""
    if "demo" not in _made:
        from memkeeper.demo.run import DemoOptions, run_demo
        from memkeeper.logs import configure

        keep = base / "ui-demo"
        run_demo(DemoOptions(months=DEMO_MONTHS, seed=1, keep=keep, config=Config()))
        configure(level="warning", fmt="console")
        _made["demo"] = keep / "memory.db"
    return _made["demo"]


def fresh_copy(demo: Path, tmp_path: Path, db_path: Any, backend: str) -> str:
    """The demo's memory, fresh for one test: copied files on SQLite, migrated to the
    (emptied) test database on PostgreSQL. Returns what ``--db`` takes."""
    copy = tmp_path / "demo-copy"
    copy.mkdir()
    for file in demo.parent.glob("memory*.db"):
        shutil.copy2(file, copy / file.name)
    if backend == "sqlite":
        return str(copy / "memory.db")
    code = main(["--db", str(copy / "memory.db"), "migrate-to", str(db_path), "--json"])
    assert code == 0
    return str(db_path)


def ui_store(db: str) -> MemoryStore:
    """The store a ``memkeeper ui --now NOW`` serves."""
    store = MemoryStore(db, config=Config(), clock=fixed(parse_user_time(NOW)), create=False)
    store.actor = "ui"
    return store


def cli_json(capsys: Any, db: str, *args: str) -> Any:
    """A CLI command's JSON at the pages' clock (``--now NOW``)."""
    capsys.readouterr()
    code = main(["--db", db, "--now", NOW, *args, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def memories_of(capsys: Any, db: str) -> list[dict[str, Any]]:
    """Every memory (``list --json``), hot and cold, in a stable order."""
    found = cli_json(capsys, db, "list")
    return sorted(found, key=lambda memory: memory["id"])


def write_token_file(path: Path) -> Path:
    path.write_text(
        f'[[tokens]]\ntoken = "{ADMIN_TOKEN}"\nadmin = true\n\n'
        f'[[tokens]]\ntoken = "{LIN_TOKEN}"\nuser = "lin"\n',
        encoding="utf-8",
    )
    path.chmod(0o600)
    return path


def twin_of(demo: Path, tmp_path: Path) -> str:
    """Another SQLite copy of the demo, for a CLI twin to act on."""
    twin = tmp_path / "twin"
    twin.mkdir()
    for file in demo.parent.glob("memory*.db"):
        shutil.copy2(file, twin / file.name)
    return str(twin / "memory.db")
