"""The docs must not lie: the test command they give is the one CI runs, the linters they
promise are the ones CI runs, and the exit-code reference (docs/reference/exit-codes.md) lists
every code memkeeper can exit with, and no other."""

from __future__ import annotations

import re
import shlex

from helpers.docs import REPO, all_docs_text

from memkeeper import errors
from memkeeper.cli import EXIT_INTERRUPTED

CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")
EXIT_CODES_PAGE = REPO / "docs" / "reference" / "exit-codes.md"


def fenced_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def steps(command: str) -> list[list[str]]:
    """A shell command line as its ``&&``-separated steps, each split into words."""
    return [shlex.split(step) for step in command.split("&&")]


def without_quiet(words: list[str]) -> list[str]:
    return [word for word in words if word not in ("-q", "--quiet")]


def docs_test_commands() -> list[str]:
    """Every one-line shell command of the docs that sets up a venv and runs the tests."""
    return [
        line.strip()
        for block in fenced_blocks(all_docs_text(), "sh")
        for line in block.splitlines()
        if line.startswith("python3 -m venv") and "pytest" in line
    ]


def ci_test_command() -> str:
    commands = [
        line.strip()
        for line in CI.splitlines()
        if "pip install" in line and "pytest" in line and not line.lstrip().startswith("#")
    ]
    assert len(commands) == 1, ".ci/run should run the docs' test command exactly once"
    return commands[0]


def test_the_docs_test_command_is_what_ci_runs() -> None:
    commands = docs_test_commands()
    assert commands, "the docs no longer say how to run the tests"
    ci = steps(ci_test_command())
    # CI creates and activates a fresh venv, with its own paths.
    assert re.search(r'^python3 -m venv "\$work/test-venv"$', CI, flags=re.MULTILINE)
    assert re.search(r'^\. "\$work/test-venv/bin/activate"$', CI, flags=re.MULTILINE)
    for command in commands:
        docs = steps(command)
        # The docs create and activate a fresh venv; CI does the same with its own paths.
        assert docs[0][:3] == ["python3", "-m", "venv"], command
        assert docs[1][0] == ".", command
        assert docs[1][1].endswith("/bin/activate"), command
        # From the install on, the steps are identical (CI only adds pip's -q).
        install = next(i for i, step in enumerate(docs) if step[:2] == ["pip", "install"])
        assert [without_quiet(step) for step in ci] == docs[install:], command
        assert docs[install:] == [["pip", "install", "-e", ".[test]"], ["pytest"]], command


def test_ci_runs_the_linters_the_docs_promise() -> None:
    assert "ruff check ." in CI
    assert "ruff format --check ." in CI
    assert "`ruff check .` and `ruff format --check .` must pass" in all_docs_text()


def exit_code_table() -> dict[int, str]:
    page = EXIT_CODES_PAGE.read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| (.+?) \|$", page, flags=re.MULTILINE)
    return {int(code): meaning for code, meaning in rows}


def test_every_exit_code_is_in_the_reference_table() -> None:
    constants = {
        name: value
        for name, value in vars(errors).items()
        if name.startswith("EXIT_") and isinstance(value, int)
    }
    constants["EXIT_INTERRUPTED"] = EXIT_INTERRUPTED
    assert len(constants) >= 10
    table = exit_code_table()
    missing = {name: value for name, value in constants.items() if value not in table}
    assert missing == {}, f"exit codes missing from {EXIT_CODES_PAGE.name}: {missing}"
    # ...and the table documents no code that memkeeper never uses.
    assert set(table) == set(constants.values())


def test_every_error_class_exits_with_a_documented_code() -> None:
    table = exit_code_table()

    def subclasses(cls: type) -> list[type]:
        return [cls, *(sub for direct in cls.__subclasses__() for sub in subclasses(direct))]

    for cls in subclasses(errors.MemkeeperError):
        assert cls.exit_code in table, cls.__name__
