"""Users and memories: ``/users`` (counts and caps), ``/users/<id>`` (a user's memories by
namespace, kind and state, with a search box) and ``/memories/<id>`` (a memory's life as a
timeline, beside the words ``explain`` gives)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from memkeeper.audit.explain import ACTION_VERBS
from memkeeper.errors import MemkeeperError, NotFound
from memkeeper.records import KINDS, STATES, Memory
from memkeeper.storage.uses import uses_of
from memkeeper.ui import html, reads
from memkeeper.ui.html import link, tag
from memkeeper.ui.pages_overview import minute
from memkeeper.ui.pages_runs import memory_href, run_href
from memkeeper.ui.web import PER_PAGE, PageError, View


def user_href(user_id: str) -> str:
    return f"/users/{quote(user_id, safe='')}"


async def users_list(view: View) -> Any:
    view.require_admin()
    page = view.page_number()
    found = reads.users(view.store, page=page, per_page=PER_PAGE)
    if view.wants_json:
        return view.json(found)
    rows = []
    for user in found:
        near = user["most_facts"] >= user["cap"] * 0.9
        facts = f"{user['most_facts']} of {user['cap']}"
        if user["most_facts_namespace"]:
            facts += f" (in {user['most_facts_namespace']})"
        rows.append(
            [
                link(user_href(user["user_id"]), user["user_id"], data_user=user["user_id"]),
                *(user["states"].get(state, 0) for state in STATES),
                user["total"],
                tag("span", facts, class_="warn" if near else None),
            ]
        )
    body = html.join(
        [
            tag(
                "p",
                "Active facts per namespace are capped by [jobs.prune] max_facts: over the "
                "cap, prune retires the least valuable to cold storage.",
                class_="note",
            ),
            html.table(["user", *STATES, "total", "most active facts vs cap"], rows),
            html.pager("/users", {}, page, PER_PAGE, None, more=len(found) == PER_PAGE),
        ]
    )
    return view.render("Users", body, here="/users")


def memory_rows(
    memories: list[Memory], *, selectable: bool = False, owners: bool = False
) -> list[list[Any]]:
    rows = []
    for memory in memories:
        cells: list[Any] = []
        if selectable:
            cells.append(
                html.Html(f'<input type="checkbox" name="id" value="{html.h(memory.id)}">')
            )
        cells += [
            link(memory_href(memory.id), memory.id, data_memory=memory.id),
            *([link(user_href(memory.user_id), memory.user_id)] if owners else []),
            memory.namespace or "-",
            memory.kind,
            memory.key or "-",
            memory.value if len(memory.value) <= 200 else memory.value[:199] + "…",
            memory.state + (f" ({memory.cold_reason})" if memory.cold_reason else ""),
            f"{memory.confidence:.2f}",
            minute(memory.last_used_at.isoformat()),
        ]
        rows.append(cells)
    return rows


MAX_SEARCHED_NAMESPACES = 20
"""A search of "any" namespace searches at most this many of the user's, by name."""

MEMORY_HEADERS = ["id", "namespace", "kind", "key", "value", "state", "conf.", "last used"]


def _select(name: str, options: list[str], chosen: str | None, any_label: str = "any") -> Any:
    items = [tag("option", any_label, value="")] + [
        tag("option", option or "(none)", value=option or "-", selected=option == chosen)
        for option in options
    ]
    return tag("label", f"{name} ", tag("select", *items, name=name))


def _search(view: View, user_id: str, query: str, namespace: str | None) -> list[Any]:
    """The search box's answer: the store's ranked search when writes are on (its hits
    count as used, as every search's do), else a plain filter that changes nothing."""
    if view.plan.allow_writes:
        # A search reads one namespace and the profile: "any" searches each of the user's.
        names = [namespace] if namespace is not None else reads.namespaces(view.store, user_id)
        found: dict[str, Any] = {}
        semantic = False
        for name in names[:MAX_SEARCHED_NAMESPACES] or [""]:
            hits = view.store.search(user_id, query, namespace=name, limit=20)
            semantic = semantic or hits.semantic
            for hit in hits:
                if hit.memory.id not in found or found[hit.memory.id].score < hit.score:
                    found[hit.memory.id] = hit
        best = sorted(found.values(), key=lambda hit: -hit.score)[:20]
        how = "by meaning and keywords" if semantic else "keyword-only"
        rows = [
            [f"{hit.score:.3f}", f"{hit.similarity:.3f}", f"{hit.keyword:.3f}"]
            + memory_rows([hit.memory])[0]
            for hit in best
        ]
        hits = best
        return [
            tag("p", f"{len(hits)} hit(s), ", tag("b", how, data_search_mode=how), class_="note"),
            html.table(["score", "meaning", "keyword", *MEMORY_HEADERS], rows),
        ]
    needle = query.casefold()
    found = [
        m
        for m in view.store.list_memories(user_id, namespace=namespace)
        if needle in m.value.casefold() or needle in (m.key or "").casefold()
    ][:100]
    how = "text filter"
    return [
        tag(
            "p",
            f"{len(found)} match(es), ",
            tag("b", how, data_search_mode=how),
            ": the ranked search (by meaning and keywords) counts its hits as used, so this "
            "read-only server filters the text instead; --allow-writes enables it.",
            class_="note",
        ),
        html.table(MEMORY_HEADERS, memory_rows(found)),
    ]


async def user_page(view: View, user_id: str) -> Any:
    view.require_user(user_id)
    namespace = view.param("namespace")
    namespace = "" if namespace == "-" else namespace
    kind, state, query = view.param("kind"), view.param("state"), view.param("q")
    if (kind is not None and kind not in KINDS) or (state is not None and state not in STATES):
        raise PageError(400, "unknown kind or state")
    page = view.page_number()
    found, total = reads.memories(
        view.store,
        user_id,
        namespace=namespace,
        kind=kind,
        state=state,
        page=page,
        per_page=PER_PAGE,
    )
    if view.wants_json:
        return view.json({"total": total, "page": page, "memories": [m.to_dict() for m in found]})
    names = reads.namespaces(view.store, user_id)
    filters = tag(
        "form",
        _select("namespace", names, namespace),
        " ",
        _select("kind", list(KINDS), kind),
        " ",
        _select("state", list(STATES), state),
        " ",
        tag(
            "label",
            "search ",
            html.Html(f'<input type="search" name="q" value="{html.h(query or "")}" size="24">'),
        ),
        " ",
        html.button("Show"),
        method="get",
        action=user_href(user_id),
    )
    body: list[Any] = [filters]
    if query:
        body.append(tag("h2", f"Search: {query}"))
        try:
            body += _search(view, user_id, query, namespace)
        except MemkeeperError as exc:
            body.append(tag("p", str(exc), class_="error"))
    params = {"namespace": view.param("namespace"), "kind": kind, "state": state}
    body += [
        tag("h2", f"Memories ({total})"),
        html.table(MEMORY_HEADERS, memory_rows(found), class_="memories"),
        html.pager(user_href(user_id), params, page, PER_PAGE, total),
    ]
    return view.render(f"User {user_id}", html.join(body), here="/users")


def timeline(view: View, memory_id: str, changes: list[Any]) -> html.Html:
    """The memory's changes and its recalls, oldest first."""
    items: list[tuple[str, html.Html]] = []
    for change in changes:
        verb = ACTION_VERBS.get(change.action, change.action)
        after = change.after or {}
        if change.action == "retire" and after.get("cold_reason"):
            verb += f" ({after['cold_reason']})"
        who = change.actor + (" · " if change.run_id else "")
        item = tag(
            "li",
            tag("span", minute(change.at.isoformat()), class_="when"),
            " ",
            tag("b", verb),
            " — ",
            change.reason,
            tag(
                "div",
                who,
                link(run_href(change.run_id), change.run_id) if change.run_id else "",
                class_="when",
            ),
            data_action=change.action,
        )
        items.append((change.at.isoformat(), item))
    with view.store.storage.lock:
        uses = uses_of(view.store.storage.hot, memory_id)
    if uses:
        count = sum(use.count for use in uses)
        item = tag(
            "li",
            tag("span", f"{uses[0].day} … {uses[-1].day}", class_="when"),
            " ",
            tag("b", f"recalled {count} time(s)"),
            f" on {len(uses)} day(s)",
            data_action="recall",
        )
        items.append((uses[0].first_at.isoformat(), item))
    items.sort(key=lambda pair: pair[0])
    return tag("ul", *(item for _, item in items), class_="timeline")


async def memory_page(view: View, memory_id: str) -> Any:
    store = view.store
    memory = store.get(memory_id)
    changes = store.changes(memory_id=memory_id)
    owner = memory.user_id if memory else next((c.user_id for c in changes if c.user_id), None)
    if owner is None:
        view.require_admin()  # an erased entry's tombstone names no one a user could be
    else:
        view.require_user(owner)
    try:
        words = store.explain(memory_id)
    except NotFound:
        raise PageError(404, "no such memory, and none was ever erased") from None
    if view.wants_json:
        return view.json(
            {
                "memory": memory.to_dict() if memory else None,
                "changes": [c.to_dict() for c in changes],
                "text": words,
            }
        )
    head: list[Any] = []
    if memory is not None:
        head.append(html.table(MEMORY_HEADERS, memory_rows([memory])))
        head.append(tag("p", "owner: ", link(user_href(memory.user_id), memory.user_id)))
    body = html.join(
        [
            *head,
            tag(
                "div",
                tag("div", tag("h2", "Timeline"), timeline(view, memory_id, changes)),
                tag("div", tag("h2", "Explained"), tag("pre", words, class_="explain")),
                class_="cols",
            ),
        ]
    )
    return view.render(f"Memory {memory_id}", body, here="/users")
