"""Commands that look at memory and its history: list, log, explain, status, history."""

from __future__ import annotations

from typing import Any

import click

from memkeeper.audit import ACTION_VERBS, describe_change
from memkeeper.cli import App, json_option, namespace_option, pass_app, print_json
from memkeeper.cli.render import memory_table
from memkeeper.daemon import service_state
from memkeeper.records import KINDS, STATES
from memkeeper.schedule_info import job_schedule_status


@click.command("list")
@click.option("-u", "--user", help="Only this user's memories.")
@click.option("-n", "--namespace", help="Only this namespace ('' for none).")
@click.option("--state", type=click.Choice(STATES), help="Only entries in this state.")
@click.option("--kind", type=click.Choice(KINDS), help="Only this kind.")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many.")
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
    """List memories (hot and cold), oldest first."""
    memories = app.store().list_memories(user, namespace=namespace, state=state, kind=kind)
    if limit is not None:
        memories = memories[:limit]
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
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="At most this many (the newest).",
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
    """Show the change log, oldest first: who changed what, when and why."""
    changes = app.store().changes(
        memory_id=memory_id,
        run_id=run_id,
        user_id=user,
        namespace=namespace,
        action=action,
        limit=limit,
        newest_first=True,
    )
    changes.reverse()
    if as_json:
        print_json([change.to_dict() for change in changes])
        return
    if not changes:
        click.echo("(no changes)")
    for change in changes:
        target = change.memory_id or "-"
        click.echo(f"#{change.id} {target}  {describe_change(change)}")


@click.command()
@click.argument("memory_id")
@json_option
@pass_app
def explain(app: App, memory_id: str, as_json: bool) -> None:
    """Tell one memory's whole life in plain words. Exit 3 if it never existed."""
    store = app.store()
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
        click.echo(text)


@click.command()
@click.argument("user")
@click.argument("session")
@namespace_option
@click.option("--limit", type=click.IntRange(min=1), help="Only the newest this many.")
@json_option
@pass_app
def history(
    app: App, user: str, session: str, namespace: str, limit: int | None, as_json: bool
) -> None:
    """Show a session's unsummarized messages, oldest first."""
    messages = app.store().history(user, session, namespace=namespace, limit=limit)
    if as_json:
        print_json([message.to_dict() for message in messages])
        return
    for message in messages:
        click.echo(f"[{message.created_at:%Y-%m-%d %H:%M}] {message.role}: {message.content}")


def _human_size(size: int | None) -> str:
    if size is None:
        return "absent"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def status_data(app: App) -> dict[str, Any]:
    store = app.store()
    data = store.status()
    now = store.now()
    data["now"] = now.isoformat()
    data["jobs"] = job_schedule_status(store.config, data["last_runs"], now)
    data["service"] = service_state(store.path)
    data["last_runs"] = {job: run.to_dict() for job, run in data["last_runs"].items()}
    return data


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
    click.echo(f"database:  {files['hot']['path']} ({_human_size(files['hot']['bytes']['db'])})")
    click.echo(f"cold:      {files['cold']['path']} ({_human_size(files['cold']['bytes']['db'])})")
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
    service = data["service"]
    click.echo(
        f"service:   running (pid {service['pid']})"
        if service["running"]
        else "service:   not running (memkeeper run, or memkeeper service install)"
    )
    click.echo("jobs:")
    for job in data["jobs"]:
        last = job["last_run"]
        last_text = (
            f"last {last['status']} {last['started_at'][:16].replace('T', ' ')} UTC"
            if last
            else "never run"
        )
        state = "" if job["enabled"] else " (disabled)"
        click.echo(
            f"  {job['job']:<10} {job['schedule']:<14} {last_text}; next "
            f"{job['next_run'] or '-'}{state}"
        )
        if last and last.get("error"):
            click.echo(f"             {last['status']}: {last['error']}")
        stats = (last or {}).get("counts", {}).get("stats")
        if stats:
            click.echo("             " + ", ".join(f"{k} {v}" for k, v in stats.items()))


def register(group: click.Group) -> None:
    for command in (list_command, log, explain, history, status):
        group.add_command(command)
