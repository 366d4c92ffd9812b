"""import and export."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from memkeeper.cli import App, json_option, pass_app, print_json, yes_option
from memkeeper.cli.progress import on_a_terminal
from memkeeper.cli.render import shown
from memkeeper.errors import ImportFileError, InvalidInput, StorageUnwritable
from memkeeper.store.transfer import (
    FORMATS,
    ImportReport,
    export_to,
    import_file,
    timezone_named,
)


def _check_timezone(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        try:
            timezone_named(value)
        except InvalidInput as exc:
            raise click.BadParameter(str(exc), param=param) from None
    return value


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
    callback=_check_timezone,
    help="IANA zone (e.g. Asia/Shanghai) of agent_memory.json note times without one "
    "(default: service.timezone).",
)
@click.option(
    "--as-new",
    is_flag=True,
    help="agent_memory.json: import entries a forget erased (their times predate it, or "
    "they have none) as statements made now, instead of leaving them forgotten.",
)
@yes_option
@json_option
@pass_app
def import_command(
    app: App,
    file: Path,
    user: str | None,
    namespace: str,
    fmt: str,
    timezone: str | None,
    as_new: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Import memories from FILE. Nothing is written if any line or key is malformed.

    Importing the same file twice changes nothing the second time. An empty file is refused
    (exit 65). A line whose id is already stored with different content is left as it is,
    counted as a conflict in the summary and listed on standard error. Entries a forget
    erased stay forgotten; when that leaves nothing imported, the exit is 65 (--as-new
    imports them as statements made now).
    """
    app.check_now(yes=yes)
    try:
        report = import_file(
            app.store(),
            file,
            user_id=user,
            namespace=namespace,
            fmt=fmt,
            timezone=timezone,
            as_new=as_new,
            progress=None if as_json else on_a_terminal(),
        )
    except InvalidInput as exc:
        if as_new and "--as-new" in str(exc):
            raise click.UsageError(str(exc)) from None
        raise
    if as_json:
        print_json(report.to_dict())
    else:
        _print_import(file, report)
    if report.only_forgotten:
        raise ImportFileError(
            f"nothing imported from {shown(file, None)}: its {report.forgotten} "
            f"entr{'y was' if report.forgotten == 1 else 'ies were'} erased by a forget "
            "(entries without a time count as older than it) and stay forgotten; "
            "--as-new imports them as statements made now"
        )


def _print_import(file: Path, report: ImportReport) -> None:
    click.echo(
        f"imported {shown(file, None)} ({report.format}): {report.created} created, "
        f"{report.unchanged} already present, {report.superseded} superseded an older value"
        + (f", {len(report.conflicts)} in conflict (left as stored)" if report.conflicts else "")
        + (f", {report.filtered_out} other users' lines skipped" if report.filtered_out else "")
        + (f", {report.forgotten} erased earlier (left forgotten)" if report.forgotten else "")
        + (f", {report.restated} erased earlier, stored as new" if report.restated else "")
    )
    for conflict in report.conflicts:
        click.echo(f"  conflict: {shown(conflict)}", err=True)


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
    store = app.store(create=False)
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
