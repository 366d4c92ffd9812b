"""Runs (``/runs``): every job run with its time, duration, outcome and changes; a run's page
(``/runs/<id>``) with its changes and their reasons; its undo, previewed first
(``/runs/<id>/undo``) and applied after a confirmation (a POST), as ``memkeeper undo``."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from memkeeper.audit.explain import describe_change
from memkeeper.config import JOB_ORDER
from memkeeper.maintenance.undo import entry_label, preview_changes, undo_run
from memkeeper.records import Change
from memkeeper.ui import html, reads
from memkeeper.ui.html import link, tag
from memkeeper.ui.pages_overview import minute
from memkeeper.ui.web import PER_PAGE, PageError, View

STATUSES = ("ok", "failed", "skipped", "partial", "running", "interrupted")


def run_href(run_id: str) -> str:
    return f"/runs/{quote(run_id, safe='')}"


def memory_href(memory_id: str) -> str:
    return f"/memories/{quote(memory_id, safe='')}"


def changes_text(counts: dict[str, Any]) -> str:
    changes = counts.get("changes") or {}
    if not isinstance(changes, dict):
        return str(changes)
    return ", ".join(f"{label} {n}" for label, n in sorted(changes.items())) or "none"


def filter_form(job: str | None, status: str | None) -> html.Html:
    def select(name: str, options: tuple[str, ...], chosen: str | None) -> html.Html:
        items = [tag("option", "any", value="")] + [
            tag("option", option, value=option, selected=option == chosen) for option in options
        ]
        return tag("label", f"{name} ", tag("select", *items, name=name))

    return tag(
        "form",
        select("job", (*JOB_ORDER, "undo"), job),
        " ",
        select("status", STATUSES, status),
        " ",
        html.button("Show"),
        method="get",
        action="/runs",
    )


async def runs_list(view: View) -> Any:
    view.require_admin()
    job, status, page = view.param("job"), view.param("status"), view.page_number()
    found, total = reads.runs(view.store, job=job, status=status, page=page, per_page=PER_PAGE)
    if view.wants_json:
        return view.json({"total": total, "page": page, "runs": [r.to_dict() for r in found]})
    rows = []
    for run in found:
        duration = reads.run_duration(run)
        rows.append(
            [
                link(run_href(run.run_id), run.run_id, data_run=run.run_id),
                run.job,
                run.trigger + (" (dry run)" if run.dry_run else ""),
                minute(run.started_at.isoformat()),
                "-" if duration is None else f"{duration:.2f} s",
                run.status,
                changes_text(run.counts),
            ]
        )
    params = {"job": job, "status": status}
    body = html.join(
        [
            filter_form(job, status),
            html.table(["run", "job", "trigger", "started", "took", "outcome", "changes"], rows),
            html.pager("/runs", params, page, PER_PAGE, total),
        ]
    )
    return view.render("Runs", body, here="/runs")


def change_rows(changes: list[Change]) -> list[list[Any]]:
    rows = []
    for change in changes:
        image = change.after or change.before or {}
        owner = (change.user_id or "-") + (f"/{change.namespace}" if change.namespace else "")
        label = image.get("kind", "-") + (f" {image['key']!r}" if image.get("key") else "")
        rows.append(
            [
                tag("span", f"#{change.id}", data_change=change.id),
                link(memory_href(change.memory_id), change.memory_id) if change.memory_id else "-",
                owner,
                label,
                change.action,
                describe_change(change),
            ]
        )
    return rows


CHANGES_PER_PAGE = 200


async def run_page(view: View, run_id: str) -> Any:
    view.require_admin()
    page = view.page_number()
    run = reads.run(view.store, run_id)
    changes, total = reads.run_changes(view.store, run_id, page=page, per_page=CHANGES_PER_PAGE)
    if run is None and not total:
        raise PageError(404, "no such run in the job runs or the change log")
    if view.wants_json:
        return view.json(
            {
                "run": run.to_dict() if run else None,
                "total": total,
                "page": page,
                "changes": [c.to_dict() for c in changes],
            }
        )
    facts: list[Any] = []
    if run is not None:
        duration = reads.run_duration(run)
        facts = [
            ["job", run.job],
            ["trigger", run.trigger + (" (dry run)" if run.dry_run else "")],
            ["started", minute(run.started_at.isoformat())],
            ["took", "-" if duration is None else f"{duration:.3f} s"],
            ["outcome", run.status],
            ["changes", changes_text(run.counts)],
        ]
        if run.error:
            facts.append(["error", run.error])
        stats = run.counts.get("stats") or {}
        if stats:
            shown = {k: v for k, v in stats.items() if not str(k).startswith("_")}
            facts.append(["stats", ", ".join(f"{k} {v}" for k, v in shown.items())])
    body = [
        html.table(["", ""], facts) if facts else "",
        tag("h2", f"{total} change(s)"),
        html.table(
            ["change", "memory", "owner", "what", "action", "what happened and why"],
            change_rows(changes),
            class_="changes",
        ),
        html.pager(run_href(run_id), {}, page, CHANGES_PER_PAGE, total),
    ]
    if total:
        body.append(tag("p", link(f"{run_href(run_id)}/undo", "Undo this run… (preview first)")))
    return view.render(f"Run {run_id}", html.join(body), here="/runs")


def undo_report_body(report: Any, store: Any, judged: list[Change] | None = None) -> list[Any]:
    """What an undo did or would do; ``judged``: the page of changes a paged preview judged
    (None: the whole run was judged, and its first page is listed)."""
    verb = "would revert" if report.dry_run else "reverted"
    body: list[Any] = [
        tag(
            "p",
            f"{verb} ",
            tag("b", len(report.reverted), data_figure="reverted"),
            f" change(s) of run {report.undone_run}",
            "" if report.dry_run else f" [run {report.run_id}]",
        )
    ]
    if report.reverted:
        reverted = set(report.reverted)
        if judged is None:
            judged, _ = reads.run_changes(
                store, report.undone_run, page=1, per_page=CHANGES_PER_PAGE
            )
        changes = [c for c in judged if c.id in reverted]
        body.append(
            html.table(
                ["change", "memory", "owner", "what", "action", "what happened and why"],
                change_rows(changes),
                class_="reverted",
            )
        )
        if len(changes) < len(reverted):
            body.append(tag("p", f"… and {len(reverted) - len(changes)} more", class_="note"))
    if report.already_undone:
        body.append(tag("p", f"already undone: {len(report.already_undone)}"))
    conflicts = list(report.conflicts.items())
    if conflicts:
        body.append(tag("p", f"conflicts: {len(conflicts)} (left alone)", data_figure="conflicts"))
    for change_id, why in conflicts[:CHANGES_PER_PAGE]:
        entry = entry_label(report.conflict_entries[change_id])
        body.append(tag("p", f"conflict: change #{change_id} of {entry}: {why}", class_="warn"))
    if len(conflicts) > CHANGES_PER_PAGE:
        body.append(tag("p", f"… and {len(conflicts) - CHANGES_PER_PAGE} more", class_="note"))
    for note in report.notes:
        body.append(tag("p", f"note: {note}", class_="note"))
    return body


async def undo_preview(view: View, run_id: str) -> Any:
    """What undo would do, before it is done. A run of up to one page of changes is judged
    whole (``undo --dry-run``); a larger one a page at a time, so that a run of 50,000
    changes previews as fast as one of 200 (the apply judges every change again)."""
    view.require_admin()
    page = view.page_number()
    changes, total = reads.run_changes(view.store, run_id, page=page, per_page=CHANGES_PER_PAGE)
    paged = total > CHANGES_PER_PAGE
    if paged:
        report = preview_changes(view.store, run_id, changes)
    else:
        report = undo_run(view.store, run_id, dry_run=True)
    if view.wants_json:
        judged = {"total": total, "page": page, "judged": len(changes) if paged else total}
        return view.json({**report.to_dict(), **judged})
    body: list[Any] = []
    if paged:
        first = (page - 1) * CHANGES_PER_PAGE + 1
        body.append(
            tag(
                "p",
                f"This run made {total:,} changes; this page judges changes {first:,} to "
                f"{first + len(changes) - 1:,} (oldest first). Undo reverts all of them, "
                "judging each again as it goes.",
                class_="note",
            )
        )
    body.extend(undo_report_body(report, view.store, changes if paged else None))
    if paged:
        body.append(html.pager(f"{run_href(run_id)}/undo", {}, page, CHANGES_PER_PAGE, total))
    if not view.plan.allow_writes:
        body.append(
            tag("p", "Read-only: start memkeeper ui with --allow-writes to undo.", class_="note")
        )
    elif report.reverted or paged:
        body.append(
            html.form(
                f"{run_href(run_id)}/undo",
                view.csrf,
                html.button("Undo this run", name="confirm", value="yes", id="confirm-undo"),
            )
        )
    return view.render(f"Undo run {run_id}: preview", html.join(body), here="/runs")


async def undo_apply(view: View, run_id: str) -> Any:
    view.require_admin()
    view.require_writes()
    fields = await view.form()
    if fields.get("confirm") != ["yes"]:
        raise PageError(400, "confirm the undo from its preview")
    report = undo_run(view.store, run_id)
    view.changed()
    if view.wants_json:
        return view.json(report.to_dict())
    body = undo_report_body(report, view.store)
    body.append(tag("p", link(run_href(report.run_id), f"the undo's own run: {report.run_id}")))
    return view.render(f"Undone: run {run_id}", html.join(body), here="/runs")
