"""``memkeeper bench --forget --postgres URL``: the forget bench on PostgreSQL.

The same generated rows as the SQLite leg (:func:`memkeeper.bench.generate.tables`, loaded
with ``COPY`` into memkeeper's schema of the database ``URL`` names), the same victim with
a secret under :data:`~memkeeper.bench.forget_load.VICTIM_KEY` rewritten among 300 writes
of theirs, the same 4 agent processes (recall 80 %, remember 20 %, their own users), alone
for a while and then beside one ``MemoryStore.forget(user, key)`` in the runner process.

A forget on PostgreSQL is the erasure (every row in one transaction under memkeeper's write
lock) and then ``VACUUM (INDEX_CLEANUP ON)`` of each table it deleted from, on a connection
of its own (:mod:`memkeeper.storage.postgres.forgetting`). The runner times the two apart
(and each table's VACUUM), and the agents' latency is given for the calls that overran into
the whole forget, into the erasure (those that waited for its lock: it takes the global
write lock exclusively), and for the calls that started during the VACUUMs. Afterwards
every row of every table of memkeeper's schema is read as text, looking for the secret
(what the server's SQL can see: live rows, not the bytes a VACUUM leaves in freed space).

The database must be a scratch one: a memkeeper schema the bench did not load is refused.
Without ``--keep`` the schema is dropped at the end; with ``--keep DIR`` it is left in the
database, a note in ``DIR`` says what it holds, and the next run with the same ``DIR``,
database and parameters reuses it (each run plants a new secret, for another generated user
than the last run's: :func:`victim_of`).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memkeeper import __version__
from memkeeper.bench import measure
from memkeeper.bench.forget_load import (
    IDLE_SECONDS,
    VICTIM,
    VICTIM_KEY,
    _overlapping,
    machine,
    plant_secret,
    verdicts,
)
from memkeeper.bench.generate import NOW
from memkeeper.bench.report import latency_text
from memkeeper.config import Config
from memkeeper.errors import InvalidInput
from memkeeper.storage.postgres.schema import DEFAULT_SCHEMA

STAMP = "forget-base-postgres.json"
"""The note ``--keep DIR`` holds: the parameters of the schema left in the database."""
MARK = "memkeeper bench --forget base "
"""How the schema comment of a schema this bench loaded starts (then a random token)."""


def victim_of(run: int, users: int) -> str:
    """The victim of the ``run``-th run on a schema: the SQLite leg's first, then another
    generated user each run (101 users apart)."""
    return VICTIM if run == 0 else f"u{(int(VICTIM[1:]) + 101 * run) % users:06d}"


def _connect(url: str) -> Any:
    from memkeeper.storage.postgres.pool import connect
    from memkeeper.storage.postgres.url import parse_url

    return connect(parse_url(url), autocommit=True)


def _schema_mark(url: str) -> str | None:
    """The comment of memkeeper's schema in ``url`` (None: no schema, or no comment)."""
    with _connect(url) as conn:
        row = conn.execute(
            "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
            (DEFAULT_SCHEMA,),
        ).fetchone()
    return None if row is None else row[0]


def _set_mark(url: str, mark: str) -> None:
    from psycopg import sql

    with _connect(url) as conn:
        conn.execute(
            sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                sql.Identifier(DEFAULT_SCHEMA), sql.Literal(mark)
            )
        )


def _schema_bytes(url: str) -> int:
    with _connect(url) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(format('%%I.%%I', schemaname, tablename)"
            "::regclass)), 0) FROM pg_tables WHERE schemaname = %s",
            (DEFAULT_SCHEMA,),
        ).fetchone()
    return int(row[0])


def tables_holding(url: str, needle: str) -> list[str]:
    """The tables of memkeeper's schema with a row whose text (the row cast to text: every
    column) holds ``needle``, in any case."""
    from psycopg import sql

    found = []
    with _connect(url) as conn:
        names = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename",
            (DEFAULT_SCHEMA,),
        ).fetchall()
        for (table,) in names:
            (hits,) = conn.execute(
                sql.SQL("SELECT count(*) FROM {} AS r WHERE strpos(lower(r::text), %s) > 0").format(
                    sql.Identifier(DEFAULT_SCHEMA, table)
                ),
                (needle.lower(),),
            ).fetchone()
            if hits:
                found.append(table)
    return found


def _read_stamp(keep: Path | None) -> dict[str, Any]:
    if keep is None:
        return {}
    with contextlib.suppress(OSError, ValueError):
        stamp = json.loads((keep / STAMP).read_text())
        if isinstance(stamp, dict):
            return stamp
    return {}


def _base(
    url: str, config: Config, params: dict[str, Any], keep: Path | None, say: Callable[[str], None]
) -> tuple[dict[str, Any], bool]:
    """The generated rows in memkeeper's schema of ``url``: reused when ``keep`` notes a
    schema loaded with the same parameters in the same database, and it is still there.
    Refuses a memkeeper schema this bench did not load. (the stamp, reused)."""
    from memkeeper.bench.postgres_bench import load
    from memkeeper.storage.postgres.url import mask_url

    mark, stamp = _schema_mark(url), _read_stamp(keep)
    if (
        mark is not None
        and stamp.get("mark") == mark
        and stamp.get("parameters") == params
        and stamp.get("database") == mask_url(url)
    ):
        return stamp, True
    from memkeeper.storage.postgres.scratch import has_memkeeper_schema

    if has_memkeeper_schema(url) and not (mark or "").startswith(MARK):
        raise InvalidInput(
            f"--postgres {mask_url(url)} already holds a memkeeper schema; the bench loads and "
            "changes a million rows: give it a scratch database"
        )
    say(f"postgres: loading {params['memories']:,} memories over {params['users']:,} users")
    began = time.perf_counter()
    generated = load(
        url, config, memories=params["memories"], users=params["users"], seed=params["seed"]
    )
    mark = MARK + secrets.token_hex(8)
    _set_mark(url, mark)
    stamp = {
        "parameters": params,
        "database": mask_url(url),
        "mark": mark,
        "runs": 0,
        "load_seconds": round(time.perf_counter() - began, 1),
        "loaded": generated.to_dict(),
    }
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / STAMP).write_text(json.dumps(stamp))
    return stamp, False


def _started_in(results: list[dict[str, Any]], low: float, high: float) -> list[dict[str, Any]]:
    """Each agent's calls that started in [low, high]."""
    kept = []
    for result in results:
        calls = zip(result["started_s"], result["latencies_ms"], strict=True)
        kept.append({"latencies_ms": [ms for at, ms in calls if low <= at <= high], "errors": {}})
    return kept


class _TimedConnection:
    """The VACUUM connection, each statement timed (the runner's measurement only)."""

    def __init__(self, conn: Any, times: dict[str, float]) -> None:
        self._conn, self._times = conn, times

    def __enter__(self) -> _TimedConnection:
        self._conn.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._conn.__exit__(*exc)

    def execute(self, statement: Any, *args: Any, **kwargs: Any) -> Any:
        text = statement.as_string(self._conn) if hasattr(statement, "as_string") else statement
        began = time.perf_counter()
        try:
            return self._conn.execute(statement, *args, **kwargs)
        finally:
            if str(text).startswith("VACUUM"):
                table = str(text).rsplit(".", 1)[-1].strip('"')
                self._times[table] = round(time.perf_counter() - began, 3)


def run_forget_postgres(url: str, user: str, key: str) -> dict[str, Any]:
    """In the runner process: one ``forget`` of ``key`` on ``url``, its erasure and its
    VACUUMs timed apart (each table's too), with the windows for the agents' latency."""
    from memkeeper.bench.workers import running_clock
    from memkeeper.storage.postgres import forgetting
    from memkeeper.store import MemoryStore

    done: dict[str, Any] = {"vacuum_tables": {}, "vacuumed": []}
    erase, vacuum, connect = forgetting.erase, forgetting.vacuum, forgetting.connect

    def timed_erase(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return erase(*args, **kwargs)
        finally:
            done["erase_window"] = (began, time.perf_counter())

    def timed_vacuum(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            done["vacuumed"] = vacuum(*args, **kwargs)
            return done["vacuumed"]
        finally:
            done["vacuum_window"] = (began, time.perf_counter())

    def timed_connect(*args: Any, **kwargs: Any) -> _TimedConnection:
        return _TimedConnection(connect(*args, **kwargs), done["vacuum_tables"])

    forgetting.erase, forgetting.vacuum = timed_erase, timed_vacuum  # type: ignore[assignment]
    forgetting.connect = timed_connect  # type: ignore[assignment]
    store = MemoryStore(url, config=Config(), clock=running_clock(NOW), actor="bench")
    try:
        began = time.perf_counter()
        erased = store.forget(user, key)
        ended = time.perf_counter()
    finally:
        store.close()
        forgetting.erase, forgetting.vacuum, forgetting.connect = erase, vacuum, connect
    low, high = done.get("erase_window", (began, began))
    vacuum_low, vacuum_high = done.get("vacuum_window", (high, high))
    done.update(
        erased=erased,
        seconds=round(ended - began, 3),
        erase_seconds=round(vacuum_low - low, 3),
        vacuum_seconds=round(vacuum_high - vacuum_low, 3),
        other_seconds=round((ended - began) - (high - low), 3),
        windows={
            "forget": (began, ended),
            "erase": (low, vacuum_low),
            "vacuum": (vacuum_low, high),
        },
    )
    return done


def measure_forget_postgres(
    url: str,
    *,
    memories: int,
    users: int,
    seed: int = 1,
    keep: Path | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Every measurement of the module docstring; the figures as one JSON-ready dict."""
    from memkeeper.bench.run import Children
    from memkeeper.storage.postgres.scratch import drop_memkeeper_schema, server_version

    config = Config()
    params = {"memories": memories, "users": users, "seed": seed}
    began = time.perf_counter()
    stamp, reused = _base(url, config, params, keep, say)
    try:
        run = int(stamp.get("runs", 0))
        victim = victim_of(run, users)
        say(f"postgres: planting {victim}'s secret among 300 writes of theirs")
        planted = time.perf_counter()
        # A new secret each run of a kept schema (the last one's is erased, and memkeeper
        # refuses to store an erased value again), for another user: each run's victim
        # starts with the generated rows only, as on SQLite's fresh copy.
        secret = plant_secret(url, config, seed + run, victim)  # type: ignore[arg-type]
        plant_seconds = round(time.perf_counter() - planted, 1)
        if keep is not None:
            (keep / STAMP).write_text(json.dumps({**stamp, "runs": run + 1}))
        size = _schema_bytes(url)
        say(f"postgres: 4 agents alone, then beside one forget of {victim}'s {VICTIM_KEY!r}")
        children = Children(url, seed)  # type: ignore[arg-type]
        try:
            children.agents_run()
            time.sleep(IDLE_SECONDS)
            idle = measure.latency(children.agents_stop(), IDLE_SECONDS)
            children.agents_run()
            forget = children.ask(("forget", url, victim, VICTIM_KEY, True))
            results = children.agents_stop()
        finally:
            children.close()
        windows = forget.pop("windows")
        low, high = windows["forget"]
        # The calls that overran into each window; errors over the agents' whole run
        # beside the forget (the forget's own process opening its store included).
        whole = measure.latency(results, high - low)
        during = {
            **measure.latency(_overlapping(results, low, high), high - low),
            "errors": whole["errors"],
            "error_samples": whole["error_samples"],
        }
        # During the erasure: the calls that overran into it (those that waited for its
        # lock); during the VACUUMs: the calls that started in them (after the commit).
        low, high = windows["erase"]
        erasure = measure.latency(_overlapping(results, low, high), high - low)
        low, high = windows["vacuum"]
        in_vacuum = measure.latency(_started_in(results, low, high), high - low)
        say("postgres: reading every row of every table for the secret")
        left = tables_holding(url, secret)
        version = server_version(url)
    finally:
        if keep is None:
            drop_memkeeper_schema(url)
    figures: dict[str, Any] = {
        "date": datetime.now(UTC).date().isoformat(),
        "memkeeper": __version__,
        "machine": machine(),
        "server": version,
        "parameters": {**params, "victim": victim, "key": VICTIM_KEY, "agents": 4, "run": run},
        "database": {
            "bytes": size,
            "reused": reused,
            "load_seconds": stamp.get("load_seconds"),
            "plant_seconds": plant_seconds,
            "kept": keep is not None,
        },
        "forget": forget,
        "agents_during_forget": during,
        "agents_during_erasure": erasure,
        "agents_during_vacuum": in_vacuum,
        "agents_without_forget": idle,
        "secret_left_in": left,
    }
    figures["targets"] = targets(figures)
    figures["seconds"] = round(time.perf_counter() - began, 1)
    return figures


def targets(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """The forget's targets on PostgreSQL, met or not."""
    return verdicts(
        figures["forget"]["seconds"],
        figures["agents_during_forget"],
        figures["secret_left_in"],
        "tables with a row",
    )


def forget_postgres_table(figures: dict[str, Any]) -> str:
    """The figures as a few lines for people."""
    params, machine, forget = figures["parameters"], figures["machine"], figures["forget"]
    database = figures["database"]
    vacuums = ", ".join(f"{t} {s} s" for t, s in forget["vacuum_tables"].items())
    skipped = sorted(set(forget["vacuum_tables"]) - set(forget["vacuumed"]))
    who = f"forget of {params['victim']}'s key"
    lines = [
        f"memkeeper bench --forget --postgres: {params['memories']:,} memories over "
        f"{params['users']:,} users (seed {params['seed']}), {database['bytes'] / 2**20:,.0f} MiB "
        f"in memkeeper's schema{' (reused)' if database['reused'] else ''}",
        f"{figures['date']}, memkeeper {figures['memkeeper']}, {machine['cpus']} CPUs, "
        f"Python {machine['python']}, PostgreSQL {figures['server']}, load average "
        f"{' / '.join(map(str, machine['load_average']))}",
        "",
        f"{who:<27}{forget['seconds']} s: the erasure {forget['erase_seconds']} s"
        f", then the VACUUMs {forget['vacuum_seconds']} s (the rest {forget['other_seconds']} s)",
        f"  VACUUM (INDEX_CLEANUP ON) {vacuums or 'none'}"
        + (f"; not vacuumed: {', '.join(skipped)}" if skipped else ""),
        f"agents during the forget   {latency_text(figures['agents_during_forget'])}",
        f"agents during the erasure  {latency_text(figures['agents_during_erasure'])}",
        f"agents in the VACUUMs      {latency_text(figures['agents_during_vacuum'])}",
        f"agents without it          {latency_text(figures['agents_without_forget'])}",
        f"erased value still in      {', '.join(figures['secret_left_in']) or 'no table'}",
        "",
    ]
    for target in figures["targets"]:
        verdict = "ok" if target["met"] else "MISSED"
        lines.append(f"{target['what']}: {target['figure']} (target {target['target']}) {verdict}")
    lines.append(f"\n(whole bench: {figures['seconds']} s)")
    return "\n".join(lines)
