"""Commands that look at memory and its history: list, log, explain, status, history."""

from __future__ import annotations

from typing import Any

import click

from memkeeper.audit.explain import ACTION_VERBS, describe_change
from memkeeper.cli import (
    App,
    json_option,
    limit_type,
    namespace_option,
    pass_app,
    print_json,
    required_text,
)
from memkeeper.cli.render import VALUE_LIMIT, memory_label, memory_table, owner, shown, shown_lines
from memkeeper.errors import NotFound
from memkeeper.records import KINDS, STATES, Change
from memkeeper.service.schedule_info import human_size, status_report
from memkeeper.storage import job_runs
from memkeeper.storage.messages import session_exists


@click.command("list")
@click.option("-u", "--user", help="Only this user's memories.")
@click.option("-n", "--namespace", help="Only this namespace ('' for none).")
@click.option("--state", type=click.Choice(STATES), help="Only entries in this state.")
@click.option("--kind", type=click.Choice(KINDS), help="Only this kind.")
@click.option(
    "--limit",
    type=limit_type(),
    help="Only the newest this many (by creation time), still printed oldest first.",
)
@json_option
@pass_app
def list_command(
    app: App,
    user: str | None,
    namespace: str | None,
    state: str | None,
    kind: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """List memories (hot and cold), oldest first (by creation time).

    A filter that matches nothing prints '(no memories)'. The text form escapes control
    characters and cuts long values (marked); --json keeps the exact text.
    """
    memories = app.store(create=False).list_memories(
        user, namespace=namespace, state=state, kind=kind
    )
    memories.sort(key=lambda memory: (memory.created_at, memory.id))
    if limit is not None:
        memories = memories[-limit:]
    if as_json:
        print_json([memory.to_dict() for memory in memories])
    else:
        click.echo(memory_table(memories))


@click.command()
@click.option("--memory", "memory_id", help="Only changes to this memory.")
@click.option("--run", "run_id", help="Only changes made by this job run.")
@click.option("-u", "--user", help="Only changes to this user's memories.")
@click.option("-n", "--namespace", help="Only this namespace.")
@click.option("--action", type=click.Choice(sorted(ACTION_VERBS)), help="Only this action.")
@click.option(
    "--limit",
    type=limit_type(),
    default=100,
    show_default=True,
    help="Only the newest this many changes, still printed oldest first.",
)
@json_option
@pass_app
def log(
    app: App,
    memory_id: str | None,
    run_id: str | None,
    user: str | None,
    namespace: str | None,
    action: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Show the change log, oldest first: who changed what, when and why.

    Each line: change number, memory id, owner, what the memory is, then when, what and who.
    Exit 3 if --memory or --run names a memory or run memkeeper does not know.
    """
    store = app.store(create=False)
    changes = store.changes(
        memory_id=memory_id,
        run_id=run_id,
        user_id=user,
        namespace=namespace,
        action=action,
        limit=limit,
        newest_first=True,
    )
    changes.reverse()
    if not changes:
        _check_known(store, memory_id, run_id)
    if as_json:
        print_json([change.to_dict() for change in changes])
        return
    if not changes:
        click.echo("(no changes)")
    for change in changes:
        click.echo(change_line(change))


def change_line(change: Change) -> str:
    """One change-log row as one line: number, memory, owner and key, then what happened."""
    image = change.after or change.before or {}
    return (
        f"#{change.id} {change.memory_id or '-'} {owner(change.user_id, change.namespace)} "
        f"{memory_label(image.get('kind'), image.get('key')) if image else '-'}  "
        f"{shown(describe_change(change), VALUE_LIMIT)}"
    )


def _check_known(store: Any, memory_id: str | None, run_id: str | None) -> None:
    """Exit 3 for a --memory or --run that names nothing memkeeper knows."""
    if (
        memory_id is not None
        and store.get(memory_id) is None
        and not store.changes(memory_id=memory_id, limit=1)
    ):
        raise NotFound(f"no memory with id {memory_id!r}, and no change recorded for one")
    if (
        run_id is not None
        and not store.changes(run_id=run_id, limit=1)
        and not job_runs.exists(store.storage.hot, run_id)
    ):
        raise NotFound(f"no run {run_id!r} in the job runs or the change log")


@click.command()
@click.argument("memory_id", callback=required_text)
@json_option
@pass_app
def explain(app: App, memory_id: str, as_json: bool) -> None:
    """Tell one memory's whole life in plain words. Exit 3 if it never existed."""
    store = app.store(create=False)
    text = store.explain(memory_id)
    if as_json:
        memory = store.get(memory_id)
        print_json(
            {
                "memory": memory.to_dict() if memory else None,
                "changes": [c.to_dict() for c in store.changes(memory_id=memory_id)],
                "text": text,
            }
        )
    else:
        click.echo(shown_lines(text))


@click.command()
@click.argument("user", callback=required_text)
@click.argument("session", callback=required_text)
@namespace_option
@click.option(
    "--limit",
    type=limit_type(),
    help="Only the newest this many messages, still printed oldest first.",
)
@json_option
@pass_app
def history(
    app: App, user: str, session: str, namespace: str, limit: int | None, as_json: bool
) -> None:
    """Show a session's unsummarized messages, oldest first.

    Exit 3 if USER has no session SESSION (in that namespace). Each message is one line:
    control characters (newlines too) are escaped and very long messages cut (marked);
    --json keeps the exact text.
    """
    store = app.store(create=False)
    messages = store.history(user, session, namespace=namespace, limit=limit)
    if not messages and not _session_known(store, user, namespace, session):
        raise NotFound(
            f"no session {session!r} for user {user!r}"
            + (f" in namespace {namespace!r}" if namespace else "")
        )
    if as_json:
        print_json([message.to_dict() for message in messages])
        return
    if not messages:
        click.echo("(no unsummarized messages)")
    for message in messages:
        click.echo(
            f"[{message.created_at:%Y-%m-%d %H:%M}] {shown(message.role, 20)}: "
            f"{shown(message.content)}"
        )


def _session_known(store: Any, user: str, namespace: str, session: str) -> bool:
    """Whether the session has any message at all, summarized or not."""
    return session_exists(store.storage.hot, user, namespace, session)


def _file_summary(file: dict[str, Any]) -> str:
    """``1.2 MiB, WAL 32.0 KiB, 12 free pages``: a file's size at a glance."""
    sizes = file["bytes"]
    if sizes["db"] is None:
        return "absent"
    parts = [human_size(sizes["db"])]
    if sizes.get("wal"):
        parts.append(f"WAL {human_size(sizes['wal'])}")
    pages = file.get("pages")
    if pages and pages["freelist_count"]:
        free = pages["freelist_count"]
        parts.append(f"{free} free page{'s' if free != 1 else ''}")
    return ", ".join(parts)


def _server_summary(database: dict[str, Any], files: dict[str, Any]) -> str:
    """``PostgreSQL 18.3, schema memkeeper at 0001_initial, 1.2 MiB, pool 1 of 4 open, 1 in
    use``: the server at a glance."""
    version = database["schema_version"] or "none"
    if not database["schema_current"]:
        version += " (not current)"
    size = human_size(files["hot"]["bytes"]["db"])
    line = (
        f"PostgreSQL {database['server_version']}, schema {database['schema']} at {version}, {size}"
    )
    pool = database.get("pool")
    if pool:
        line += f", pool {pool['open']} of {pool['size']} open, {pool['in_use']} in use"
    return line


def status_data(app: App) -> dict[str, Any]:
    store = app.store(create=False)
    data = status_report(store)
    from memkeeper.cli.summarize_cmd import parked_list

    now = store.now()
    data["parked_sessions"] = [item.to_dict(now) for item in parked_list(app)[1]]
    return data


def _utc_minute(iso: str) -> str:
    """One time format on the status screen: ``2026-12-02 03:15 UTC`` (the JSON keeps ISO)."""
    from datetime import UTC, datetime

    return f"{datetime.fromisoformat(iso).astimezone(UTC):%Y-%m-%d %H:%M} UTC"


@click.command()
@json_option
@pass_app
def status(app: App, as_json: bool) -> None:
    """Counts per state and kind, the files and their sizes, and each job's runs."""
    data = status_data(app)
    if as_json:
        print_json(data)
        return
    files = data["files"]
    # One column width for every table name (the keyword index's are the longest).
    width = max([15, *(len(name) for f in files.values() for name in f["tables"])])
    shown_files = [("database:", files["hot"], _file_summary(files["hot"]))]
    if "database" in data:  # PostgreSQL: one database, cold storage among its tables
        shown_files[0] = ("database:", files["hot"], _server_summary(data["database"], files))
    else:
        shown_files.append(("cold:", files["cold"], _file_summary(files["cold"])))
    for label, file, summary in shown_files:
        click.echo(f"{label:<10} {shown(file['path'], None)} ({summary})")
        for name, table in file["tables"].items():
            size = "" if table["bytes"] is None else human_size(table["bytes"])
            rows = "row " if table["rows"] == 1 else "rows"
            click.echo(f"  {name:<{width}} {table['rows']:>9} {rows}  {size}".rstrip())
    for warning in data["warnings"]:
        click.echo(f"warning:   {shown(warning, None)}")
    click.echo("memories:")
    if not data["counts"]:
        click.echo("  (none yet)")
    for state in STATES:
        kinds = data["counts"].get(state)
        if kinds:
            detail = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
            click.echo(f"  {state:<15} {sum(kinds.values()):>7}  ({detail})")
    messages = data["messages"]
    click.echo(
        f"messages:  {messages['total']} ({messages['unsummarized']} unsummarized); "
        f"episodes: {data['episodes']}"
    )
    if data["parked_sessions"]:
        from memkeeper.cli.summarize_cmd import parked_lines

        click.echo(
            f"parked:    {len(data['parked_sessions'])} session(s) the model will not summarize"
        )
        for line in parked_lines(data["parked_sessions"]):
            click.echo(f"  {line}")
    search = data["search"]
    click.echo(
        f"search:    keyword-only: {shown(search['keyword_only'], None)}"
        if search["keyword_only"]
        else f"search:    by meaning and keywords ({search['model']}, {search['embedded']} of "
        f"{search['entries']} entries embedded)"
    )
    service = data["service"]
    click.echo(
        f"service:   running (pid {service['pid']})"
        if service["running"]
        else "service:   not running (memkeeper run, or memkeeper service install)"
    )
    from memkeeper.cli.fleet_render import fleet_lines

    for line in fleet_lines(service):
        click.echo(line)
    click.echo("jobs:")
    for job in data["jobs"]:
        last = job["last_run"]
        last_text = (
            f"last {last['status']} {_utc_minute(last['started_at'])}" if last else "never run"
        )
        state = "" if job["enabled"] else " (disabled)"
        click.echo(
            f"  {job['job']:<10} {job['schedule']:<14} {last_text}; next "
            f"{_utc_minute(job['next_run']) if job['next_run'] else '-'}{state}"
        )
        if last and last.get("error"):
            click.echo(f"             {last['status']}: {shown(last['error'])}")
        stats = (last or {}).get("counts", {}).get("stats")
        if stats:
            shown_stats = ", ".join(f"{k} {v}" for k, v in stats.items() if not k.startswith("_"))
            click.echo("             " + shown(shown_stats))


def register(group: click.Group) -> None:
    for command in (list_command, log, explain, history, status):
        group.add_command(command)
