"""Start-up of the memory commands (issue 20 item 13): recall, remember and search import
neither structlog, nor the job runner, the scheduler or the LLM SDK, nor another command's
module. Their time is measured by ``memkeeper bench --startup`` (no wall-clock assert here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from memkeeper import MemoryStore

SCRIPT = """
import json, sys
from memkeeper.cli import main
code = main(sys.argv[2:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=open(sys.argv[1], "w"))
"""

KEPT_OFF = [
    "structlog",
    "asyncio",
    "memkeeper.maintenance.runner",
    "memkeeper.maintenance.jobkit",
    "memkeeper.cli.jobs_cmd",
    "memkeeper.cli.service_cmd",
    "memkeeper.cli.mcp_cmd",
    "memkeeper.cli.backup_cmd",
    "memkeeper.store.context",
    "memkeeper.store.inspection",
    "apscheduler",
    "zhipuai",
    "httpx",
]


@pytest.mark.parametrize(
    "argv",
    [
        ["recall", "bob", "city"],
        ["remember", "bob", "tone", "brief"],
        ["search", "bob", "Paris"],
    ],
)
def test_a_memory_command_imports_only_what_it_needs(db_path: Path, tmp_path: Path, argv) -> None:
    with MemoryStore(db_path) as store:
        store.remember("bob", "city", "Paris")
    report = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(report), "--db", str(db_path), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(report.read_text())
    assert found["code"] == 0
    loaded = [m for m in KEPT_OFF if m in found["modules"]]
    assert loaded == []


def test_the_command_table_names_every_command_and_its_module() -> None:
    """Every command is reachable without --help having loaded the others first."""
    from memkeeper.cli import cli
    from memkeeper.cli.commands import COMMAND_MODULES

    commands = cli.commands
    assert set(commands) == set(COMMAND_MODULES)
    for name, command in commands.items():
        assert command.callback is not None or isinstance(command, click.Group)
        defined = sys.modules[f"memkeeper.cli.{COMMAND_MODULES[name]}"]
        assert command in vars(defined).values(), name


def test_import_memkeeper_loads_no_store_until_asked() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, memkeeper; print('memkeeper.store' in sys.modules);"
            "from memkeeper import MemoryStore, run_once, Memory, InvalidInput;"
            "print('memkeeper.store' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["False", "True"]


def test_bench_startup_reports_the_median_of_each_command(capsys) -> None:
    from memkeeper.cli import main

    assert main(["bench", "--startup", "2", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert set(figures["commands"]) == {"recall", "remember", "search"}
    for row in figures["commands"].values():
        assert row["min_ms"] <= row["median_ms"] <= row["max_ms"]
        assert row["kept_off_imported"] == []
    assert figures["target_ms"] == 150


def test_a_subcommand_another_module_adds_is_there_in_a_fresh_process(db_path: Path) -> None:
    """``review sessions`` is summarize's: running ``review`` alone must still find it."""
    done = subprocess.run(
        [sys.executable, "-m", "memkeeper", "--db", str(db_path), "review", "sessions", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "parked" in done.stdout.lower()
