"""backup and restore-backup: an online copy of both files, and putting one back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from memkeeper import __version__, settings
from memkeeper.cli import App, json_option, pass_app, print_json, yes_option
from memkeeper.clock import system_now


def _size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _count(number: int, noun: str) -> str:
    plural = "memories" if noun == "memory" else f"{noun}s"
    return f"{number} {noun if number == 1 else plural}"


def _refuse_on_postgres(app: App, command: str) -> None:
    """``backup`` and ``restore-backup`` copy SQLite files: on PostgreSQL, exit 2 naming
    pg_dump / pg_restore (:mod:`memkeeper.storage.postgres.backups`), before connecting."""
    target = settings.database_url(app.db, app.config)
    if target is not None:
        from memkeeper.storage.postgres.backups import refuse
        from memkeeper.storage.postgres.url import parse_url

        raise refuse(command, str(parse_url(target[0])))


def _files_line(manifest: dict[str, Any]) -> str:
    files = manifest["files"]
    total = sum(entry["bytes"] for entry in files.values())
    parts = [
        f"{role} {_size(entry['bytes'])}, {_count(entry['rows'].get(table, 0), 'memory')}"
        for role, entry, table in (
            ("hot", files["hot"], "memories"),
            ("cold", files["cold"], "cold_memories"),
        )
    ]
    return f"{_size(total)} ({'; '.join(parts)})"


@click.command("backup")
@click.argument("dest_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--prune-forgotten",
    is_flag=True,
    help="Do not take a new backup: apply to the backup in DEST_DIR every erasure (forget) "
    "the database recorded that the backup has not seen, leaving no residue in its files.",
)
@yes_option
@json_option
@pass_app
def backup_command(
    app: App, dest_dir: Path, prune_forgotten: bool, yes: bool, as_json: bool
) -> None:
    """Copy the memory database (hot and cold files) into DEST_DIR, online.

    Safe while agents write and while jobs move entries between the files: no entry is in
    both copies or in neither. The copy is verified (integrity check, row counts) and
    described in DEST_DIR/manifest.json. DEST_DIR must be new, empty, or an earlier backup
    (which is replaced). A forget does not reach existing backups: run this again with
    --prune-forgotten on each backup you keep.

    Not on PostgreSQL (exit 2): use pg_dump of memkeeper's schema there.
    """
    _refuse_on_postgres(app, "backup --prune-forgotten" if prune_forgotten else "backup")
    store = app.store(create=False)
    if prune_forgotten:
        app.check_now(yes=yes)
        from memkeeper.storage.sqlite.backup_prune import prune

        manifest = prune(store.storage, dest_dir, now=store.now(), version=__version__)
        if as_json:
            print_json({"directory": str(dest_dir), **manifest})
            return
        counts = manifest["pruned"]
        click.echo(
            f"pruned backup {dest_dir} (taken {manifest['taken_at']}): "
            f"{_count(counts.get('tombstones', 0), 'tombstone')} it had not seen, "
            f"{_count(counts.get('memories', 0), 'memory')} erased; verified, "
            f"{_files_line(manifest)}"
        )
        return
    from memkeeper.storage.sqlite.backup import take

    manifest = take(store.storage, dest_dir, now=store.now(), version=__version__)
    if as_json:
        print_json({"directory": str(dest_dir), **manifest})
        return
    click.echo(
        f"backup written to {dest_dir}: {_files_line(manifest)}; verified (integrity check, "
        f"row counts); writers were held for {manifest['writers_blocked_ms']:.1f} ms"
    )


@click.command("restore-backup")
@click.argument("src_dir", type=click.Path(path_type=Path, file_okay=False))
@yes_option
@json_option
@pass_app
def restore_backup_command(app: App, src_dir: Path, yes: bool, as_json: bool) -> None:
    """Replace the memory database with the backup in SRC_DIR.

    Refused while the service or a job run holds its lock, or while another process has the
    database open: stop the service and the agents first. The backup is verified first
    (integrity, application ids, schema no newer than this memkeeper, row counts), erasures
    recorded since it was taken are applied to it, and the replaced files are kept beside
    the new ones as <name>.replaced-<UTC time>.

    Not on PostgreSQL (exit 2): use pg_restore of a pg_dump there.
    """
    _refuse_on_postgres(app, "restore-backup")
    app.check_now(yes=yes)
    hot, cold, _source = settings.database_paths(app.db, app.config)
    from memkeeper.maintenance.backup_restore import restore

    result = restore(
        src_dir,
        hot,
        cold,
        now=app.now or system_now(),
        busy_timeout_ms=app.config.database.busy_timeout_ms,
    )
    if as_json:
        print_json(result)
        return
    kept = [path for path in result["set_aside"].values() if path]
    click.echo(
        f"restored {src_dir} (taken {result['taken_at']}) into {result['hot']} and {result['cold']}"
    )
    erased = result["erased_since_backup"]
    if erased.get("erasures"):
        click.echo(
            f"applied {_count(erased['tombstones'], 'tombstone')} recorded since the backup was "
            f"taken ({_count(erased.get('memories', 0), 'memory')} erased again)"
        )
    click.echo(
        "the replaced files are kept as " + " and ".join(kept)
        if kept
        else "there were no files to replace"
    )


def register(group: click.Group) -> None:
    for command in (backup_command, restore_backup_command):
        group.add_command(command)
