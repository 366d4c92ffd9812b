"""The README must not lie: its test command is the one CI runs, it names every command, and
its exit-code table lists every code memkeeper can exit with."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click

from memkeeper import errors
from memkeeper.cli import EXIT_INTERRUPTED, cli

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")


def fenced_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def steps(command: str) -> list[list[str]]:
    """A shell command line as its ``&&``-separated steps, each split into words."""
    return [shlex.split(step) for step in command.split("&&")]


def without_quiet(words: list[str]) -> list[str]:
    return [word for word in words if word not in ("-q", "--quiet")]


def readme_test_command() -> str:
    blocks = fenced_blocks(README, "sh")
    assert len(blocks) >= 2, "the README lost its two commands"
    lines = [line for line in blocks[1].strip().splitlines() if line.strip()]
    assert len(lines) == 1, "the README's test command should be one line"
    return lines[0]


def ci_test_command() -> str:
    commands = [
        line.strip()
        for line in CI.splitlines()
        if "pip install" in line and "pytest" in line and not line.lstrip().startswith("#")
    ]
    assert len(commands) == 1, ".ci/run should run the README's test command exactly once"
    return commands[0]


def test_the_readme_test_command_is_what_ci_runs() -> None:
    readme = steps(readme_test_command())
    ci = steps(ci_test_command())
    # The README creates and activates a fresh venv; CI does the same with its own paths.
    assert readme[0][:3] == ["python3", "-m", "venv"]
    assert readme[1][0] == "."
    assert readme[1][1].endswith("/bin/activate")
    assert re.search(r'^python3 -m venv "\$work/test-venv"$', CI, flags=re.MULTILINE)
    assert re.search(r'^\. "\$work/test-venv/bin/activate"$', CI, flags=re.MULTILINE)
    # From the install on, the steps are identical (CI only adds pip's -q).
    install = next(i for i, step in enumerate(readme) if step[:2] == ["pip", "install"])
    assert [without_quiet(step) for step in ci] == readme[install:]
    assert readme[install:] == [["pip", "install", "-e", ".[test]"], ["pytest"]]


def test_ci_runs_the_linters_the_readme_promises() -> None:
    assert "ruff check ." in CI
    assert "ruff format --check ." in CI
    assert "`ruff check .` and `ruff format --check .` must pass" in README


def command_paths() -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if path:
            found.append(path)
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))

    walk(cli, ())
    return found


def readme_mentions(path: tuple[str, ...]) -> bool:
    """`name`, `memkeeper name`, or for a subcommand `group sub` / `group a|sub|b`."""
    if len(path) == 1:
        name = re.escape(path[0])
        return bool(re.search(rf"`{name}[` ]|memkeeper {name}\b", README))
    group, sub = (re.escape(part) for part in path[-2:])
    return bool(
        re.search(rf"{group} (?:[\w-]+\|)*{sub}(?:\|[\w-]+)*\b", README)
        or re.search(rf"memkeeper {group} {sub}\b", README)
    )


def test_every_command_appears_in_the_readme() -> None:
    paths = command_paths()
    assert ("remember",) in paths
    assert ("config", "init") in paths
    missing = [" ".join(path) for path in paths if not readme_mentions(path)]
    assert missing == [], f"commands missing from README.md: {missing}"


def test_the_mention_check_can_fail() -> None:
    assert not readme_mentions(("frobnicate",))
    assert not readme_mentions(("config", "frobnicate"))


def exit_code_table() -> dict[int, str]:
    section = README.split("### Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+?) \|$", section, flags=re.MULTILINE)
    return {int(code): meaning for code, meaning in rows}


def test_every_exit_code_is_in_the_readme_table() -> None:
    constants = {
        name: value
        for name, value in vars(errors).items()
        if name.startswith("EXIT_") and isinstance(value, int)
    }
    constants["EXIT_INTERRUPTED"] = EXIT_INTERRUPTED
    assert len(constants) >= 10
    table = exit_code_table()
    missing = {name: value for name, value in constants.items() if value not in table}
    assert missing == {}, f"exit codes missing from the README table: {missing}"
    # ...and the table documents no code that memkeeper never uses.
    assert set(table) == set(constants.values())


def test_every_error_class_exits_with_a_documented_code() -> None:
    table = exit_code_table()

    def subclasses(cls: type) -> list[type]:
        return [cls, *(sub for direct in cls.__subclasses__() for sub in subclasses(direct))]

    for cls in subclasses(errors.MemkeeperError):
        assert cls.exit_code in table, cls.__name__
