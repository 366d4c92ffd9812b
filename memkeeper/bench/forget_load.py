"""``memkeeper bench --forget``: one forget of one key on a large database, 4 agents beside it.

The database is the bench's generator's (1,000,000 memories over 10,000 users by default),
and one user then gets a secret value under one key, rewritten twice among 300 other
entries of theirs, so that page splits leave stale copies of it where ``secure_delete``
does not reach (what a database in use holds). The database is kept and reused with
``--keep DIR`` when its parameters match.

For each way of removing the erased bytes, on a fresh copy of that database:

* ``rebuild``: the whole-file ``VACUUM`` under an exclusive lock (the scrub's fallback, and
  what every forget did before zeroing in place existed);
* ``in_place``: the scrub's zeroing of unused space in the pages that hold a copy
  (:mod:`memkeeper.storage.sqlite.scrub`),

4 agent processes (:func:`memkeeper.bench.workers.agent`: recall 80 %, remember 20 %, on
their own users) run for a while alone, then while the runner process calls
``MemoryStore.forget(user, key)``. Reported: the forget's time, the agents' p50 / p99 / max
latency and errors during it and without it, and in which files a byte string of the
erased value is still found afterwards (read whole, after every process closed them).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import random
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memkeeper import __version__
from memkeeper.bench import measure
from memkeeper.bench.generate import NOW, generate
from memkeeper.bench.report import latency_text
from memkeeper.config import Config
from memkeeper.paths import cold_path_for

DEFAULT = (1_000_000, 10_000)
VICTIM = "u000042"
VICTIM_KEY = "bench-secret"
CHURN = 300
IDLE_SECONDS = 2.0
MODES = (("rebuild", False), ("in_place", True))
TARGET_FORGET_S = 1.0


def plant_secret(path: Path, config: Config, seed: int, victim: str = VICTIM) -> str:
    """Give ``victim`` a secret under :data:`VICTIM_KEY`, rewritten among other writes of
    theirs; returns the secret (every version of the value starts with it)."""
    from memkeeper.bench.workers import running_clock
    from memkeeper.store import MemoryStore

    rng = random.Random(seed)  # noqa: S311 - a reproducible workload
    secret = f"BENCH-SECRET-{rng.getrandbits(48):012x}"
    store = MemoryStore(path, config=config, clock=running_clock(NOW), actor="bench")
    try:
        store.remember(victim, VICTIM_KEY, f"{secret} version 0")
        for index in range(CHURN):
            # (never empty: memkeeper refuses an empty value; seed 1's rows are unchanged)
            store.remember(victim, f"churn-{index}", "z" * rng.randint(0, 1500) or "z")
            if index % 100 == 50:
                store.remember(victim, VICTIM_KEY, f"{secret} version {index}")
    finally:
        store.close()
    return secret


def run_forget(path: str, user: str, key: str, in_place: bool) -> dict[str, Any]:
    """In the runner process: one ``forget`` of ``key``, timed, and what the scrub did (on
    PostgreSQL: :func:`memkeeper.bench.forget_postgres.run_forget_postgres`)."""
    from memkeeper.paths import is_database_url

    if is_database_url(path):
        from memkeeper.bench.forget_postgres import run_forget_postgres

        return run_forget_postgres(path, user, key)
    from memkeeper.bench.workers import running_clock
    from memkeeper.storage.sqlite import scrub, zeroing
    from memkeeper.store import MemoryStore

    done: dict[str, Any] = {"rebuilt": [], "zeroed_pages": 0, "fallbacks": []}
    rebuild = scrub.rebuild

    def counted(db: Any, file: Path, *, timeout_s: float) -> None:
        done["rebuilt"].append(Path(file).name)
        rebuild(db, file, timeout_s=timeout_s)

    class _Log:
        def info(self, event: str, **fields: Any) -> None:
            done["zeroed_pages"] += fields.get("pages", 0)

        def warning(self, event: str, **fields: Any) -> None:
            done["fallbacks"].append(fields.get("reason", event))

    from memkeeper.storage.sqlite import erasure

    scrub_files = erasure.scrub

    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return scrub_files(*args, **kwargs)
        finally:
            done["scrub_window"] = (began, time.perf_counter())

    erasure.scrub = timed  # type: ignore[assignment]
    scrub.ZERO_IN_PLACE, scrub.rebuild = in_place, counted  # type: ignore[assignment]
    if not in_place:
        # The whole-file way as it was: it looked for the entry's source too ("api", in
        # nearly every row), so it found a needle in every file and always rebuilt.
        scrub.file_holds_any = lambda raw, needles: True  # type: ignore[assignment]
    scrub.log = zeroing.log = _Log()  # type: ignore[assignment]
    store = MemoryStore(path, config=Config(), clock=running_clock(NOW), actor="bench")
    try:
        began = time.perf_counter()
        erased = store.forget(user, key)
        done["seconds"] = round(time.perf_counter() - began, 3)
        low, high = done.get("scrub_window", (began, began))
        done["scrub_seconds"] = round(high - low, 3)
        done["erase_seconds"] = round(done["seconds"] - done["scrub_seconds"], 3)
    finally:
        store.close()
    done["erased"] = erased
    return done


def needle_left_in(path: Path, needle: bytes) -> list[str]:
    """Names of the database's files (both, with WAL and shm) that still hold ``needle``.

    Read by this process, which has no SQLite connection to them (so closing its own
    descriptors cancels no lock)."""
    from memkeeper.storage.sqlite.rawfile import find_all

    found = []
    for base in (path, cold_path_for(path)):
        for suffix in ("", "-wal", "-shm"):
            file = Path(f"{base}{suffix}")
            if not file.exists():
                continue
            fd = os.open(file, os.O_RDONLY)
            try:
                if find_all(fd, [needle], first_only=True):
                    found.append(file.name)
            finally:
                os.close(fd)
    return found


def _overlapping(results: list[dict[str, Any]], low: float, high: float) -> list[dict[str, Any]]:
    """Each agent's calls that overran into [low, high] (started before its end, ended after
    its start); errors are counted over the whole forget."""
    kept = []
    for result in results:
        calls = zip(result["started_s"], result["latencies_ms"], strict=True)
        latencies = [ms for at, ms in calls if at <= high and at + ms / 1000 >= low]
        kept.append({"latencies_ms": latencies, "errors": {}})
    return kept


def _files(path: Path) -> list[Path]:
    return [
        Path(f"{base}{s}") for base in (path, cold_path_for(path)) for s in ("", "-wal", "-shm")
    ]


def _copy(source: Path, target: Path) -> None:
    for src, dst in ((source, target), (cold_path_for(source), cold_path_for(target))):
        shutil.copyfile(src, dst)


def _remove(path: Path) -> None:
    for file in _files(path):
        file.unlink(missing_ok=True)


@contextlib.contextmanager
def _directory(keep: Path | None) -> Iterator[Path]:
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="memkeeper-forget-bench-") as tmp:
            yield Path(tmp)
        return
    keep.mkdir(parents=True, exist_ok=True)
    yield keep


def _base(
    root: Path, config: Config, params: dict[str, Any], say: Callable[[str], None]
) -> tuple[Path, str, bool]:
    """The generated database with its secret planted: reused when ``root`` holds one made
    with the same parameters. (path, secret, reused)."""
    base, stamp = root / "forget-base.db", root / "forget-base.json"
    with contextlib.suppress(OSError, ValueError):
        made = json.loads(stamp.read_text())
        if made.get("parameters") == params and base.exists() and cold_path_for(base).exists():
            return base, made["secret"], True
    _remove(base)
    say(f"generating {params['memories']:,} memories over {params['users']:,} users")
    generate(base, config, memories=params["memories"], users=params["users"], seed=params["seed"])
    say(f"planting {VICTIM}'s secret among {CHURN} writes of theirs")
    secret = plant_secret(base, config, params["seed"])
    stamp.write_text(json.dumps({"parameters": params, "secret": secret}))
    return base, secret, False


def measure_forget(
    *,
    memories: int,
    users: int,
    seed: int = 1,
    keep: Path | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Every measurement of the module docstring; the figures as one JSON-ready dict."""
    from memkeeper.bench.run import Children

    config = Config()
    params = {"memories": memories, "users": users, "seed": seed}
    began = time.perf_counter()
    figures: dict[str, Any] = {}
    with _directory(keep) as root:
        base, secret, reused = _base(root, config, params, say)
        size = sum(f.stat().st_size for f in _files(base) if f.exists())
        for mode, in_place in MODES:
            work = root / f"forget-{mode}.db"
            _remove(work)
            _copy(base, work)
            say(f"{mode}: 4 agents alone, then beside one forget of {VICTIM}'s {VICTIM_KEY!r}")
            children = Children(work, seed)
            try:
                children.agents_run()
                time.sleep(IDLE_SECONDS)
                idle = measure.latency(children.agents_stop(), IDLE_SECONDS)
                children.agents_run()
                started = time.perf_counter()
                forget = children.ask(("forget", str(work), VICTIM, VICTIM_KEY, in_place))
                window = time.perf_counter() - started
                results = children.agents_stop()
                during = measure.latency(results, window)
                low, high = forget.pop("scrub_window", (started, started))
                in_scrub = measure.latency(_overlapping(results, low, high), high - low)
            finally:
                children.close()
            figures[mode] = {
                "forget": forget,
                "agents_during_forget": during,
                "agents_during_scrub": in_scrub,
                "agents_without_forget": idle,
                "secret_left_in": needle_left_in(work, secret.encode()),
            }
            _remove(work)
    return {
        "date": datetime.now(UTC).date().isoformat(),
        "memkeeper": __version__,
        "machine": machine(sqlite=sqlite3.sqlite_version),
        "parameters": {**params, "victim": VICTIM, "key": VICTIM_KEY, "agents": 4},
        "database": {"bytes": size, "reused": reused},
        **figures,
        "targets": targets(figures),
        "seconds": round(time.perf_counter() - began, 1),
    }


def machine(**more: Any) -> dict[str, Any]:
    """The machine a figure was measured on: CPUs, platform, Python, its load, and ``more``."""
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        **more,
    }


def verdicts(
    seconds: float, agents: dict[str, Any], left: list[str], where: str
) -> list[dict[str, Any]]:
    """The forget's targets, met or not: the call's time, the agents' latency and errors
    during it, and the ``where`` (files, tables) still holding the erased value."""
    p99, worst, errors = agents["p99_ms"], agents["max_ms"], agents["errors"]
    return [
        {
            "what": "the forget call, seconds",
            "figure": seconds,
            "target": f"<= {TARGET_FORGET_S:g}",
            "met": seconds <= TARGET_FORGET_S,
        },
        {
            "what": "agents during the forget: p99 / max ms, errors",
            "figure": [p99, worst, errors],
            "target": "p99 <= 50, max <= 250, 0 errors",
            "met": p99 is not None and p99 <= 50 and worst <= 250 and errors == 0,
        },
        {
            "what": f"{where} still holding the erased value",
            "figure": left,
            "target": "none",
            "met": not left,
        },
    ]


def targets(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """The forget's targets, met or not, for the in-place scrub."""
    ours = figures["in_place"]
    return verdicts(
        ours["forget"]["seconds"], ours["agents_during_forget"], ours["secret_left_in"], "files"
    )


def forget_table(figures: dict[str, Any]) -> str:
    """The figures as a few lines for people."""
    params, machine = figures["parameters"], figures["machine"]
    lines = [
        f"memkeeper bench --forget: {params['memories']:,} memories over {params['users']:,} "
        f"users (seed {params['seed']}), {figures['database']['bytes'] / 2**20:,.0f} MiB"
        f"{' (reused)' if figures['database']['reused'] else ''}",
        f"{figures['date']}, memkeeper {figures['memkeeper']}, {machine['cpus']} CPUs, "
        f"Python {machine['python']}, SQLite {machine['sqlite']}",
    ]
    for mode, _ in MODES:
        found = figures[mode]
        forget = found["forget"]
        how = (
            f"rebuilt {', '.join(forget['rebuilt'])}"
            if forget["rebuilt"]
            else f"{forget['zeroed_pages']} pages zeroed in place"
        )
        lines += [
            "",
            f"{mode.replace('_', ' ')}:",
            f"  forget of one key        {forget['seconds']} s: erasing the rows "
            f"{forget['erase_seconds']} s, then removing the erased bytes "
            f"{forget['scrub_seconds']} s ({how})",
            f"  agents during the forget {latency_text(found['agents_during_forget'])}",
            f"  agents during the scrub  {latency_text(found['agents_during_scrub'])}",
            f"  agents without it        {latency_text(found['agents_without_forget'])}",
            f"  erased value still in    {', '.join(found['secret_left_in']) or 'no file'}",
        ]
    lines.append("")
    for target in figures["targets"]:
        verdict = "ok" if target["met"] else "MISSED"
        lines.append(f"{target['what']}: {target['figure']} (target {target['target']}) {verdict}")
    lines.append(f"\n(whole bench: {figures['seconds']} s)")
    return "\n".join(lines)
