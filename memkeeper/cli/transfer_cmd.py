"""import and export."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from memkeeper.cli import App, json_option, pass_app, print_json
from memkeeper.errors import StorageUnwritable
from memkeeper.importexport import FORMATS, export_to, import_file


@click.command("import")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "-u",
    "--user",
    help="Whose memory this is (required for agent_memory.json; "
    "for JSON Lines, import only this user's lines).",
)
@click.option("-n", "--namespace", default="", help="Namespace for agent_memory.json entries.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="agent-json: the seed agent's agent_memory.json; jsonl: memkeeper export.",
)
@click.option(
    "--timezone",
    help="Zone of agent_memory.json note times without one (default: service.timezone).",
)
@json_option
@pass_app
def import_command(
    app: App,
    file: Path,
    user: str | None,
    namespace: str,
    fmt: str,
    timezone: str | None,
    as_json: bool,
) -> None:
    """Import memories from FILE. Nothing is written if any line or key is malformed.

    Importing the same file twice changes nothing the second time.
    """
    report = import_file(
        app.store(), file, user_id=user, namespace=namespace, fmt=fmt, timezone=timezone
    )
    if as_json:
        print_json(report.to_dict())
        return
    click.echo(
        f"imported {file} ({report.format}): {report.created} created, {report.unchanged} "
        f"already present, {report.superseded} superseded an older value"
        + (f", {report.filtered_out} other users' lines skipped" if report.filtered_out else "")
    )
    for conflict in report.conflicts:
        click.echo(f"  conflict: {conflict}", err=True)


@click.command("export")
@click.option("-u", "--user", help="Only this user's memories (default: everyone's).")
@click.option("-n", "--namespace", help="Only this namespace.")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write to this file (default: standard output).",
)
@pass_app
def export_command(app: App, user: str | None, namespace: str | None, output: Path | None) -> None:
    """Export memories (hot and cold) as JSON Lines: one memory per line, every field."""
    store = app.store()
    if output is None:
        export_to(store, sys.stdout, user_id=user, namespace=namespace)
        return
    try:
        with output.open("x", encoding="utf-8") as out:
            count = export_to(store, out, user_id=user, namespace=namespace)
    except FileExistsError:
        raise StorageUnwritable(f"{output} already exists; export never overwrites") from None
    except OSError as exc:
        raise StorageUnwritable(f"cannot write {output}: {exc.strerror or exc}") from None
    click.echo(f"exported {count} memories to {output}", err=True)


def register(group: click.Group) -> None:
    group.add_command(import_command)
    group.add_command(export_command)
