"""PostgreSQL's driver is an optional extra: SQLite's commands never import it.

The wheel-install CI leg installs memkeeper without extras; this is the same check in the
suite, with psycopg, psycopg_pool and pgvector made unimportable in a real process (a
regression: the fleet's host name was once imported through the PostgreSQL leadership
module by the job runner and ``status``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BLOCKER = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("psycopg", "psycopg_pool", "pgvector"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None
sys.meta_path.insert(0, Block())
from memkeeper.entry import entry
sys.argv = ["memkeeper", *sys.argv[1:]]
entry()
"""


@pytest.mark.parametrize(
    "commands",
    [
        [["run-once"], ["status"], ["status", "--json"]],
        [["remember", "ann", "city", "Oslo"], ["search", "ann", "Oslo"], ["context", "ann"]],
        [["run-once", "--dry-run", "--json"], ["log"], ["forget-user", "ann", "--yes"]],
    ],
    ids=["jobs-and-status", "agents", "corrections"],
)
def test_sqlite_commands_run_without_the_postgresql_driver(
    tmp_path: Path, commands: list[list[str]]
) -> None:
    script = tmp_path / "blocked.py"
    script.write_text(BLOCKER, encoding="utf-8")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MEMKEEPER_") and key not in ("XDG_DATA_HOME", "XDG_CONFIG_HOME")
    }
    env.update(HOME=str(tmp_path / "home"), MEMKEEPER_DEBUG="1")
    subprocess.run(
        [sys.executable, str(script), "remember", "ann", "x", "y"],
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    for command in commands:
        done = subprocess.run(
            [sys.executable, str(script), *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, (command, done.stderr[-2000:])
        assert "psycopg" not in done.stderr
