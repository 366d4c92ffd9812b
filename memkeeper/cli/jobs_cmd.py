"""Commands that run and correct the maintenance jobs: run-once, review, restore, undo."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import click

from memkeeper.cli import App, json_option, pass_app, print_json, required_text, yes_option
from memkeeper.cli.progress import TerminalProgress
from memkeeper.cli.render import LINE_LIMIT, memory_label, memory_table, owner, shown
from memkeeper.config import JOB_ORDER
from memkeeper.errors import JobFailed, MemkeeperError, NotFound
from memkeeper.maintenance import curation
from memkeeper.maintenance.locks import set_takeover
from memkeeper.maintenance.runner import JobResult, RunReport, run_once
from memkeeper.maintenance.undo import entry_label, undo_run


@contextlib.contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """SIGINT/SIGTERM ask the running job to finish its batch and stop."""
    event = threading.Event()

    def handler(signum: int, _frame: object) -> None:
        event.set()
        click.echo(
            f"memkeeper: {signal.Signals(signum).name}: finishing the current batch", err=True
        )

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield event
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _summary_line(result: JobResult) -> str:
    counts = ", ".join(f"{label} {n}" for label, n in sorted(result.counts.items()))
    verb = "would change" if result.dry_run else "changed"
    text = f"{result.job:<10} {result.status:<11} {verb} {result.total_changes}"
    if counts:
        text += f" ({counts})"
    if result.skipped_entries:
        text += f"; {result.skipped_entries} left alone (used or changed meanwhile)"
    if result.stats:
        text += "; " + ", ".join(
            f"{k} {v}" for k, v in result.stats.items() if not k.startswith("_")
        )
    if result.error:
        text += f"; {shown(result.error)}"
    if not result.dry_run:
        text += f"  [run {result.run_id}]"
    return text


def _database_of(store: Any) -> dict[str, Any]:
    """Which database the run used (its path, or its URL with the password masked), and
    whether opening it for this run created it."""
    return {"database": str(store.path), "database_created": store.storage.created}


def _database_line(store: Any) -> str:
    """``Database:  PATH`` as ``status`` begins, and ``(new: created by this run)`` when it is."""
    used = _database_of(store)
    created = " (new: created by this run)" if used["database_created"] else ""
    return f"Database:  {used['database']}{created}"


def _print_report(report: RunReport) -> None:
    for result in report.results:
        click.echo(_summary_line(result))
        if result.dry_run:
            for change in result.changes:
                click.echo(
                    f"    would {change.label:<24} {change.memory_id}  "
                    f"{owner(change.user_id, change.namespace)} "
                    f"{memory_label(change.kind, change.key)}: {shown(change.reason)}"
                )
            more = result.total_changes - len(result.changes)
            if more > 0:
                click.echo(f"    ... and {more} more (not listed)")


@click.command("run-once")
@click.option(
    "--job",
    "jobs",
    multiple=True,
    type=click.Choice(JOB_ORDER),
    help="Run only this job (repeatable). Default: every enabled job.",
)
@click.option(
    "--due",
    is_flag=True,
    help="Run only the jobs whose scheduled time has passed since their last success "
    "(what a systemd timer runs).",
)
@click.option("--dry-run", is_flag=True, help="Change nothing; print what would change and why.")
@click.option(
    "--wait",
    "wait_seconds",
    type=click.FloatRange(0, 86_400),
    default=None,
    help="Seconds to wait for a job running elsewhere (another host, the service); 0 refuses "
    "at once. Default: service.lock_wait_seconds.",
)
@yes_option
@json_option
@pass_app
def run_once_command(
    app: App,
    jobs: tuple[str, ...],
    due: bool,
    dry_run: bool,
    wait_seconds: float | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Run the maintenance jobs once, now.

    Jobs run in this order: settle, expire, demote, prune, index, merge, retain, summarize.
    With --due, only those whose schedule came round since their last success run (for
    timers). Exit 0 when every job succeeded (or was skipped), 4 when one failed, 75 when
    a run of the same job (or an undo) holds its lock longer than --wait (default
    service.lock_wait_seconds); the message names the holder (pid and host: on PostgreSQL
    the locks are the whole fleet's, so a run-once on any host waits for the same job run
    by the service on another). Runs of different jobs do not wait for each other; prune
    runs alone. With --now and
    --dry-run this is a what-if preview: memkeeper --now 2027-03-01 run-once --dry-run (a
    real run at a --now more than a minute from the real clock needs --yes).
    """
    app.check_now(yes=yes, dry_run=dry_run)
    store = app.store()
    set_takeover(store.storage, store.config.service.takeover_seconds)
    progress = TerminalProgress() if sys.stderr.isatty() and not as_json else None
    if due and jobs:
        raise click.UsageError("--due picks the jobs itself; it cannot be combined with --job")
    with stop_on_signals() as stop:
        if due:
            # --due needs the service's triggers (and APScheduler): loaded only here.
            from memkeeper.service.scheduler import run_due

            report = run_due(
                store,
                now=app.now,
                dry_run=dry_run,
                stop_event=stop,
                progress=progress,
                lock_wait_seconds=wait_seconds,
            )
        else:
            report = run_once(
                store,
                list(jobs) or None,
                now=app.now,
                dry_run=dry_run,
                stop_event=stop,
                progress=progress,
                lock_wait_seconds=wait_seconds,
            )
    if as_json:
        # A dry run's JSON lists the planned changes, as its text does.
        document = report.to_dict(with_changes=dry_run)
        document.update(_database_of(store))
        print_json(document)
    else:
        click.echo(_database_line(store))
        _print_report(report)
    if not report.ok:
        failed = [r.job for r in report.results if r.status == "failed"]
        raise JobFailed(f"job(s) failed: {', '.join(failed)}")


@click.group()
def review() -> None:
    """Entries pending review: list them, keep them, or drop them."""


@review.command("list")
@click.option("-u", "--user", help="Only this user's entries.")
@click.option("-n", "--namespace", help="Only this namespace.")
@json_option
@pass_app
def review_list(app: App, user: str | None, namespace: str | None, as_json: bool) -> None:
    """List entries pending review (unused past their TTL), oldest first."""
    memories = app.store(create=False).list_memories(
        user, namespace=namespace, state="pending_review"
    )
    if as_json:
        print_json([memory.to_dict() for memory in memories])
    else:
        click.echo(memory_table(memories))


def _report_curation(
    report: curation.CurationReport,
    verb: str,
    as_json: bool,
    describe: Callable[[str], str] | None = None,
) -> None:
    """Print what was done and what was refused; exit 3 if an id names no memory."""
    if as_json:
        print_json(report.to_dict())
    else:
        for memory_id in report.done:
            click.echo(describe(memory_id) if describe else f"{verb} {memory_id}")
        for memory_id, why in report.refused.items():
            if memory_id not in report.missing:
                click.echo(f"not {verb} {shown(memory_id, LINE_LIMIT)}: {why}", err=True)
    if report.missing:
        names = ", ".join(repr(memory_id) for memory_id in report.missing)
        plural = "ies with ids" if len(report.missing) > 1 else "y with id"
        done = f" ({len(report.done)} other(s) {verb})" if report.done else ""
        raise NotFound(f"no memor{plural} {names}{done}")
    if report.refused and not report.done:
        raise MemkeeperError(f"nothing {verb}")


@review.command("keep")
@click.argument("ids", nargs=-1, required=True, callback=required_text)
@yes_option
@json_option
@pass_app
def review_keep(app: App, ids: tuple[str, ...], yes: bool, as_json: bool) -> None:
    """Keep entries: active again and re-confirmed. Exit 3 if an id names no memory."""
    app.check_now(yes=yes)
    _report_curation(curation.keep(app.store(create=False), ids), "kept", as_json)


@review.command("drop")
@click.argument("ids", nargs=-1, required=True, callback=required_text)
@yes_option
@json_option
@pass_app
def review_drop(app: App, ids: tuple[str, ...], yes: bool, as_json: bool) -> None:
    """Drop entries: retire them to cold storage now. Exit 3 if an id names no memory."""
    app.check_now(yes=yes)
    _report_curation(curation.drop(app.store(create=False), ids), "dropped", as_json)


def _restored_line(store: Any, report: curation.CurationReport, memory_id: str) -> str:
    """'restored X: fact 'city' = 'Beijing' is current again; Y ('Shanghai') superseded'."""
    memory = store.get(memory_id)
    if memory is None or memory.key is None:
        return f"restored {memory_id}"
    label = memory_label(memory.kind, memory.key)
    text = f"restored {memory_id}: {label} = '{shown(memory.value, LINE_LIMIT)}' is current"
    previous_id = report.replaced.get(memory_id)
    previous = store.get(previous_id) if previous_id else None
    if previous is not None:
        text += (
            f" again, replacing {previous.id} ('{shown(previous.value, LINE_LIMIT)}'), "
            "which is now superseded"
        )
    return text


@click.command()
@click.argument("ids", nargs=-1, required=True, callback=required_text)
@yes_option
@json_option
@pass_app
def restore(app: App, ids: tuple[str, ...], yes: bool, as_json: bool) -> None:
    """Bring entries back from cold storage, active and re-confirmed.

    A restored value whose key has another current value becomes current again, and the
    other value is superseded: the output names both. Exit 3 if an id names no memory.
    """
    app.check_now(yes=yes)
    store = app.store(create=False)
    report = curation.restore(store, ids)
    _report_curation(
        report, "restored", as_json, lambda memory_id: _restored_line(store, report, memory_id)
    )


@click.command()
@click.argument("run_id", callback=required_text)
@click.option("--dry-run", is_flag=True, help="Show what would be reverted; change nothing.")
@yes_option
@json_option
@pass_app
def undo(app: App, run_id: str, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Revert every change of RUN_ID, newest first, as a new logged run.

    Entries changed since that run are left alone and reported as conflicts, each naming the
    entry; undoing twice is harmless. Erasures (forget) cannot be undone. Undoing a prune
    brings facts back over the cap: the next prune retires them again unless they are pinned
    or [jobs.prune] max_facts is raised, and undo says so. Exit 3 for an unknown run.
    """
    app.check_now(yes=yes, dry_run=dry_run)
    report = undo_run(app.store(create=False), run_id, now=app.now, dry_run=dry_run)
    if as_json:
        print_json(report.to_dict())
        return
    verb = "would revert" if dry_run else "reverted"
    click.echo(
        f"{verb} {len(report.reverted)} change(s) of run {shown(run_id, LINE_LIMIT)}"
        + ("" if dry_run else f" [run {report.run_id}]")
    )
    if report.already_undone:
        click.echo(f"  already undone: {len(report.already_undone)}")
    for change_id, why in report.conflicts.items():
        entry = entry_label(report.conflict_entries[change_id])
        click.echo(f"  conflict: change #{change_id} of {shown(entry)}: {shown(why)}")
    for note in report.notes:
        click.echo(f"  note: {shown(note)}")


def register(group: click.Group) -> None:
    for command in (run_once_command, review, restore, undo):
        group.add_command(command)
