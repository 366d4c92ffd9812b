"""Start-up of the memory commands (issue 20 item 13): with no config file and no API key,
recall, remember and search import neither pydantic (nor the config schema), sqlite-utils,
numpy or structlog, nor the job runner, the scheduler or the LLM SDK, nor another command's
module, and none of them scans pydantic's plugins. Their time is measured by ``memkeeper
bench --startup`` (no wall-clock assert here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import pytest

from memkeeper import MemoryStore

SCRIPT = """
import atexit, json, runpy, sys

def report():
    loader = sys.modules.get("pydantic.plugin._loader")
    found = {
        "modules": sorted(sys.modules),
        "plugins_scanned": loader is not None and loader._plugins is not None,
    }
    print(json.dumps(found), file=open(report_path, "w"))

report_path = sys.argv[1]
sys.argv = ["memkeeper", *sys.argv[2:]]
atexit.register(report)
runpy.run_module("memkeeper", run_name="__main__")  # python -m memkeeper: exits with its code
"""
"""``python -m memkeeper ARGS`` as the program runs, reporting at exit what it imported."""

KEPT_OFF = [
    # The plain memory commands start without click (memkeeper.cli.quick) and, on plain
    # Linux, without platformdirs (memkeeper.paths).
    "click",
    "platformdirs",
    # Only the MCP server buffers uses (storage/use_buffer_probe.py asks without loading it);
    # logging loads at the first record anyone could see (memkeeper.logs).
    "memkeeper.storage.use_buffer",
    "logging",
    "structlog",
    "asyncio",
    # With no config file there is nothing to validate: the schema is not built.
    "pydantic",
    "pydantic_core",
    "memkeeper.config.schema",
    # Storage opens the file with sqlite3 itself; sqlite-utils runs migrations only.
    "sqlite_utils",
    "dateutil",
    "pluggy",
    "importlib.metadata",
    # search without a key is keyword-only: no vectors read, no numpy.
    "numpy",
    "memkeeper.llm.client",
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


def _child_env() -> dict[str, str]:
    """The test's environment less what would hide the program's own process set-up."""
    return {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}


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
        env=_child_env(),
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(report.read_text())
    loaded = [m for m in KEPT_OFF if m in found["modules"]]
    assert loaded == []
    assert found["plugins_scanned"] is False  # pydantic's entry-point scan (~20-30 ms)


def test_the_console_script_and_python_m_start_at_the_process_set_up() -> None:
    with (Path(__file__).parent.parent / "pyproject.toml").open("rb") as file:
        scripts = tomllib.load(file)["project"]["scripts"]
    assert scripts["memkeeper"] == "memkeeper.entry:entry"
    import memkeeper.__main__ as python_m
    import memkeeper.entry

    assert python_m.entry is memkeeper.entry.entry


def test_the_process_set_up_imports_nothing_and_sqlite_utils_still_works_later(
    tmp_path: Path,
) -> None:
    """prepare_process only sets the plugin switch; sqlite-utils (the migrations) still
    imports whole where it is needed, numpy included."""
    script = (
        "import sys\n"
        "from memkeeper.entry import prepare_process\n"
        "prepare_process()\n"
        "assert 'numpy' not in sys.modules and 'sqlite_utils' not in sys.modules\n"
        "import numpy, sqlite_utils\n"
        "db = sqlite_utils.Database(sys.argv[1])\n"
        "db['t'].insert({'n': 1, 'x': float(numpy.float32(0.5))})\n"
        "print(list(db.query('select n, x from t')), numpy.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "t.db")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=_child_env(),
    )
    assert done.stdout.split("]")[1].strip() == "numpy"
    assert "{'n': 1, 'x': 0.5}" in done.stdout


def test_a_library_user_keeps_numpy_with_sqlite_utils_and_pydantic_plugins_on() -> None:
    """The process set-up is the program's: importing memkeeper changes nothing of the host's."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys, memkeeper\n"
            "from memkeeper import MemoryStore\n"
            "import memkeeper.cli, sqlite_utils.db\n"
            "print(os.environ.get('PYDANTIC_DISABLE_PLUGINS'), sqlite_utils.db.np is not None)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=_child_env(),
    )
    assert done.stdout.split() == ["None", "True"]


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
        assert row["cpu_median_ms"] > 0
        assert row["kept_off_imported"] == []
    assert figures["target_ms"] == 150
    assert figures["install"] in {"regular", "editable", "source tree"}


def test_the_bench_keeps_the_same_modules_off_as_this_test() -> None:
    """What the bench reports as leaked is what this test forbids (a name under a package
    forbids the package's modules too)."""
    from memkeeper.bench.startup import KEPT_OFF as BENCH_KEPT_OFF

    assert set(BENCH_KEPT_OFF) <= set(KEPT_OFF)
    assert {"pydantic", "sqlite_utils", "numpy", "memkeeper.config.schema"} <= set(BENCH_KEPT_OFF)


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
