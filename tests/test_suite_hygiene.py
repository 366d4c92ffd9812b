"""The suite itself: `--durations` tells the truth, and a quick run skips only the slow tests.

freezegun swaps the clock functions of every loaded module; unless told to leave pytest's own
timer alone (tests/conftest.py), every test that freezes time reports the frozen date as its
duration. The slowest tests carry ``@pytest.mark.slow`` so ``pytest -m "not slow"`` is quick,
while plain ``pytest`` (what .ci/run runs) still runs them.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import _pytest.timing
import pytest
from freezegun import freeze_time
from helpers.docs import all_docs_text

REPO = Path(__file__).resolve().parent.parent

SLOW = [
    ("test_year_simulation", "test_a_year_of_daily_runs_matches_the_rules_exactly"),
    ("test_service_e2e", "test_service_catches_up_reloads_and_stops"),
    ("test_service_e2e", "test_killed_service_run_is_marked_and_caught_up"),
    ("test_store_concurrency", "test_concurrent_remember_from_several_processes_loses_nothing"),
    ("test_summarize_crash", "test_killed_while_waiting_on_the_llm"),
    ("test_transitions", "test_a_crash_at_any_step_of_a_move_to_cold_loses_and_duplicates_nothing"),
    ("test_transitions", "test_a_crash_at_any_step_of_a_restore_loses_and_duplicates_nothing"),
    ("test_bad_input", "test_non_utf8_arguments_on_the_command_line"),
    ("test_cli", "test_the_real_executable_exit_codes_and_no_tracebacks"),
    ("test_database_files", "test_several_processes_creating_one_new_database_at_once"),
    ("test_operational_errors", "test_read_only_database_as_an_unprivileged_user"),
    ("test_operational_errors", "test_read_only_database_on_a_read_only_mount"),
]


def marks(module_name: str, test_name: str) -> set[str]:
    module = importlib.import_module(module_name)
    found = getattr(module, "pytestmark", [])
    found = found if isinstance(found, list) else [found]
    found = found + list(getattr(getattr(module, test_name), "pytestmark", []))
    return {mark.name for mark in found}


def test_freezegun_leaves_pytests_own_timer_alone() -> None:
    with freeze_time("2001-01-01"):
        assert datetime.now(UTC).year == 2001  # frozen for the code under test
        assert _pytest.timing.time() > datetime(2020, 1, 1, tzinfo=UTC).timestamp()
        before = _pytest.timing.perf_counter()
        assert _pytest.timing.perf_counter() > before  # still moving


@pytest.mark.parametrize(("module", "test"), SLOW, ids=[f"{m}::{t}" for m, t in SLOW])
def test_the_slowest_tests_are_marked_slow(module: str, test: str) -> None:
    assert "slow" in marks(module, test)


def test_a_plain_run_runs_everything() -> None:
    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]
    addopts = options["ini_options"]["addopts"]
    assert "-m" not in addopts.split()  # nothing deselected unless asked for
    assert any(m.startswith("slow:") for m in options["ini_options"]["markers"])


def test_the_docs_document_the_quick_run() -> None:
    assert re.search(r'`pytest -m "not slow"`', all_docs_text())


@pytest.mark.parametrize("case", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_postgresql_case_of_a_backend_parameter_runs_in_the_postgres_group(
    request: pytest.FixtureRequest, case: str
) -> None:
    """tests/conftest.py puts every test that needs the server into one xdist_group, also
    when it reaches the server only at run time (``request.getfixturevalue``)."""
    groups = {mark.args[0] for mark in request.node.iter_markers("xdist_group")}
    assert groups == ({"postgres"} if case == "postgres" else set())
