"""bench: generate a large database and measure a maintenance pass against its floor."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from memkeeper.cli import App, json_option, pass_app, print_json
from memkeeper.paths import is_database_url


@click.command("bench")
@click.option(
    "--memories",
    type=click.IntRange(min=1),
    help="Memories to generate. Default 1,000,000 (100,000 with --quick).",
)
@click.option(
    "--users",
    type=click.IntRange(min=1),
    help="Users to spread them over. Default 10,000 (1,000 with --quick).",
)
@click.option("--quick", is_flag=True, help="100,000 memories over 1,000 users.")
@click.option(
    "--merge",
    is_flag=True,
    help="Instead, time the merge job on --users users (default 10,000) with a few "
    "duplicates each.",
)
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the generator.")
@click.option(
    "--keep",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the generated databases in this (new or empty) directory.",
)
@click.option(
    "--search-eval",
    is_flag=True,
    help="Instead: the recall evaluation (recall@1/3/10 of memkeeper keyword-only and hybrid, "
    "fresh and aged, beside BM25, dense and RRF baselines) with the local embeddings "
    "stand-in, and the configured endpoint too when its API key is set. --config applies.",
)
@click.option(
    "--eval-size",
    type=click.Choice(["full", "smoke"]),
    default="full",
    show_default=True,
    help="With --search-eval: 6 users and 240 questions (full), or 3 users and 48 (smoke).",
)
@click.option(
    "--eval-seed",
    type=int,
    default=21,
    show_default=True,
    help="With --search-eval: the seed of the generated set (another seed, another set from "
    "the same templates).",
)
@click.option(
    "--locomo",
    "locomo_path",
    type=click.Path(path_type=Path),
    help="Instead: the LoCoMo retrieval evaluation on this file (the public locomo10.json) or "
    "directory of conversations: recall@1/3/5/10 by category of memkeeper keyword-only and "
    "hybrid beside BM25, dense and RRF, and each question's query embedding and search time "
    "(p50, p90). Embeds with the configured embedder (--config), or with each --model.",
)
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="DIR",
    help="With --locomo or --search-eval: a local model directory (tokenizer.json and "
    ".safetensors weights) to evaluate; repeatable. Default for --locomo: the configured "
    "embedder; --search-eval adds each model beside its stand-in.",
)
@click.option(
    "--mcp-clients",
    type=click.IntRange(min=1),
    help="Instead: N MCP clients over HTTP during a pass and without one, each tool's latency "
    "(default 20,000 memories over 200 users).",
)
@click.option(
    "--startup",
    "startup_runs",
    type=click.IntRange(min=1, max=1000),
    is_flag=False,
    flag_value=20,
    help="Instead: the start-up time of recall, remember and search, the median of N fresh "
    "processes each (default 20).",
)
@click.option(
    "--fleet",
    "fleet_hosts",
    type=click.IntRange(min=2, max=16),
    help="Instead: N simulated hosts (memkeeper run --mcp each) on the --postgres database, "
    "agents calling every host, the leader killed once: takeover time, latency, errors.",
)
@click.option(
    "--fleet-rate",
    type=click.FloatRange(0, 1000),
    default=None,
    help="With --fleet: the calls per second each agent offers while the latency is measured "
    "(open loop; default 20; 0: every agent as fast as it can throughout).",
)
@click.option(
    "--postgres",
    "postgres_url",
    metavar="URL",
    help="Also run the pass, agents, rates and search on this scratch PostgreSQL database "
    "(postgresql://...; refused if it holds a memkeeper schema), beside SQLite in one run.",
)
@click.option(
    "--ui",
    "ui_pages",
    is_flag=True,
    help="Instead: the time of each page of memkeeper ui on a generated database after one "
    "maintenance pass (--memories, --users; default 1,000,000 over 10,000), against 300 ms.",
)
@click.option(
    "--forget",
    "forget_one",
    is_flag=True,
    help="Instead: one forget of one key on a generated database (--memories, --users; "
    "default 1,000,000 over 10,000) with 4 agents beside it, zeroing in place and with the "
    "whole-file rebuild: the forget's time, the agents' latency, and any erased byte left. "
    "With --keep DIR, the database is kept there and reused by the next run. With --postgres "
    "URL, on that scratch database instead: the erasure and its VACUUMs timed apart, and any "
    "row left holding the erased value (with --keep DIR, the loaded schema is left there for "
    "the next run).",
)
@json_option
@pass_app
def bench(
    app: App,
    memories: int | None,
    users: int | None,
    quick: bool,
    merge: bool,
    seed: int,
    keep: Path | None,
    search_eval: bool,
    eval_size: str,
    eval_seed: int,
    locomo_path: Path | None,
    models: tuple[str, ...],
    mcp_clients: int | None,
    startup_runs: int | None,
    fleet_hosts: int | None,
    fleet_rate: float | None,
    postgres_url: str | None,
    ui_pages: bool,
    forget_one: bool,
    as_json: bool,
) -> None:
    """Measure a maintenance pass on a generated database.

    Generates a database deterministically, times a full pass (settle, expire, demote, prune)
    with about 10 % due and a second pass right after, times the same changes written as
    plain set-based SQL (the floor) and checks both end alike, runs 4 agent processes during
    a pass and without one, and measures peak RSS, growth per recall and call rates. Uses
    the default configuration in a temporary directory: --db, --config and --now do not
    apply. Takes a few minutes at the default size.

    With --search-eval, runs the recall evaluation instead, in temporary databases:
    generated users' memories written over a year, questions that paraphrase them, ask for
    old ones or match nothing; recall@1/3/10 of memkeeper's search keyword-only and hybrid,
    fresh and aged, beside BM25, dense and RRF baselines,
    with the bench's local embeddings stand-in, and the configured endpoint when its API key
    is set.

    With --startup [N], times recall, remember and search as N fresh processes each (the
    median against the 150 ms target), and names any module they import that they should
    not (structlog, the job runner, the scheduler, the LLM SDK).

    With --locomo PATH, runs the LoCoMo retrieval evaluation on the public file (or a
    directory of conversations): each turn stored as a note dated at its session, every
    question asked through search; recall@1/3/5/10 by category of memkeeper keyword-only and
    hybrid, beside BM25, dense-only and RRF on the same turns, overall and per conversation,
    and the p50 and p90 of each question's query embedding and search.

    With --ui, times each page of memkeeper ui (in process, as an admin) on a generated
    database after one maintenance pass, against 300 ms a page.

    With --forget, times one forget of one key on a generated database with 4 agents
    beside it, once zeroing erased bytes in place and once rebuilding the whole file, and
    checks that no byte of the erased value is left in any file. With --forget --postgres
    URL, the same on the scratch PostgreSQL database: the erasure's transaction and the
    VACUUMs after it timed apart, the agents' latency during each, and any table with a row
    still holding the erased value.

    With --mcp-clients N, runs N MCP clients over HTTP instead (the server as memkeeper run
    --mcp serves it) during a full pass and then without one, and reports each tool's
    latency.

    With --fleet N --postgres URL, starts N memkeeper run --mcp processes (simulated hosts)
    on the scratch database, agents calling each host's endpoint, kills the leader once, and
    reports the takeover time, the agents' latency through it and errors: first the most the
    fleet serves (agents as fast as they can), then the latency at a stated load
    (--fleet-rate calls/s per agent, open loop).
    """
    if postgres_url is not None and not is_database_url(postgres_url):
        raise click.BadParameter("must be a postgresql:// URL", param_hint="--postgres")
    if fleet_hosts is not None:
        _fleet_bench(fleet_hosts, fleet_rate, postgres_url, as_json)
        return
    if forget_one:
        _forget_bench(postgres_url, memories, users, seed, keep, as_json)
        return
    if ui_pages:
        from memkeeper.bench.run import DEFAULT, QUICK
        from memkeeper.bench.ui_pages import measure_ui, ui_table

        sizes = QUICK if quick else DEFAULT
        found = measure_ui(
            memories=memories or sizes[0],
            users=users or sizes[1],
            seed=seed,
            say=_progress,
        )
        _report(found, ui_table, as_json)
        return
    if startup_runs is not None:
        from memkeeper.bench.startup import measure_startup, startup_table

        found = measure_startup(startup_runs, say=_progress)
        _report(found, startup_table, as_json)
        return
    if locomo_path is not None:
        _locomo_bench(app, locomo_path, models, as_json)
        return
    if search_eval:
        from memkeeper.bench.locomo import with_local_model
        from memkeeper.bench.recall_eval import run_recall_eval
        from memkeeper.bench.recall_eval import table as eval_table

        figures = run_recall_eval(
            app.config,
            size=eval_size,
            seed=eval_seed,
            models=[(Path(m).name, with_local_model(app.config, m)) for m in models],
            say=_progress,
        )
        _report(figures, eval_table, as_json)
        return
    if mcp_clients is not None:
        from memkeeper.bench.mcp_load import (
            DEFAULT_MEMORIES,
            DEFAULT_USERS,
            mcp_table,
            measure_mcp_load,
        )

        loads = measure_mcp_load(
            mcp_clients,
            memories=memories or DEFAULT_MEMORIES,
            users=users or DEFAULT_USERS,
            seed=seed,
            say=_progress,
        )
        _report(loads, mcp_table, as_json)
        return
    if merge:
        _merge_bench(users, seed, keep, as_json)
        return
    from memkeeper.bench.report import table
    from memkeeper.bench.run import DEFAULT, QUICK, Options, run_bench

    sizes = QUICK if quick else DEFAULT
    options = Options(
        memories=memories or sizes[0],
        users=users or sizes[1],
        seed=seed,
        keep=keep,
        postgres=postgres_url,
    )
    if options.users > options.memories:
        raise click.BadParameter("needs at least as many memories as users", param_hint="--users")
    if keep is not None and keep.exists() and any(keep.iterdir()):
        raise click.BadParameter(f"{keep} is not empty", param_hint="--keep")
    figures = run_bench(options, say=_progress)
    _report(figures, table, as_json)


def _locomo_bench(app: App, path: Path, models: tuple[str, ...], as_json: bool) -> None:
    if not path.exists():
        raise click.BadParameter(f"{path} does not exist", param_hint="--locomo")
    from memkeeper.bench.locomo import run_locomo, with_local_model
    from memkeeper.bench.locomo import table as locomo_table

    figures = run_locomo(
        path,
        app.config,
        models=[(Path(m).name, with_local_model(app.config, m)) for m in models],
        say=_progress,
    )
    _report(figures, locomo_table, as_json)


def _forget_bench(
    postgres_url: str | None,
    memories: int | None,
    users: int | None,
    seed: int,
    keep: Path | None,
    as_json: bool,
) -> None:
    """--forget: on the SQLite default, or on the scratch server of --postgres."""
    from memkeeper.bench.forget_load import DEFAULT, forget_table, measure_forget

    sizes = {"memories": memories or DEFAULT[0], "users": users or DEFAULT[1]}
    if postgres_url is None:
        found = measure_forget(**sizes, seed=seed, keep=keep, say=_progress)
        _report(found, forget_table, as_json)
        return
    from memkeeper.bench.forget_postgres import forget_postgres_table, measure_forget_postgres

    found = measure_forget_postgres(postgres_url, **sizes, seed=seed, keep=keep, say=_progress)
    _report(found, forget_postgres_table, as_json)


def _fleet_bench(hosts: int, rate: float | None, postgres_url: str | None, as_json: bool) -> None:
    if postgres_url is None:
        raise click.UsageError("--fleet needs --postgres URL (a scratch PostgreSQL database)")
    from memkeeper.bench.fleet_load import RATE_PER_AGENT, fleet_table, measure_fleet

    figures = measure_fleet(
        hosts,
        postgres_url,
        rate=RATE_PER_AGENT if rate is None else rate,
        say=_progress,
    )
    _report(figures, fleet_table, as_json)


def _merge_bench(users: int | None, seed: int, keep: Path | None, as_json: bool) -> None:
    from memkeeper.bench.merge_load import run_merge_bench, summary

    if keep is not None and keep.exists() and any(keep.iterdir()):
        raise click.BadParameter(f"{keep} is not empty", param_hint="--keep")
    click.echo(f"bench: merge on {users or 10_000:,} users", err=True)
    figures = run_merge_bench(users or 10_000, seed=seed, root=keep)
    _report(figures, summary, as_json)


def _progress(text: str) -> None:
    """A bench's progress line, on standard error (standard output holds its figures)."""
    click.echo(f"bench: {text}", err=True)


def _report(figures: Any, render: Callable[[Any], str], as_json: bool) -> None:
    """A bench's figures: one JSON document with --json, else ``render``'s table."""
    if as_json:
        print_json(figures)
    else:
        click.echo(render(figures))


def register(cli: click.Group) -> None:
    cli.add_command(bench)
