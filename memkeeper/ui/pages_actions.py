"""The pages that change the memory (with ``--allow-writes``): the review queue
(``/review``: keep, let go, forget; one or many, as ``review keep``, ``review drop`` and
``forget-id``), a forget request (``/forget``: previewed first, then erased as ``forget``,
``forget-namespace`` or ``forget-user``) with the list of past erasures; and signing in."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from memkeeper.maintenance import curation
from memkeeper.ui import html, reads
from memkeeper.ui.html import link, tag
from memkeeper.ui.pages_memories import MEMORY_HEADERS, memory_rows, user_href
from memkeeper.ui.pages_overview import minute
from memkeeper.ui.web import PER_PAGE, PageError, View

REVIEW_ACTIONS = ("keep", "let go", "forget")
MAX_IDS = 1000


async def review_page(view: View, done: list[Any] | None = None) -> Any:
    principal = view.principal
    page = view.page_number()
    pending, total = reads.pending(view.store, principal.user, page=page, per_page=PER_PAGE)
    grace = view.store.config.jobs.expire.review_grace_days
    now = view.store.now()
    if view.wants_json:
        return view.json([m.to_dict() for m in pending])
    rows = memory_rows(pending, selectable=view.plan.allow_writes, owners=True)
    for memory, row in zip(pending, rows, strict=True):
        left = (memory.state_since + timedelta(days=grace) - now).days
        row.append(f"{max(left, 0)} day(s)")
    headers = [MEMORY_HEADERS[0], "user", *MEMORY_HEADERS[1:], "days left"]
    if view.plan.allow_writes:
        headers = ["", *headers]
    table = html.table(headers, rows, class_="review")
    body: list[Any] = list(done or [])
    body.append(
        tag(
            "p",
            f"{total} entr(ies) unused past their TTL, the longest waiting first. Unless kept "
            f"or used, expire retires each to cold storage {grace} days after it came here.",
            class_="note",
        )
    )
    if view.plan.allow_writes:
        buttons = [
            html.button(label.capitalize(), name="action", value=label, id=f"review-{label}")
            for label in REVIEW_ACTIONS
        ]
        body.append(html.form("/review", view.csrf, table, *buttons, id="review-form"))
        body.append(
            tag(
                "p",
                "Keep: active again and re-confirmed. Let go: retired to cold storage now "
                "(restorable). Forget: erased with its history, no undo.",
                class_="note",
            )
        )
    else:
        body += [table, tag("p", "Read-only: start with --allow-writes to act.", class_="note")]
    body.append(html.pager("/review", {}, page, PER_PAGE, total))
    return view.render("Review", html.join(body), here="/review")


async def review_act(view: View) -> Any:
    view.require_writes()
    fields = await view.form()
    action = (fields.get("action") or [""])[0]
    ids = list(dict.fromkeys(fields.get("id") or []))
    if action not in REVIEW_ACTIONS or not ids or len(ids) > MAX_IDS:
        raise PageError(400, "choose entries and one of: keep, let go, forget")
    store = view.store
    for memory_id in ids:  # a user's token acts on its own entries only
        memory = store.get(memory_id)
        if memory is not None:
            view.require_user(memory.user_id)
    if action == "forget":
        report = curation.CurationReport()
        for memory_id in ids:
            if store.forget_memory(memory_id):
                report.done.append(memory_id)
            else:
                report.add_missing(memory_id)
    else:
        act = curation.keep if action == "keep" else curation.drop
        report = act(store, ids)
    view.changed()
    if view.wants_json:
        return view.json(report.to_dict())
    verb = {"keep": "kept", "let go": "let go", "forget": "forgotten"}[action]
    done = [tag("p", f"{verb}: {len(report.done)}", data_figure="done", class_="note")]
    done += [
        tag("p", f"not {verb}: {i}: {why}", class_="warn") for i, why in report.refused.items()
    ]
    return await review_page(view, done)


def _forget_form(view: View, user: str, namespace: str, key: str) -> html.Html:
    def field(name: str, value: str, hint: str) -> html.Html:
        return tag(
            "label",
            f"{name} ",
            html.Html(f'<input name="{name}" value="{html.h(value)}" size="22">'),
            f" {hint} ",
        )

    return tag(
        "form",
        field("user", user, ""),
        field("namespace", namespace, "(empty: the profile)"),
        field("key", key, "(empty: the whole namespace, or the whole user)"),
        html.button("Preview"),
        method="get",
        action="/forget",
        id="forget-form",
    )


def _scope(user: str, namespace: str, key: str) -> tuple[str | None, str | None]:
    """(namespace, key) a forget reaches: a key; else a namespace; else the whole user."""
    if key:
        return namespace, key
    return (namespace or None), None


def _scope_text(user: str, namespace: str | None, key: str | None) -> str:
    if key is not None:
        where = f" in namespace {namespace!r}" if namespace else ""
        return f"every value of key {key!r} of user {user!r}{where}"
    if namespace is not None:
        return f"namespace {namespace!r} of user {user!r}"
    return f"everything about user {user!r}"


def _preview_body(preview: dict[str, Any]) -> list[Any]:
    rows = [[kind, len(ids), ", ".join(ids)] for kind, ids in preview["by_kind"].items()]
    body: list[Any] = [
        tag("p", "memories: ", tag("b", preview["memories"], data_figure="memories")),
        html.table(["kind", "entries", "ids"], rows, class_="preview"),
    ]
    for table in ("messages", "episodes"):
        if table in preview:
            body.append(tag("p", f"{table}: ", tag("b", preview[table], data_figure=table)))
    if preview.get("derived") or preview.get("redact"):
        derived = [[e["id"], e["kind"] or "-", e["why"]] for e in preview.get("derived", [])]
        redact = preview.get("redact") or {}
        body += [
            tag("h3", "Reached beyond the key"),
            html.table(["id", "kind", "erased because"], derived, class_="derived"),
            tag(
                "p",
                f"redacted ([erased] in place of the value): {len(redact.get('entries', []))} "
                f"kept entries, {len(redact.get('messages', []))} messages, "
                f"{len(redact.get('episodes', []))} episodes, "
                f"{redact.get('change_rows', 0)} change-log rows; "
                f"summaries rebuilt by the next summarize run: {len(preview.get('rebuild', []))}",
                data_figure="redacted",
            ),
        ]
    return body


async def forget_page(view: View) -> Any:
    view.require_admin()
    user = view.request.query_params.get("user", "").strip()
    namespace = view.request.query_params.get("namespace", "").strip()
    key = view.request.query_params.get("key", "").strip()
    body: list[Any] = [_forget_form(view, user, namespace, key)]
    preview = None
    if user:
        scope_ns, scope_key = _scope(user, namespace, key)
        preview = reads.forget_preview(view.store, user_id=user, namespace=scope_ns, key=scope_key)
        body.append(tag("h2", f"Preview: {_scope_text(user, scope_ns, scope_key)}"))
        body += _preview_body(preview)
        reached = preview["memories"] or preview.get("messages") or preview.get("episodes")
        if not reached:
            body.append(tag("p", "Nothing to erase.", class_="note"))
        elif view.plan.allow_writes:
            body.append(
                html.form(
                    "/forget",
                    view.csrf,
                    html.hidden("user", user),
                    html.hidden("namespace", namespace),
                    html.hidden("key", key),
                    html.button(
                        "Erase this, no undo", name="confirm", value="yes", id="confirm-forget"
                    ),
                )
            )
        else:
            body.append(tag("p", "Read-only: start with --allow-writes to erase.", class_="note"))
    erasures = reads.erasures(view.store, user_id=None, limit=200)
    if view.wants_json:
        return view.json({"preview": preview, "erasures": erasures})
    body += [tag("h2", "Past erasures"), erasure_table(erasures)]
    return view.render("Forget", html.join(body), here="/forget")


def erasure_table(erasures: list[dict[str, Any]]) -> html.Html:
    rows = [
        [
            minute(item["at"]),
            item["actor"],
            link(user_href(item["user_id"]), item["user_id"]) if item["user_id"] else "-",
            item["namespace"] if item["namespace"] is not None else "-",
            item["reason"],
            ", ".join(f"{k} {v}" for k, v in item["erased"].items() if v),
        ]
        for item in erasures
    ]
    return html.table(
        ["when", "by", "user", "namespace", "scope", "erased"], rows, class_="erasures"
    )


async def forget_apply(view: View) -> Any:
    view.require_admin()
    view.require_writes()
    fields = await view.form()
    if fields.get("confirm") != ["yes"]:
        raise PageError(400, "confirm the erasure from its preview")
    user, namespace, key = (
        (fields.get(n) or [""])[0].strip() for n in ("user", "namespace", "key")
    )
    if not user:
        raise PageError(400, "name the user")
    store = view.store
    if key:
        erased: dict[str, int] = {"memories": store.forget(user, key, namespace=namespace)}
    elif namespace:
        erased = store.forget_namespace(user, namespace)
    else:
        erased = store.forget_user(user)
    view.changed()
    if view.wants_json:
        return view.json({"erased": erased})
    scope_ns, scope_key = _scope(user, namespace, key)
    body = [
        tag(
            "p",
            f"Erased {_scope_text(user, scope_ns, scope_key)}: "
            + ", ".join(f"{k} {v}" for k, v in erased.items()),
            data_figure="erased",
        ),
        tag("p", link("/forget", "Back to forget")),
        tag("h2", "Past erasures"),
        erasure_table(reads.erasures(store, user_id=None, limit=200)),
    ]
    return view.render("Forget: erased", html.join(body), here="/forget")


async def login_page(view: View, message: str = "") -> Any:
    from starlette.responses import HTMLResponse

    from memkeeper.ui.web import SECURITY_HEADERS

    note = tag("p", message, class_="error") if message else ""
    form = tag(
        "form",
        html.Html(
            '<label>token <input type="password" name="token" size="48" '
            'autocomplete="off"></label> '
        ),
        html.button("Sign in"),
        method="post",
        action="/login",
    )
    page = html.layout(
        "Sign in",
        html.join([note, form]),
        here="",
        who="not signed in",
        admin=False,
        writes=view.plan.allow_writes,
    )
    return HTMLResponse(page, status_code=401 if message else 200, headers=SECURITY_HEADERS)
