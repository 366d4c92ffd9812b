"""bench: generate a large database and measure a maintenance pass against its floor."""

from __future__ import annotations

from pathlib import Path

import click

from memkeeper.cli import App, json_option, pass_app, print_json


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
@click.option(
    "--search-eval",
    is_flag=True,
    help="Instead: the search evaluation (recall@3) against the configured embeddings "
    "endpoint; skipped without an API key. --config applies.",
)
@json_option
@pass_app
def bench(
    app: App,
    memories: int | None,
    users: int | None,
    quick: bool,
    seed: int,
    keep: Path | None,
    search_eval: bool,
    as_json: bool,
) -> None:
    """Measure a maintenance pass on a generated database (README, Performance).

    Generates a database deterministically, times a full pass (settle, expire, demote, prune)
    with about 10 % due and a second pass right after, times the same changes written as
    plain set-based SQL (the floor) and checks both end alike, runs 4 agent processes during
    a pass and without one, and measures peak RSS, growth per recall and call rates. Uses
    the default configuration in a temporary directory: --db, --config and --now do not
    apply. Takes a few minutes at the default size.

    With --search-eval, runs the search evaluation set instead, in a temporary database,
    against the embeddings endpoint of the configuration (GLM's embedding-3 by default):
    recall@3 keyword-only and by meaning, and how similar queries are to what they should
    find, to set [search] min_similarity for that model.
    """
    if search_eval:
        from memkeeper.bench.search_eval import run_search_eval
        from memkeeper.bench.search_eval import table as eval_table

        figures = run_search_eval(
            app.config, say=lambda text: click.echo(f"bench: {text}", err=True)
        )
        if as_json:
            print_json(figures)
        else:
            click.echo(eval_table(figures))
        return
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
