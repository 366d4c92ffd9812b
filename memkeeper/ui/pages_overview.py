"""The overview (``/``): memories by state and kind, 90 days of changes, the database's
size, search by meaning, the jobs' last and next runs, and what needs an operator."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from memkeeper.records import KINDS, STATES
from memkeeper.service.schedule_info import human_size
from memkeeper.ui import chart, html, reads
from memkeeper.ui.html import link, tag
from memkeeper.ui.web import View


def minute(iso: str | None) -> str:
    return "-" if not iso else iso[:16].replace("T", " ") + " UTC"


def counts_table(counts: dict[str, dict[str, int]]) -> html.Html:
    rows = []
    for state in STATES:
        kinds = counts.get(state, {})
        cells: list[Any] = [state]
        for kind in KINDS:
            cells.append(tag("span", kinds.get(kind, 0), data_figure=f"{state}.{kind}"))
        cells.append(tag("b", sum(kinds.values()), data_figure=f"{state}.total"))
        rows.append(cells)
    return html.table(["state", *KINDS, "total"], rows, class_="counts")


def jobs_table(jobs: list[dict[str, Any]]) -> html.Html:
    rows = []
    for job in jobs:
        last = job["last_run"]
        changes = (last or {}).get("counts", {}).get("changes") or {}
        rows.append(
            [
                job["job"],
                job["schedule"] + ("" if job["enabled"] else " (disabled)"),
                link(f"/runs/{last['run_id']}", minute(last["started_at"])) if last else "never",
                tag("span", last["status"], data_job_status=job["job"]) if last else "-",
                ", ".join(f"{k} {v}" for k, v in sorted(changes.items())) or "-",
                tag("span", minute(job["next_run"]), data_next_run=job["job"]),
            ]
        )
    return html.table(["job", "schedule", "last run", "outcome", "changes", "next run"], rows)


def overview_body(data: dict[str, Any]) -> html.Html:
    hot = data["files"]["hot"]
    cold = data["files"].get("cold")
    search = data.get("search") or {}
    entries, embedded = search.get("entries") or 0, search.get("embedded") or 0
    cards = [
        ("memories", sum(sum(k.values()) for k in data["counts"].values()), "memories"),
        ("messages", data["messages"]["total"], "messages"),
        ("unsummarized", data["messages"]["unsummarized"], "unsummarized"),
        ("episodes", data["episodes"], "episodes"),
        ("database", human_size(hot["bytes"]["db"]), "db_bytes"),
        ("change log rows", hot["tables"].get("changes", {}).get("rows", 0), "changes"),
        ("embedded", f"{embedded / entries:.0%}" if entries else "-", "embedded"),
    ]
    if cold is not None:
        cards.insert(5, ("cold file", human_size(cold["bytes"]["db"]), "cold_bytes"))
    figures = data["chart"]
    created = figures["series"].get("created", {})
    cards.append(  # the memory's growth: entries written in the chart's last 30 days
        (
            "new in the last 30 days",
            sum(created.get(day, 0) for day in figures["days"][-30:]),
            "created_30_days",
        )
    )
    warnings = [tag("p", warning, class_="warn") for warning in data["operator_warnings"]]
    graph = chart.stacked_bars(
        figures["days"], figures["series"], title="changes per day, last 90 days"
    )
    model = f" ({search['model']})" if search.get("model") else ""
    search_line = f"{embedded} of {entries} live entries have a vector{model}; " + (
        f"search is keyword-only: {search['keyword_only']}"
        if search.get("keyword_only")
        else "search works by meaning and keywords"
    )
    service = data["service"]
    return html.join(
        [
            *warnings,
            tag(
                "div",
                *(
                    tag("div", tag("b", value, data_figure=key), label, class_="card")
                    for label, value, key in cards
                ),
                class_="cards",
            ),
            tag("h2", "Memories by state and kind"),
            counts_table(data["counts"]),
            tag("h2", "Changes per day, last 90 days"),
            graph,
            tag("h2", "Search"),
            tag("p", search_line, data_search=True),
            tag("h2", "Jobs"),
            tag(
                "p",
                f"service running (pid {service['pid']})"
                if service.get("running")
                else "service not running (memkeeper run, or memkeeper service install)",
                class_="note",
            ),
            jobs_table(data["jobs"]),
            tag("p", f"database: {hot['path']}", class_="note"),
        ]
    )


async def overview(view: View) -> Any:
    if not view.principal.admin:
        from starlette.responses import RedirectResponse

        return RedirectResponse(f"/users/{quote(view.principal.user or '', safe='')}", 303)
    if view.overview is not None:
        data, age = view.overview.get()
    else:
        data, age = reads.overview(view.store), 0.0
    if view.wants_json:
        return view.json({**data, "age_seconds": round(age, 1)})
    body = overview_body(data)
    if age:
        note = f"figures as of {age:.0f} s ago (a large memory: refreshed in the background)"
        body = html.join([tag("p", note, class_="note"), body])
    return view.render("Overview", body, here="/")
