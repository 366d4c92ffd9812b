"""demo: a year of three agents' memory, maintained on schedule, in a temporary database."""

from __future__ import annotations

from pathlib import Path

import click

from memkeeper import logs
from memkeeper.cli import App, json_option, pass_app, print_json


@click.command("demo")
@click.option(
    "--months",
    type=click.IntRange(min=1, max=120),
    default=12,
    show_default=True,
    help="How many months to simulate.",
)
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the agents' choices.")
@click.option(
    "--keep",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the database in this (new or empty) directory instead of removing it.",
)
@json_option
@pass_app
def demo(app: App, months: int, seed: int, keep: Path | None, as_json: bool) -> None:
    """Watch a year of memory maintenance happen, in seconds.

    Three agents (a chat assistant, a work assistant with a project per namespace, a reading
    assistant) write facts, preferences, notes, conversations and episodes, change and
    forget things, while a simulated clock moves day by day from 2027-01-01 and every job
    runs when its schedule in the config says (in [service] timezone; index, which would
    call the embedding API, is off). Prints month by
    month what expired, was reviewed, demoted, pruned, settled, merged and summarized,
    then undoes one run and tells a few entries' lives with explain.

    Everything happens in a new temporary database, removed afterwards (--keep DIR keeps
    it): your memory database is never opened, and --db and --now do not apply. The
    schedules, TTLs and limits are your config's (--config). Without an API key the
    summaries come from a local, deterministic stand-in (no LLM, no network) and say so;
    with one ([llm] api_key_env) the summarize job uses GLM. The same --seed gives the same
    story and counts (ids differ). Takes well under 30 seconds without a key.
    """
    from memkeeper.demo.report import render
    from memkeeper.demo.run import DemoOptions, run_demo

    if app.verbose == 0:
        # A job failing all year would log one error per run; the report's job table names
        # the failure once (-v shows the log).
        logs.configure(level="critical")
    options = DemoOptions(months=months, seed=seed, keep=keep, config=app.config)
    result = run_demo(
        options, progress=lambda month: click.echo(f"demo: simulating {month}", err=True)
    )
    if as_json:
        print_json(result.to_dict())
    else:
        click.echo(render(result))


def register(cli: click.Group) -> None:
    cli.add_command(demo)
