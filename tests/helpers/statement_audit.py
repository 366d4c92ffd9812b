"""The suite's user-filter audit (issue 23 item 7): pytest hooks, imported by tests/conftest.py
(or loaded as a plugin, ``-p helpers.statement_audit``).

Every run records the statements memkeeper sends to PostgreSQL (:mod:`helpers.statements`);
at the end each process (each pytest-xdist worker, or the one process) judges its own
(:mod:`helpers.user_filter`) and a worker hands its violations to the controller through
xdist's ``workeroutput``. Any violation fails the run (exit status 1) and is listed in the
terminal summary with the place in memkeeper that sent it. A run that touched no
PostgreSQL records nothing and costs nothing at the end.

``MEMKEEPER_TEST_STATEMENTS=FILE`` also writes every recorded statement (JSON: text -> where
it was first sent; ``FILE.<worker>`` under xdist), e.g. to review the allow-list.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from helpers.statements import SESSION

KEY = "memkeeper_unfiltered_statements"
DUMP = "MEMKEEPER_TEST_STATEMENTS"


def pytest_configure(config: pytest.Config) -> None:
    """Record from here on (every statement of the run)."""
    SESSION.start()


def _judged() -> list[str]:
    if not SESSION.seen:
        return []
    from helpers.user_filter import violations

    return [str(problem) for problem in violations(dict(SESSION.seen))]


def _dump(config: pytest.Config) -> None:
    path = os.environ.get(DUMP)
    if not path:
        return
    worker = getattr(config, "workerinput", {}).get("workerid")
    with open(f"{path}.{worker}" if worker else path, "w", encoding="utf-8") as out:
        json.dump(SESSION.seen, out, indent=1, sort_keys=True)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Judge this process's statements; a worker sends them on, the controller fails."""
    config = session.config
    _dump(config)
    found = _judged()
    if hasattr(config, "workeroutput"):
        config.workeroutput[KEY] = found
        return
    config.stash[_FOUND] = config.stash.get(_FOUND, []) + found
    if config.stash[_FOUND] and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_FOUND = pytest.StashKey[list[str]]()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """A worker finished: keep what it found (the controller fails the run for it)."""
    found = getattr(node, "workeroutput", {}).get(KEY) or []
    config = node.config
    config.stash[_FOUND] = config.stash.get(_FOUND, []) + list(found)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    reporter = terminalreporter
    found = config.stash.get(_FOUND, [])
    if not found:
        return
    reporter.write_sep("=", f"{len(found)} statement(s) without a user filter", red=True)
    reporter.write_line(
        "memkeeper sent these to PostgreSQL on distributed tables without a user_id filter; "
        "add one, or (a job's scan over every user) document it in docs/guides/scaling.md and "
        "tests/helpers/user_filter_allowed.py"
    )
    for problem in sorted(set(found)):
        reporter.write_line(f"  {problem}")
