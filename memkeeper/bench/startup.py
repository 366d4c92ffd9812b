"""Start-up time of the memory commands: ``memkeeper bench --startup``.

Each of ``recall``, ``remember`` and ``search`` (no API key: keyword-only) runs ``runs``
times as a fresh ``python -m memkeeper`` process on a small temporary database, and the wall
time of each run is taken from outside (process start to exit). The median is the figure:
the target is 150 ms (README, Performance) on an idle machine; Python alone, measured the
same way, is reported beside it so a loaded machine's figures can be read.

Also reported: the modules each command imports that it should not (:data:`KEPT_OFF`: click
and platformdirs, the config schema and pydantic, sqlite-utils, numpy, structlog, the job
runner, the scheduler, the LLM SDK), by ``-X importtime`` of one more run, and how memkeeper
is installed (an editable install adds its import finder, ~10 ms, to every start).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TARGET_MS = 150.0
COMMANDS: dict[str, list[str]] = {
    "recall": ["recall", "bench-user", "city"],
    "remember": ["remember", "bench-user", "tone", "brief"],
    "search": ["search", "bench-user", "Paris"],
}
KEPT_OFF = (
    "click",
    "platformdirs",
    "pydantic",
    "memkeeper.config.schema",
    "sqlite_utils",
    "numpy",
    "structlog",
    "memkeeper.maintenance.runner",
    "apscheduler",
    "zhipuai",
    "httpx",
)
"""Modules a memory command must not import with no config file and no API key (README,
Performance: start-up): the plain commands start without click (the quick start) and, on
plain Linux, without platformdirs; the schema is built only to validate a file, sqlite-utils
loads only to migrate a file, numpy only to compare vectors."""


def install_kind() -> str:
    """How the memkeeper being measured is installed: ``regular`` (a wheel, ``pip install
    .``: the package is in site-packages), ``editable`` (``pip install -e``) or ``source
    tree`` (run from a checkout)."""
    import json
    from importlib import metadata

    import memkeeper

    if "site-packages" in Path(memkeeper.__file__).resolve().parts:
        return "regular"
    try:
        direct = metadata.distribution("memkeeper").read_text("direct_url.json") or "{}"
    except metadata.PackageNotFoundError:
        return "source tree"
    return "editable" if json.loads(direct).get("dir_info", {}).get("editable") else "source tree"


def _environment(db: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMKEEPER_")}
    env.pop("ZHIPUAI_API_KEY", None)
    # memkeeper.entry sets it in this (the bench's) process: each run must set it itself.
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    env.update(
        MEMKEEPER_DB=str(db),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
    )
    return env


def _run_ms(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One fresh process: its wall time and its CPU time (user + system), in ms."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(  # noqa: S603 - this interpreter and our own arguments
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
    )
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def _imported(argv: list[str], env: dict[str, str]) -> set[str]:
    done = subprocess.run(  # noqa: S603 - this interpreter and our own arguments
        [sys.executable, "-X", "importtime", *argv[1:]],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def measure_startup(runs: int = 20, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The median wall time (ms) of each memory command over ``runs`` fresh processes, and
    its median CPU time (user + system: less sensitive to other work on the machine)."""
    from memkeeper.config import Config
    from memkeeper.store import MemoryStore

    with tempfile.TemporaryDirectory(prefix="memkeeper-startup-") as tmp:
        root = Path(tmp)
        db = root / "memory.db"
        with MemoryStore(db, config=Config()) as store:
            store.remember("bench-user", "city", "Paris")
        env = _environment(db, root)
        python = [_run_ms([sys.executable, "-c", "pass"], env) for _ in range(runs)]
        figures: dict[str, Any] = {
            "runs": runs,
            "install": install_kind(),
            "target_ms": TARGET_MS,
            "python_ms": statistics.median(wall for wall, _ in python),
            "python_cpu_ms": statistics.median(cpu for _, cpu in python),
            "commands": {},
        }
        for name, args in COMMANDS.items():
            argv = [sys.executable, "-m", "memkeeper", *args]
            if say:
                say(f"{name}: {runs} runs")
            measured = [_run_ms(argv, env) for _ in range(runs)]
            times = [wall for wall, _ in measured]
            leaked = sorted(
                m for m in _imported(argv, env) if m in KEPT_OFF or m.split(".")[0] in KEPT_OFF
            )
            figures["commands"][name] = {
                "median_ms": statistics.median(times),
                "min_ms": min(times),
                "max_ms": max(times),
                # CPU time varies far less than wall time on a loaded machine.
                "cpu_median_ms": statistics.median(cpu for _, cpu in measured),
                "within_target": statistics.median(times) <= TARGET_MS,
                "kept_off_imported": leaked,
            }
        return figures


def startup_table(figures: dict[str, Any]) -> str:
    lines = [
        f"start-up, median of {figures['runs']} fresh processes "
        f"(target {figures['target_ms']:.0f} ms; python alone {figures['python_ms']:.0f} ms, "
        f"CPU {figures['python_cpu_ms']:.0f} ms; {figures['install']} install)",
    ]
    for name, row in figures["commands"].items():
        leaked = ", ".join(row["kept_off_imported"]) or "none"
        lines.append(
            f"  {name:<9} median {row['median_ms']:6.0f} ms  (min {row['min_ms']:.0f}, "
            f"max {row['max_ms']:.0f}; CPU {row['cpu_median_ms']:.0f} ms)  "
            f"{'ok' if row['within_target'] else 'OVER'}; imports it should not: {leaked}"
        )
    return "\n".join(lines)
