"""HTML for the pages: escaping, the layout every page shares, tables, pagination, forms.

A page is built from :class:`Html` fragments: text is escaped when it joins one (``h()``),
markup written here is trusted as it is. Nothing is fetched from elsewhere: the style sheet
is inline, and the few lines of script a page has are too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from typing import Any
from urllib.parse import urlencode


class Html(str):
    """A fragment of markup, trusted as it is (text joins it escaped through :func:`h`)."""

    __slots__ = ()


def h(value: Any) -> Html:
    """``value`` as markup: a fragment stays, anything else becomes escaped text."""
    if isinstance(value, Html):
        return value
    return Html(escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[Any], sep: str = "") -> Html:
    return Html(sep.join(h(part) for part in parts))


def tag(element: str, /, *children: Any, **attrs: Any) -> Html:
    """``<name attrs>children</name>``; an attribute ``class_`` is ``class``, ``data_x`` is
    ``data-x``; False and None attributes are left out, True ones are bare."""
    shown = []
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        attr = key.rstrip("_").replace("_", "-")
        shown.append(f" {attr}" if value is True else f' {attr}="{h(value)}"')
    return Html(f"<{element}{''.join(shown)}>{join(children)}</{element}>")


def link(href: str, text: Any, **attrs: Any) -> Html:
    return tag("a", text, href=href, **attrs)


def url(path: str, params: Mapping[str, Any] | None = None) -> str:
    """``path?query`` with the parameters that are set (None and '' left out)."""
    kept = {k: v for k, v in (params or {}).items() if v is not None and v != ""}
    return f"{path}?{urlencode(kept)}" if kept else path


def table(headers: Iterable[Any], rows: Iterable[Iterable[Any]], **attrs: Any) -> Html:
    head = tag("tr", *(tag("th", cell) for cell in headers))
    body = join(tag("tr", *(tag("td", cell) for cell in row)) for row in rows)
    return tag("table", tag("thead", head), tag("tbody", body), **attrs)


def pager(
    path: str,
    params: Mapping[str, Any],
    page: int,
    per_page: int,
    total: int | None,
    *,
    more: bool = False,
) -> Html:
    """Links to the previous and next page of a list, and where this page is (``total``
    None: a list not counted, with a next page when ``more``)."""
    parts: list[Any] = []
    if page > 1:
        parts.append(link(url(path, {**params, "page": page - 1}), "« previous", rel="prev"))
    if total is None:
        parts.append(tag("span", f"page {page}"))
    else:
        pages = max(1, -(-total // per_page))
        parts.append(tag("span", f"page {page} of {pages} ({total} in all)"))
        more = page < pages
    if more:
        parts.append(link(url(path, {**params, "page": page + 1}), "next »", rel="next"))
    return tag("nav", *parts, class_="pager")


def hidden(name: str, value: Any) -> Html:
    return Html(f'<input type="hidden" name="{h(name)}" value="{h(value)}">')


def form(action: str, csrf: str, *children: Any, method: str = "post", **attrs: Any) -> Html:
    """A form that posts with the page's CSRF token."""
    return tag("form", hidden("csrf", csrf), *children, action=action, method=method, **attrs)


def button(text: str, **attrs: Any) -> Html:
    return tag("button", text, type="submit", **attrs)


NAV = (
    ("/", "Overview", True),
    ("/runs", "Runs", True),
    ("/review", "Review", False),
    ("/users", "Users", True),
    ("/forget", "Forget", True),
)
"""The pages in the header: (path, title, admin only)."""

STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#22304a;color:#fff;padding:.6em 1.2em;display:flex;gap:1.4em;
align-items:center;flex-wrap:wrap}
header a{color:#dfe7f5;text-decoration:none}header a.here{color:#fff;font-weight:600;
border-bottom:2px solid #8fb4ff}header .who{margin-left:auto;font-size:.85em;color:#b8c4da}
main{padding:1em 1.4em;max-width:1200px}h1{font-size:1.4em;margin:.3em 0 .6em}
h2{font-size:1.1em;margin:1.4em 0 .5em}
table{border-collapse:collapse;background:#fff;margin:.4em 0;font-size:.92em}
th,td{border:1px solid #dde2ea;padding:.25em .55em;text-align:left;vertical-align:top}
th{background:#eef1f6}td.n,th.n{text-align:right}
.cards{display:flex;flex-wrap:wrap;gap:.8em}.card{background:#fff;border:1px solid #dde2ea;
padding:.6em .9em;min-width:9em}.card b{display:block;font-size:1.5em}
.warn{background:#fff4d6;border:1px solid #e9c46a;padding:.4em .8em;margin:.3em 0}
.error{background:#fde2e2;border:1px solid #e08080;padding:.4em .8em;margin:.3em 0}
.note{color:#5a6475;font-size:.9em}.pager{margin:.6em 0;display:flex;gap:1em}
form.inline{display:inline}pre{white-space:pre-wrap;background:#fff;border:1px solid #dde2ea;
padding:.6em}.timeline{list-style:none;padding-left:0;border-left:3px solid #8fb4ff}
.timeline li{margin:0 0 .5em .8em}.timeline .when{color:#5a6475;font-size:.85em}
.cols{display:flex;gap:2em;flex-wrap:wrap}.cols>div{flex:1 1 420px}
button{cursor:pointer}.badge{background:#e4ebf7;border-radius:3px;padding:0 .35em;
font-size:.85em}
"""


def layout(
    title: str,
    body: Any,
    *,
    here: str,
    who: str,
    admin: bool,
    writes: bool,
    now_note: str = "",
    sign_out: str = "",
    own_page: str = "",
) -> Html:
    """The whole page: header with the pages this principal may see, then ``body``
    (``sign_out``: the CSRF token of a signed-in browser's sign-out button)."""
    links = [
        link(path, name, class_="here" if path == here else None)
        for path, name, admin_only in NAV
        if admin or not admin_only
    ]
    if own_page:  # a user's token: its own memories
        links.insert(0, link(own_page, "My memories", class_="here" if here == "/users" else None))
    mode = "writes enabled" if writes else "read-only"
    header = tag(
        "header",
        tag("strong", "memkeeper"),
        *links,
        tag("span", f"{who} · {mode}{now_note}", class_="who"),
        form("/logout", sign_out, button("Sign out"), class_="inline") if sign_out else "",
    )
    return Html(
        "<!doctype html>"
        + tag(
            "html",
            tag(
                "head",
                Html('<meta charset="utf-8">'),
                Html('<meta name="viewport" content="width=device-width, initial-scale=1">'),
                tag("title", f"{title} · memkeeper"),
                tag("style", Html(STYLE)),
            ),
            tag("body", header, tag("main", tag("h1", title), body)),
            lang="en",
        )
    )
