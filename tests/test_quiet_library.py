"""memkeeper used as a library is quiet: it logs through stdlib ``logging`` (the ``memkeeper``
logger hierarchy), prints nothing unless the host configures logging, never writes to
standard output, and leaves the host's global logging and structlog configuration alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import json, logging, sys
{setup}
from memkeeper import MemoryStore, run_once
store = MemoryStore(sys.argv[1])
store.remember("bob", "city", "Paris")
store.remember("bob", "report_format", "PDF", kind="preference", namespace="acme")
assert store.recall("bob", "city").value == "Paris"
store.search("bob", "Paris")
store.context("bob", namespace="acme")
run_once(store, ["merge", "expire"], dry_run=True)
store.close()
import structlog
report = {{
    "structlog_configured": structlog.is_configured(),
    "root_handlers": [type(h).__name__ for h in logging.getLogger().handlers],
    "root_level": logging.getLogger().level,
}}
with open(sys.argv[2], "w") as out:
    json.dump(report, out)
"""


def run_host(tmp_path: Path, setup: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(setup=setup), str(tmp_path / "m.db"), str(report)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done, json.loads(report.read_text())


def test_a_host_that_configures_nothing_sees_nothing(tmp_path: Path) -> None:
    done, report = run_host(tmp_path, setup="")

    assert done.stdout == ""
    assert done.stderr == ""
    # Nothing of the host's was configured on its behalf.
    assert report == {"structlog_configured": False, "root_handlers": [], "root_level": 30}


def test_a_host_that_turns_logging_on_reads_memkeeper_on_its_handler(tmp_path: Path) -> None:
    done, report = run_host(
        tmp_path, setup="logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)"
    )

    assert done.stdout == ""
    lines = done.stderr.splitlines()
    # The search's debug line and the runner's info lines, with their fields.
    assert any(line.startswith("DEBUG:memkeeper.search:search candidates=") for line in lines)
    started = [line for line in lines if line.startswith("INFO:memkeeper.runner:job started")]
    assert len(started) == 2
    assert all("dry_run=True" in line and "run_id=" in line for line in started)
    assert {line.split("job='")[1].split("'")[0] for line in started} == {"merge", "expire"}
    assert report["structlog_configured"] is False
    assert report["root_handlers"] == ["StreamHandler"]


def test_memkeeper_loggers_are_stdlib_loggers_a_host_can_filter(tmp_path: Path) -> None:
    setup = (
        "logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)\n"
        "logging.getLogger('memkeeper').setLevel(logging.WARNING)"
    )
    done, _report = run_host(tmp_path, setup=setup)

    assert done.stdout == ""
    assert "memkeeper" not in done.stderr


@pytest.mark.parametrize("level", ["debug", "info"])
def test_the_library_never_imports_structlog_to_log(tmp_path: Path, level: str) -> None:
    """Logging at any level costs no structlog import (it is ~90 ms through asyncio)."""
    setup = f"logging.basicConfig(level=logging.{level.upper()}, stream=sys.stderr)"
    check = "assert 'structlog' not in sys.modules, 'imported'\n"
    script = SCRIPT.format(setup=setup).replace("import structlog\n", check + "import structlog\n")
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "m.db"), str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_a_hosts_handler_reads_each_lines_fields_on_the_record(tmp_path: Path) -> None:
    """The README's promise to hosts: every field is in the record's ``memkeeper_fields``
    (and in the message), so a host's own formatter can use them."""
    import logging

    from memkeeper import MemoryStore, logs

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(level=logging.DEBUG)
    root = logging.getLogger("memkeeper")
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        with MemoryStore(tmp_path / "memory.db") as store:
            store.remember("bob", "city", "Paris")
            store.search("bob", "Paris")
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    [line] = [
        r for r in records if r.name == "memkeeper.search" and str(r.msg).startswith("search")
    ]
    fields = getattr(line, logs.FIELDS_ATTR)
    assert fields["hits"] == 1 and "candidates" in fields
    assert "hits=1" in line.getMessage()
