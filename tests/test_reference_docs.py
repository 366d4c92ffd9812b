"""The reference pages of the documentation site cannot drift from the code.

* The command-line page generates every command from click (mkdocs-click), and every
  command and option has help text to generate it from.
* The configuration page's key tables are rendered from the schema at build time
  (docs/hooks/reference.py): every key is there with its real default; the page names every
  environment variable memkeeper reads.
* The MCP page's prompts and protocol versions come from the server's own definitions.
* The Python API page documents every name ``memkeeper`` exports.
* ``memkeeper --version`` is the installed package's version, and the changelog has it.
* The whole site builds with ``mkdocs build --strict`` (warnings are errors).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import click
import pytest
from helpers.docs import DOCS, REPO

import memkeeper
from memkeeper import errors
from memkeeper.cli import cli, main

REFERENCE = DOCS / "reference"
DOCS_TOOLS = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "mkdocs_click")


def docs_tools_missing() -> list[str]:
    missing = []
    for name in DOCS_TOOLS:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(name)
    return missing


def hook() -> ModuleType:
    """docs/hooks/reference.py, the build's renderer of the generated parts."""
    spec = importlib.util.spec_from_file_location(
        "docs_reference_hook", DOCS / "hooks" / "reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def command_paths() -> list[tuple[str, ...]]:
    """Every command and subcommand the CLI registers, as word tuples."""
    found: list[tuple[str, ...]] = []

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if path:
            found.append(path)
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))

    walk(cli, ())
    return found


# -- the command line ------------------------------------------------------------------------


def click_directive(page: str) -> dict[str, str]:
    """The options of the page's ``::: mkdocs-click`` block."""
    block = re.search(r"^::: mkdocs-click\n((?:    :\w+: .*\n?)+)", page, flags=re.MULTILINE)
    assert block, "docs/reference/cli.md has no '::: mkdocs-click' block"
    return dict(re.findall(r"^    :(\w+): (.*)$", block.group(1), flags=re.MULTILINE))


def test_the_cli_page_generates_the_whole_command_tree() -> None:
    options = click_directive((REFERENCE / "cli.md").read_text(encoding="utf-8"))
    assert options["module"] == "memkeeper.cli"
    assert options["command"] == "cli"
    assert options["prog_name"] == "memkeeper"
    assert options["list_subcommands"] == "true"
    assert "depth" in options


def test_the_generated_cli_reference_has_every_command() -> None:
    if "mkdocs_click" in docs_tools_missing():
        pytest.skip("mkdocs-click is not installed (pip install -e '.[docs]')")
    import markdown

    page = (REFERENCE / "cli.md").read_text(encoding="utf-8")
    # attr_list, as in mkdocs.yml: headings then name the full command path.
    html = markdown.markdown(page, extensions=["attr_list", "mkdocs-click", "tables"])
    headings = set(re.findall(r"<h\d[^>]*>(memkeeper[\w -]*)</h\d>", html))
    paths = command_paths()
    assert ("remember",) in paths
    assert ("config", "init") in paths
    missing = [" ".join(path) for path in paths if f"memkeeper {' '.join(path)}" not in headings]
    assert missing == [], f"commands missing from the generated CLI reference: {missing}"
    assert "memkeeper" in headings


def test_every_command_and_option_has_help_text() -> None:
    undocumented = []
    for path in [(), *command_paths()]:
        command: click.Command = cli
        for name in path:
            assert isinstance(command, click.Group)
            command = command.commands[name]
        label = " ".join(("memkeeper", *path))
        if not (command.help or command.short_help or "").strip():
            undocumented.append(label)
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden and not param.help:
                undocumented.append(f"{label} {param.opts[0]}")
    assert undocumented == []


def test_version_is_the_installed_packages(capsys: pytest.CaptureFixture[str]) -> None:
    installed = importlib.metadata.version("memkeeper")
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert installed == pyproject["project"]["version"] == memkeeper.__version__
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"memkeeper, version {installed}\n"


def test_the_changelog_has_the_current_version_and_an_unreleased_section() -> None:
    changelog = (DOCS / "changelog.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## \[([^\]]+)\]", changelog, flags=re.MULTILINE)
    assert sections[0] == "Unreleased"
    assert memkeeper.__version__ in sections


# -- the configuration -----------------------------------------------------------------------


def flat_defaults(value: dict[str, Any], prefix: str = "") -> dict[tuple[str, str], Any]:
    """``{(table, key): default}`` of every key of the configuration."""
    found: dict[tuple[str, str], Any] = {}
    for name, item in value.items():
        if isinstance(item, dict):
            found |= flat_defaults(item, f"{prefix}.{name}" if prefix else name)
        else:
            found[(prefix, name)] = item
    return found


def rendered_rows(markdown: str) -> dict[tuple[str, str], str]:
    """``{(table, key): default as written}`` of the generated configuration tables."""
    rows: dict[tuple[str, str], str] = {}
    table = ""
    for line in markdown.splitlines():
        heading = re.match(r"^### `\[([\w.]+)\]`$", line)
        if heading:
            table = heading.group(1)
            continue
        row = re.match(r"^\| `(\w+)` \| [^|]+ \| `([^`]*)` \|", line)
        if row:
            rows[(table, row.group(1))] = row.group(2)
    return rows


def test_the_config_reference_lists_every_key_with_its_default() -> None:
    from memkeeper.config import Config

    defaults = flat_defaults(Config().model_dump())
    rows = rendered_rows(hook().config_keys_markdown())
    assert len(defaults) > 50
    assert set(rows) == set(defaults)
    for (table, key), written in rows.items():
        parsed = tomllib.loads(f"value = {written}")["value"]
        assert parsed == defaults[(table, key)], f"[{table}] {key}"


def test_every_number_key_shows_its_range() -> None:
    markdown = hook().config_keys_markdown()
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in line.split(" | ")]
        if len(cells) >= 4 and cells[1] in ("integer", "number"):
            assert re.match(r"(more than )?-?[\d,.]+ to (less than )?[\d,.]+$", cells[3]), line


def test_the_config_page_asks_for_the_generated_keys() -> None:
    page = (REFERENCE / "config.md").read_text(encoding="utf-8")
    rendered = hook().render(page, "reference/config.md")
    assert "<!-- generated" not in rendered
    assert "### `[jobs.expire.ttl_days]`" in rendered


def environment_variables() -> set[str]:
    """Every MEMKEEPER_* variable memkeeper's code names (the bench's own, which it sets for
    its child processes, aside), and the LLM endpoint's."""
    from memkeeper.llm.endpoint import BASE_URL_ENVS, DEFAULT_KEY_ENV, ZAI_KEY_ENV

    names = {DEFAULT_KEY_ENV, ZAI_KEY_ENV, *BASE_URL_ENVS}
    for path in (REPO / "memkeeper").rglob("*.py"):
        if "bench" in path.relative_to(REPO).parts:
            continue
        names |= set(re.findall(r"\"(MEMKEEPER_[A-Z_]+)\"", path.read_text(encoding="utf-8")))
    return names


def test_the_config_page_names_every_environment_variable() -> None:
    page = (REFERENCE / "config.md").read_text(encoding="utf-8")
    table = page.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    names = environment_variables()
    assert {"MEMKEEPER_DB", "MEMKEEPER_CONFIG", "MEMKEEPER_NOW", "ZHIPUAI_API_KEY"} <= names
    missing = sorted(name for name in names if f"`{name}`" not in table)
    assert missing == [], f"environment variables missing from docs/reference/config.md: {missing}"


# -- MCP, the hook's rules -------------------------------------------------------------------


def test_the_mcp_page_shows_every_prompt_and_protocol_version() -> None:
    from memkeeper.mcp.fast_call import MODERN_VERSIONS
    from memkeeper.mcp.gate import HANDSHAKE_VERSIONS
    from memkeeper.mcp.prompts import PROMPTS

    page = (REFERENCE / "mcp.md").read_text(encoding="utf-8")
    rendered = hook().render(page, "reference/mcp.md")
    assert "<!-- generated" not in rendered
    for prompt in PROMPTS:
        assert f"### `{prompt.name}`" in rendered
        for argument, _text in prompt.arguments:
            assert f"| `{argument}` |" in rendered
    for version in (*MODERN_VERSIONS, *HANDSHAKE_VERSIONS):
        assert f"| `{version}` |" in rendered


def test_the_hook_refuses_an_unknown_or_a_lost_marker() -> None:
    reference = hook()
    with pytest.raises(ValueError, match="unknown generated part"):
        reference.render("<!-- generated: frobnicate -->\n", "guides/any.md")
    with pytest.raises(ValueError, match="config-keys"):
        reference.render("# Configuration\n", "reference/config.md")
    assert reference.render("no markers\n", "guides/any.md") == "no markers\n"


def test_sphinx_roles_are_shown_as_plain_code() -> None:
    html = "<p>Returns a :class:<code>~memkeeper.records.Memory</code>, see::</p>"
    assert hook().plain_roles(html) == "<p>Returns a <code>Memory</code>, see:</p>"


# -- the Python API --------------------------------------------------------------------------


def test_the_python_api_page_documents_every_export() -> None:
    page = (REFERENCE / "python-api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: memkeeper(?:\.[\w.]+)?\.(\w+)$", page, flags=re.MULTILINE))
    assert "errors" in documented  # every exception, from memkeeper.errors
    error_classes = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.MemkeeperError)
    }
    missing = sorted(
        name
        for name in memkeeper.__all__
        if name not in documented and name not in error_classes and name != "__version__"
    )
    assert missing == [], f"exports missing from docs/reference/python-api.md: {missing}"


# -- words for users ---------------------------------------------------------------------------

INTERNAL = re.compile(r"\bREADME(?:'s)?(?:, | ?\(| ?\")|\bissue \d+|\bseed \d{3}|§")
"""What users cannot look up: README sections (``README, Performance``, ``README's
"Configuration"``: the README is now a front door), issue numbers, the seed articles."""


def help_texts() -> dict[str, str]:
    """Every command's and option's help, as the CLI reference shows it."""
    texts: dict[str, str] = {}
    for path in [(), *command_paths()]:
        command: click.Command = cli
        for name in path:
            assert isinstance(command, click.Group)
            command = command.commands[name]
        label = " ".join(("memkeeper", *path))
        texts[label] = command.help or ""
        for param in command.params:
            if isinstance(param, click.Option):
                texts[f"{label} {param.opts[0]}"] = param.help or ""
    return texts


def test_the_reference_speaks_to_users() -> None:
    reference = hook()
    texts = {page.name: page.read_text(encoding="utf-8") for page in REFERENCE.glob("*.md")}
    texts["changelog.md"] = (DOCS / "changelog.md").read_text(encoding="utf-8")
    texts |= {f"generated {name}": render() for name, render in reference.RENDERERS.items()}
    texts |= help_texts()
    found = {name: INTERNAL.findall(text) for name, text in texts.items() if INTERNAL.search(text)}
    assert found == {}


# -- the site --------------------------------------------------------------------------------


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    missing = docs_tools_missing()
    if missing:
        pytest.skip(f"the docs tools are not installed ({missing}): pip install -e '.[docs]'")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    warnings = [line for line in done.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert done.returncode == 0, "\n".join(warnings) or done.stderr[-3000:]
    cli_page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "memkeeper forget-user" in cli_page
    config_page = (site / "reference" / "config" / "index.html").read_text(encoding="utf-8")
    assert "busy_timeout_ms" in config_page
    api_page = (site / "reference" / "python-api" / "index.html").read_text(encoding="utf-8")
    assert "memkeeper.MemoryStore.remember" in api_page
    # The docstrings rendered into the API page speak to users too.
    assert INTERNAL.findall(api_page) == []
