"""migrate-to: move a SQLite memory into an empty memkeeper schema on PostgreSQL.

A thin shell over :func:`memkeeper.storage.postgres.migrate_to.copy_memory`: the copy is one
transaction on the target, checked before it commits by the row count of every table and by
a sample of ``explain`` texts, which must read the same on both databases (the change log,
the uses and the quoted messages behind each explanation came along intact). The source is
not changed (beyond settling a move a crash interrupted) and stays usable.
"""

from __future__ import annotations

from typing import Any

import click

from memkeeper.cli import App, json_option, pass_app, print_json, required_text
from memkeeper.errors import MigrationMismatch, NotFound
from memkeeper.paths import is_database_url

DEFAULT_SAMPLE = 20


def _explanation(store: Any, memory_id: str) -> str:
    try:
        return store.explain(memory_id)
    except NotFound as exc:  # an id only an erasure's record names: its message, compared too
        return f"not found: {exc}"


@click.command("migrate-to")
@click.argument("url", callback=required_text)
@click.option(
    "--no-vectors",
    is_flag=True,
    help="Leave the embeddings behind (the index job computes them again on PostgreSQL).",
)
@click.option(
    "--sample",
    type=click.IntRange(0, 1000),
    default=DEFAULT_SAMPLE,
    show_default=True,
    help="How many memories' explanations to compare between the two databases.",
)
@json_option
@pass_app
def migrate_to_command(app: App, url: str, no_vectors: bool, sample: int, as_json: bool) -> None:
    """Copy the SQLite memory (--db) into an empty memkeeper schema on PostgreSQL at URL.

    Everything moves in one transaction: hot and cold memories, messages, episodes, the
    change log, tombstones, uses, job runs and vectors, ids unchanged. Before it commits,
    the row counts of every table and the explanations of a sample of memories are compared
    on both sides; any difference rolls the copy back. A target that already holds rows is
    refused (exit 73) and nothing is written. Stop agents and the service first, then point
    them at URL (--db, MEMKEEPER_DB or database.url): the SQLite files stay as they were.
    """
    if not is_database_url(url):
        raise click.BadParameter("must be a postgresql:// URL", param_hint="URL")
    from memkeeper.storage.postgres.driver import driver_needed
    from memkeeper.storage.postgres.url import parse_url

    with driver_needed(str(parse_url(url))):
        from memkeeper.storage.postgres.migrate_to import copy_memory, sample_ids

    source = app.store(create=False)
    if source.storage.one_database:
        raise click.UsageError(
            "the memory to copy (--db, MEMKEEPER_DB or the config) is already on PostgreSQL: "
            "migrate-to copies a SQLite memory"
        )
    ids = sample_ids(source.storage, sample)
    # Opening the target creates memkeeper's schema there (in one transaction: a failed
    # opening leaves nothing); a copy that does not commit drops it again itself.
    target = app.store(db=url)

    def verify() -> None:
        differ = [i for i in ids if _explanation(source, i) != _explanation(target, i)]
        if differ:
            raise MigrationMismatch(
                f"the explanations of {len(differ)} of {len(ids)} sampled memories "
                f"differ between the databases (first: {differ[0]}); the copy was "
                "rolled back"
            )

    try:
        counts = copy_memory(source.storage, target.storage, vectors=not no_vectors, verify=verify)
    except BaseException:
        target.close()  # its schema is gone: the store is of no further use
        raise
    where = target.storage.hot_path  # the URL with its password masked
    if as_json:
        print_json(
            {
                "source": str(source.path),
                "target": where,
                "tables": {t: {"sqlite": a, "postgresql": b} for t, (a, b) in counts.items()},
                "explanations_compared": len(ids),
            }
        )
        return
    click.echo(f"copied {source.path} to {where}:")
    width = max(len(table) for table in counts)
    for table, (rows, _same) in counts.items():
        click.echo(f"  {table:<{width}}  {rows}")
    click.echo(f"verified: every table's row count, and {len(ids)} memories' explanations")


def register(group: click.Group) -> None:
    group.add_command(migrate_to_command)
