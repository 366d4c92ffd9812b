"""The tree shows the architecture, and the rules that keep it so are checked (issue 9).

- the layers contract (import-linter, ``.ci/lint-layers``) holds;
- no module passes 400 lines;
- importing memkeeper, or running a common CLI command, loads neither the scheduler nor the
  LLM SDK;
- nothing outside a class calls its underscore methods;
- every name the docs (the README and the site's pages) import from memkeeper exists there;
- the job registry, the job order and the config's job sections agree.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.docs import all_docs_text

import memkeeper
from memkeeper.config import JOB_ORDER, JobsSection

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(REPO / "memkeeper").rglob("*.py"), *(REPO / "jobs").rglob("*.py")])
MAX_LINES = 400
HEAVY = ("apscheduler", "zhipuai", "httpx")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_passes_400_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(REPO)} has {lines} lines"


def test_the_layers_contract_holds() -> None:
    if shutil.which("lint-imports") is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    done = subprocess.run(
        ["bash", str(REPO / ".ci" / "lint-layers")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


IMPORT_PROBE = """
import json, sys, tempfile
from pathlib import Path
import memkeeper
loaded = {"import memkeeper": [m for m in HEAVY if m in sys.modules]}
from memkeeper.cli import main
db = str(Path(tempfile.mkdtemp()) / "m.db")
for argv in COMMANDS:
    main(["--db", db, *argv])
    loaded[" ".join(argv)] = [m for m in HEAVY if m in sys.modules]
print("LOADED " + json.dumps(loaded))
"""

COMMON_COMMANDS = [
    ["remember", "u", "city", "Paris"],
    ["recall", "u", "city"],
    ["note", "u", "a note"],
    ["list"],
    ["log"],
    ["history", "u", "s1"],
    ["forget", "u", "city"],
    ["export"],
]


def test_memkeeper_and_common_commands_load_no_scheduler_and_no_llm_sdk(tmp_path: Path) -> None:
    code = f"HEAVY = {HEAVY!r}\nCOMMANDS = {COMMON_COMMANDS!r}\n" + IMPORT_PROBE
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("LOADED "))
    loaded = json.loads(line.removeprefix("LOADED "))
    assert loaded == {key: [] for key in loaded}
    assert len(loaded) == len(COMMON_COMMANDS) + 1


def _underscore_calls(path: Path) -> list[str]:
    """``something._name`` where something is not self/cls: another object's private part."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__"):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        found.append(f"{path.relative_to(REPO)}:{node.lineno}: .{name}")
    return found


def test_nothing_calls_another_objects_underscore_names() -> None:
    offenders = [hit for path in SOURCES for hit in _underscore_calls(path)]
    # sys._getframe-style stdlib access and namedtuple's _asdict/_replace would be fine, but
    # there are none: every private name is used only by its own class or module.
    assert offenders == []


def test_every_name_the_docs_import_from_memkeeper_exists() -> None:
    docs = all_docs_text()
    imported = set()
    for match in re.finditer(r"from memkeeper import ([\w, ]+)", docs):
        imported |= {name.strip() for name in match.group(1).split(",")}
    # Class names only: `isError` (an MCP result's flag) is not one.
    errors_named = set(re.findall(r"`([A-Z]\w*(?:Error|Input|Found|Busy|Full|Unwritable))`", docs))
    names = imported | errors_named | {"MemkeeperError", "run_once"}
    missing = sorted(name for name in names if not hasattr(memkeeper, name))
    assert missing == []
    assert {"MemoryStore", "InvalidInput", "NotFound", "run_once"} <= names


def test_the_registry_the_order_and_the_config_agree() -> None:
    from memkeeper.jobs import ORDER, REGISTRY

    assert ORDER == JOB_ORDER
    assert set(REGISTRY) == set(JOB_ORDER) == set(JobsSection.model_fields)
