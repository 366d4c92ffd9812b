"""The docs run as written: every Python and shell example of the README and of every page
of the documentation site (``docs/**/*.md``) is executed.

The tour cannot drift from the code: a renamed method, a changed option or a missing file
makes this test fail with the page and line of the block at fault.

How blocks are found and run:

* Fenced blocks are read from README.md and every ``docs/**/*.md``. ```python (``py``)
  blocks and ```sh / ```bash / ```shell / ```console blocks run; every other block (JSON,
  text, a formula) does not, except that ```toml blocks are validated against the config
  schema (:func:`memkeeper.config.parse_config`).
* A block preceded, on the line right above its fence, by
  ``<!-- readme-test: skip (REASON) -->`` is not run (a long-running server, an API key, the
  network, the whole test suite). The reason is required: a skip comment without one, in any
  other form, or not followed by a block fails the test.
* The runnable blocks of one section (the text under one heading of one page) run in order, as a
  continuing tour: they share one scratch HOME (``XDG_DATA_HOME`` and ``XDG_CONFIG_HOME``
  under it, no ``MEMKEEPER_*`` variable and no API key set, so ``MemoryStore()`` and
  ``memkeeper`` use a new per-user database there) and one working directory; the Python
  blocks of the section also share their variables. Each section starts from nothing.
* Python blocks are executed in this process, compiled so that a traceback names the
  page's lines; the stores they opened are closed afterwards.
* Shell blocks run under ``bash`` with ``set -eo pipefail``: ``memkeeper`` is the virtual
  environment's entry point, the working directory holds a link to the repository's
  ``examples/`` (so ``examples/agent_memory.json`` resolves as in a checkout), and the first
  failing command is reported with its page and line. In a ```console block, lines starting
  with ``$ `` are the commands and the rest is output (not compared). Creating and
  activating a virtual environment and ``pip install`` are not run (this suite already runs
  in an installed environment); every ``pip install`` line, skipped block or not, must
  install this project (``.`` or ``memkeeper``) with extras that pyproject.toml defines.
* A tutorial is one tour: on a page with the line ``<!-- readme-test: one-tour -->``, all the
  runnable blocks of the page run in order as one section (its first heading's).
* Every section runs twice: on SQLite, and on PostgreSQL (the suite's test server; the
  default database, ``MemoryStore()`` and ``memkeeper`` without ``--db``, is then the test
  PostgreSQL database, emptied first, through ``MEMKEEPER_DB``). A block about SQLite's own
  files, preceded by ``<!-- readme-test: sqlite-only (REASON) -->``, runs on SQLite only.
* Every ``memkeeper ...`` command line in a shell block, skipped or not, must parse: the
  command exists and takes the options given (click parses it; nothing is run).
* Every error class the docs name is importable from ``memkeeper``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
from helpers.docs import doc_pages

import memkeeper
from memkeeper.config import parse_config
from memkeeper.errors import MemkeeperError

REPO = Path(__file__).resolve().parent.parent
PAGES = doc_pages()
ONE_TOUR = "<!-- readme-test: one-tour -->"
SKIP = re.compile(r"^<!-- readme-test: (?P<kind>skip|sqlite-only) \((?P<reason>.*)\) -->$")
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
PYTHON = {"python", "py", "python3"}
SHELL = {"sh", "bash", "shell", "console"}
ERROR_SUFFIXES = (
    "Error",
    "Busy",
    "Missing",
    "Invalid",
    "Input",
    "NotFound",
    "Full",
    "Unwritable",
    "Conflict",
    "Failed",
    "Rejected",
    "Unavailable",
    "NotConfigured",
)


class ReadmeFormatError(ValueError):
    """A page breaks the block conventions (a skip without a reason, an open fence)."""


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, the line of its opening fence, its text, its section,
    and the page it is on (relative to the repository)."""

    lang: str
    line: int
    code: str
    section: str
    skip: str | None
    sqlite_only: str | None = None
    """Why the block is about SQLite's files (``<!-- readme-test: sqlite-only (...) -->``): it
    runs in the SQLite tour only, not in the one on PostgreSQL."""
    page: str = "README.md"
    """The page the block is on, relative to the repository (README.md, docs/...)."""

    @property
    def runnable(self) -> bool:
        return self.skip is None and (self.lang in PYTHON or self.lang in SHELL)

    def runs_on(self, backend: str) -> bool:
        return self.runnable and (backend == "sqlite" or self.sqlite_only is None)


def parse_blocks(text: str, name: str = "README.md") -> list[Block]:
    """Every fenced block of a Markdown text; ReadmeFormatError for a bad skip comment."""
    lines = text.splitlines()
    blocks: list[Block] = []
    section = "(top)"
    skip: str | None = None
    sqlite_only: str | None = None
    index = 0
    one_tour = ONE_TOUR in lines
    while index < len(lines):
        line = lines[index]
        if line.strip() == ONE_TOUR:
            index += 1
            continue
        if line.lstrip().startswith("<!--") and "readme-test" in line:
            match = SKIP.match(line.strip())
            if match is None or not match["reason"].strip():
                raise ReadmeFormatError(
                    f"{name}:{index + 1}: a skip comment must read "
                    f"'<!-- readme-test: skip (REASON) -->' (or sqlite-only (REASON)) with a "
                    f"reason; found {line.strip()!r}"
                )
            following = lines[index + 1] if index + 1 < len(lines) else ""
            if not FENCE.match(following):
                raise ReadmeFormatError(
                    f"{name}:{index + 1}: a skip comment must sit on the line right above a "
                    "code block's opening fence"
                )
            if match["kind"] == "skip":
                skip = match["reason"].strip()
            else:
                sqlite_only = match["reason"].strip()
            index += 1
            continue
        fence = FENCE.match(line)
        if fence is None:
            if line.startswith("#") and not (one_tour and section != "(top)"):
                section = line.lstrip("#").strip()
            index += 1
            continue
        marker, indent = fence["fence"], len(fence["indent"])
        end = index + 1
        while end < len(lines) and not (
            lines[end].strip().startswith(marker) and not lines[end].strip().strip(marker[0])
        ):
            end += 1
        if end == len(lines):
            raise ReadmeFormatError(f"{name}:{index + 1}: this code block is never closed")
        # A block indented in a list item: its lines lose the fence's indentation.
        code = "\n".join(line[indent:] for line in lines[index + 1 : end]) + "\n"
        blocks.append(
            Block(fence["lang"].lower(), index + 1, code, section, skip, sqlite_only, name)
        )
        skip = sqlite_only = None
        index = end + 1
    return blocks


BLOCKS = [
    block
    for page in PAGES
    for block in parse_blocks(page.read_text(encoding="utf-8"), page.relative_to(REPO).as_posix())
]


def sections() -> list[list[Block]]:
    """The runnable blocks grouped by page and section, in page order."""
    groups: dict[tuple[str, str], list[Block]] = {}
    for block in BLOCKS:
        if block.runnable:
            groups.setdefault((block.page, block.section), []).append(block)
    return list(groups.values())


def page_line(block: Block, line: int) -> str:
    """The text of a line of the block's page (1-based), stripped."""
    return (REPO / block.page).read_text(encoding="utf-8").splitlines()[line - 1].strip()


# -- shell lines: what runs, what is only checked ---------------------------------------------


def shell_lines(block: Block) -> list[str]:
    """The block's lines as shell code, one per page line (console output lines blank)."""
    lines = block.code.splitlines()
    if block.lang != "console":
        return lines
    return [line[2:] if line.startswith("$ ") else "" for line in lines]


def is_setup(step: str) -> bool:
    """A step that creates or activates a virtual environment, or installs with pip."""
    words = step.split()
    return bool(words) and (
        words[:3] in (["python3", "-m", "venv"], ["python", "-m", "venv"])
        or (words[0] in (".", "source") and words[-1].endswith("activate"))
        or is_pip_install(step)
    )


def is_pip_install(step: str) -> bool:
    words = step.split()
    return words[:2] in (["pip", "install"], ["pip3", "install"]) or words[1:4] == [
        "-m",
        "pip",
        "install",
    ]


def runnable_line(line: str) -> str:
    """The line without its environment set-up steps (``:`` when nothing is left)."""
    steps = [step.strip() for step in line.split("&&")]
    kept = [step for step in steps if not is_setup(step)]
    return " && ".join(kept) if kept else ":"


def all_shell_steps() -> list[tuple[Block, int, str]]:
    """(block, page line, step) for every ``&&``/``;``/``|`` step of every shell block."""
    found = []
    for block in BLOCKS:
        if block.lang not in SHELL:
            continue
        for offset, line in enumerate(shell_lines(block), start=1):
            for step in re.split(r"&&|\|\||;|\|", line):
                if step.strip() and not step.strip().startswith("#"):
                    found.append((block, block.line + offset, step.strip()))
    return found


def entry_point(tmp: Path) -> Path:
    """The directory holding the venv's ``memkeeper`` (a ``python -m memkeeper`` shim if none)."""
    bin_dir = Path(sys.executable).parent
    if (bin_dir / "memkeeper").exists():
        return bin_dir
    shim_dir = tmp / "bin"
    shim_dir.mkdir(exist_ok=True)
    shim = shim_dir / "memkeeper"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m memkeeper "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    return shim_dir


HEADER = [
    "set -eo pipefail",
    "trap 'echo \"readme-test: failed at script line $LINENO\" >&2' ERR",
]


def run_shell(block: Block, cwd: Path, env: dict[str, str]) -> None:
    script = "\n".join(HEADER + [runnable_line(line) for line in shell_lines(block)]) + "\n"
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode == 0:
        return
    failed = re.search(r"readme-test: failed at script line (\d+)", result.stderr)
    line = block.line + int(failed.group(1)) - len(HEADER) if failed else block.line
    pytest.fail(
        f"{block.page}:{line}: the shell command exits {result.returncode}: "
        f"{page_line(block, line)}\n"
        f"--- stdout ---\n{result.stdout}--- stderr ---\n{result.stderr}",
        pytrace=False,
    )


def run_python(block: Block, namespace: dict[str, Any]) -> None:
    # Leading newlines put the block at its own lines: tracebacks name the page's lines.
    filename = str(REPO / block.page)
    code = compile("\n" * block.line + block.code, filename, "exec")
    try:
        exec(code, namespace)
    except Exception as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
        line = frames[-1].lineno if frames else block.line
        pytest.fail(
            f"{block.page}:{line}: the python block ({block.page}:{block.line}) fails:\n"
            f"{traceback.format_exc()}",
            pytrace=False,
        )


def close_stores(namespace: dict[str, Any]) -> None:
    for value in namespace.values():
        if isinstance(value, memkeeper.MemoryStore):
            value.close()


@pytest.mark.parametrize(
    "blocks",
    sections(),
    ids=[f"{group[0].page}:L{group[0].line}-{group[0].section}" for group in sections()],
)
@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_the_sections_blocks_run(
    blocks: list[Block],
    backend: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    if not any(block.runs_on(backend) for block in blocks):
        pytest.skip("every block of this section is about SQLite's files (sqlite-only)")
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    for name in list(os.environ):
        if name.startswith(("MEMKEEPER_", "ZHIPUAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.chdir(work)
    if backend == "postgres":
        # The default database is the test PostgreSQL: MemoryStore() and memkeeper use it.
        from helpers.backends import empty_memory

        url = request.getfixturevalue("pg_suite_url")
        empty_memory(url)
        monkeypatch.setenv("MEMKEEPER_DB", url)
    env = dict(os.environ)
    env["PATH"] = f"{entry_point(tmp_path)}{os.pathsep}{env.get('PATH', '')}"
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    try:
        for block in blocks:
            if not block.runs_on(backend):
                continue
            if block.lang in PYTHON:
                run_python(block, namespace)
            else:
                run_shell(block, work, env)
    finally:
        close_stores(namespace)


# -- static checks ----------------------------------------------------------------------------


def test_the_readme_has_runnable_python_and_shell_blocks() -> None:
    langs = {block.lang for block in BLOCKS if block.runnable}
    assert langs & PYTHON, "no Python block of the docs runs"
    assert langs & SHELL, "no shell block of the docs runs"
    readme = {block.lang for block in BLOCKS if block.runnable and block.page == "README.md"}
    assert readme & PYTHON and readme & SHELL, "the README's tour no longer runs"


def test_every_page_of_the_site_is_read() -> None:
    pages = {block.page for block in BLOCKS}
    assert "README.md" in pages
    assert any(page.startswith("docs/getting-started/") for page in pages)


def test_every_skip_names_its_reason() -> None:
    for block in BLOCKS:
        if block.skip is not None:
            assert block.skip.strip(), f"{block.page}:{block.line}: a skip without a reason"


@pytest.mark.parametrize(
    "text",
    [
        "<!-- readme-test: skip -->\n```sh\nfalse\n```\n",
        "<!-- readme-test: skip () -->\n```sh\nfalse\n```\n",
        "<!-- readme-test: skip (  ) -->\n```sh\nfalse\n```\n",
        "<!-- readme-test: skip (a server) -->\n\n```sh\nfalse\n```\n",
        "<!-- readme-test: skip (a server) -->\nSome prose.\n",
        "```python\nprint(1)\n",
    ],
    ids=["no-reason", "empty-reason", "blank-reason", "not-above-fence", "no-block", "unclosed"],
)
def test_a_bad_skip_comment_or_fence_is_refused(text: str) -> None:
    with pytest.raises(ReadmeFormatError, match=r"^DOC\.md:1: "):
        parse_blocks(text, "DOC.md")


def test_a_skip_with_a_reason_skips_exactly_the_next_block() -> None:
    text = (
        "# A\n<!-- readme-test: skip (needs a key) -->\n```sh\nfalse\n```\n"
        "## B\n```python\nx = 1\n```\n```toml\n[llm]\n```\n"
    )
    first, second, third = parse_blocks(text)
    assert (first.lang, first.line, first.skip, first.section) == ("sh", 3, "needs a key", "A")
    assert first.code == "false\n" and not first.runnable
    assert (second.lang, second.skip, second.section, second.runnable) == (
        "python",
        None,
        "B",
        True,
    )
    assert not third.runnable


def test_a_sqlite_only_block_runs_on_sqlite_and_not_on_postgresql() -> None:
    text = "# A\n<!-- readme-test: sqlite-only (the files) -->\n```sh\nls\n```\n```sh\ntrue\n```\n"
    first, second = parse_blocks(text)
    assert first.sqlite_only == "the files" and first.runs_on("sqlite")
    assert not first.runs_on("postgres") and second.runs_on("postgres")


def test_a_one_tour_page_is_one_section() -> None:
    text = f"# Tutorial\n{ONE_TOUR}\n## 1\n```python\nx = 1\n```\n## 2\n```python\nx\n```\n"
    first, second = parse_blocks(text)
    assert first.section == second.section == "Tutorial"


def test_a_block_indented_in_a_list_item_is_found() -> None:
    text = "- a step:\n\n  ```sh\n  memkeeper status\n  ```\n- next\n"
    (block,) = parse_blocks(text)
    assert (block.lang, block.line, block.code) == ("sh", 3, "memkeeper status\n")


def test_set_up_steps_are_not_run() -> None:
    line = "python3 -m venv .venv && . .venv/bin/activate && pip install . && memkeeper run-once"
    assert runnable_line(line) == "memkeeper run-once"
    assert runnable_line("pip install -e '.[test]'") == ":"
    assert runnable_line("memkeeper status   # the files") == "memkeeper status   # the files"


def test_pip_installs_name_this_project_and_its_real_extras() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject["project"]["name"]
    extras = set(pyproject["project"].get("optional-dependencies", {}))
    installs = [
        (f"{block.page}:{line}", step)
        for block, line, step in all_shell_steps()
        if is_pip_install(step)
    ]
    assert installs, "the docs no longer say how to install memkeeper"
    for line, step in installs:
        words = shlex.split(step, comments=True)
        targets = [w for w in words[words.index("install") + 1 :] if not w.startswith("-")]
        assert targets, f"{line}: pip install of nothing: {step}"
        for target in targets:
            match = re.fullmatch(r"(?P<name>[^\[\]]+)(?:\[(?P<extras>[^\]]*)\])?", target)
            assert match and match["name"] in (".", project), (
                f"{line}: installs {target!r}, not this project"
            )
            named = {e.strip() for e in (match["extras"] or "").split(",") if e.strip()}
            assert named <= extras, (
                f"{line}: extra(s) {sorted(named - extras)} not in pyproject.toml "
                f"(it defines {sorted(extras)})"
            )


def parse_command(words: list[str]) -> None:
    """Parse ``memkeeper`` arguments as the CLI would, down to the leaf command; run nothing."""
    from memkeeper.cli import cli

    command: click.Command = cli
    name = "memkeeper"
    args = words
    parent: click.Context | None = None
    while True:
        ctx = command.make_context(name, list(args), parent=parent)
        if not isinstance(command, click.Group):
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            rest = [*ctx.protected_args, *ctx.args]
        if not rest:
            return
        found, sub, args = command.resolve_command(ctx, rest)
        assert sub is not None and found is not None
        command, name, parent = sub, found, ctx


def test_every_memkeeper_command_line_parses() -> None:
    commands = [
        (f"{block.page}:{line}", step)
        for block, line, step in all_shell_steps()
        if step.split()[0] == "memkeeper"
    ]
    assert len(commands) >= 10, "fewer memkeeper commands in the docs than expected"
    for line, step in commands:
        words = [w for w in shlex.split(step, comments=True)[1:]]
        try:
            parse_command(words)
        except click.ClickException as exc:
            pytest.fail(f"{line}: {step}\n  {exc.format_message()}", pytrace=False)


def test_toml_blocks_are_valid_configuration() -> None:
    tomls = [block for block in BLOCKS if block.lang == "toml"]
    for block in tomls:
        data = tomllib.loads(block.code)
        parse_config(data, Path(f"{block.page}:{block.line}"))


def named_error_classes(text: str) -> set[str]:
    """Names in backticks (or ``memkeeper.Name``) that look like, or are, error classes."""
    known = set()
    pending = [MemkeeperError]
    while pending:
        cls = pending.pop()
        known.add(cls.__name__)
        pending.extend(cls.__subclasses__())
    names = set(re.findall(r"`(?:memkeeper\.)?([A-Z]\w*)`", text))
    names |= set(re.findall(r"\bmemkeeper\.([A-Z]\w*)", text))
    return {name for name in names if name in known or name.endswith(ERROR_SUFFIXES)}


def test_every_error_class_the_docs_name_is_importable_from_memkeeper() -> None:
    named = set().union(*(named_error_classes(p.read_text(encoding="utf-8")) for p in PAGES))
    assert {"MemkeeperError", "InvalidInput", "NotFound", "LockBusy"} <= named
    for name in sorted(named):
        cls = getattr(memkeeper, name, None)
        assert isinstance(cls, type) and issubclass(cls, Exception), (
            f"the docs name {name}, but `from memkeeper import {name}` fails"
        )
        assert name in memkeeper.__all__, f"{name} is importable but not in memkeeper.__all__"


def test_every_error_class_of_memkeeper_errors_is_exported() -> None:
    from memkeeper import errors

    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, MemkeeperError)
    }
    assert sorted(defined - set(memkeeper.__all__)) == []
