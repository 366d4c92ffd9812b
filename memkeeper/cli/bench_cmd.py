"""bench: generate a large database and measure a maintenance pass against its floor."""

from __future__ import annotations

from pathlib import Path

import click

from memkeeper.cli import json_option, print_json


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
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the generator.")
@click.option(
    "--keep",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the generated databases in this (new or empty) directory.",
)
@json_option
def bench(
    memories: int | None,
    users: int | None,
    quick: bool,
    seed: int,
    keep: Path | None,
    as_json: bool,
) -> None:
    """Measure a maintenance pass on a generated database (README, Performance).

    Generates a database deterministically, times a full pass (settle, expire, demote, prune)
    with about 10 % due and a second pass right after, times the same changes written as
    plain set-based SQL (the floor) and checks both end alike, runs 4 agent processes during
    a pass and without one, and measures peak RSS, growth per recall and call rates. Uses
    the default configuration in a temporary directory: --db, --config and --now do not
    apply. Takes a few minutes at the default size.
    """
    from memkeeper.bench.report import table
    from memkeeper.bench.run import DEFAULT, QUICK, Options, run_bench

    sizes = QUICK if quick else DEFAULT
    options = Options(
        memories=memories or sizes[0],
        users=users or sizes[1],
        seed=seed,
        keep=keep,
    )
    if options.users > options.memories:
        raise click.BadParameter("needs at least as many memories as users", param_hint="--users")
    if keep is not None and keep.exists() and any(keep.iterdir()):
        raise click.BadParameter(f"{keep} is not empty", param_hint="--keep")
    figures = run_bench(options, say=lambda text: click.echo(f"bench: {text}", err=True))
    if as_json:
        print_json(figures)
    else:
        click.echo(table(figures))


def register(cli: click.Group) -> None:
    cli.add_command(bench)
