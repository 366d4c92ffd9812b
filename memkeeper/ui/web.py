"""What every page shares: the request's principal and its rights, the CSRF token, forms,
the layout, JSON answers, and errors as pages."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote

from memkeeper.mcp.auth import Principal
from memkeeper.ui import html
from memkeeper.ui.security import PRINCIPAL_KEY, SESSION_KEY, UiPlan, csrf_ok, csrf_token

MAX_FORM_BYTES = 256 * 1024
PER_PAGE = 50


class PageError(Exception):
    """A request the page refuses: its HTTP status and a one-line reason (no secret)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class View:
    """One request as the pages see it."""

    request: Any
    store: Any
    plan: UiPlan
    overview: Any = None  # the overview's Snapshot (memkeeper.ui.snapshot)

    def changed(self) -> None:
        """A write from the pages: the overview's figures are stale."""
        if self.overview is not None:
            self.overview.mark_stale()

    @property
    def principal(self) -> Principal:
        found = self.request.scope.get("state", {}).get(PRINCIPAL_KEY)
        if found is None:
            raise PageError(401, "sign in first")
        return found

    @property
    def signed_in(self) -> bool:
        return self.request.scope.get("state", {}).get(PRINCIPAL_KEY) is not None

    @property
    def csrf(self) -> str:
        return csrf_token(self.plan, self.request.scope["state"][SESSION_KEY])

    @property
    def wants_json(self) -> bool:
        return self.request.query_params.get("format") == "json"

    def require_admin(self) -> None:
        if not self.principal.admin:
            raise PageError(403, "this page is the operator's: an admin token sees it")

    def require_user(self, user_id: str) -> None:
        """Refuse unless the principal may see ``user_id``'s pages."""
        principal = self.principal
        if principal.user is not None and principal.user != user_id:
            raise PageError(403, "this token sees its own user's pages only")

    def require_writes(self) -> None:
        if not self.plan.allow_writes:
            raise PageError(403, "this server is read-only: start memkeeper ui with --allow-writes")

    def page_number(self) -> int:
        text = self.request.query_params.get("page", "1")
        if not text.isdigit() or not 1 <= int(text) <= 1_000_000:
            raise PageError(400, "page must be a whole number from 1")
        return int(text)

    def param(self, name: str) -> str | None:
        value = self.request.query_params.get(name)
        return value if value not in (None, "") else None

    async def form(self) -> dict[str, list[str]]:
        """The posted form (urlencoded), once its CSRF token is checked."""
        body = await self.request.body()
        if len(body) > MAX_FORM_BYTES:
            raise PageError(413, "form too large")
        fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        presented = (fields.get("csrf") or [""])[0]
        if not csrf_ok(self.plan, self.request.scope["state"][SESSION_KEY], presented):
            raise PageError(403, "missing or wrong CSRF token: reload the page and try again")
        return fields

    def render(self, title: str, body: Any, *, here: str) -> Any:
        from starlette.responses import HTMLResponse

        principal = self.principal
        now = self.store.now()
        note = f" · pretend clock {now:%Y-%m-%d %H:%M} UTC" if self.plan.pretend_now else ""
        page = html.layout(
            title,
            body,
            here=here,
            who=principal.label,
            admin=principal.admin,
            writes=self.plan.allow_writes,
            now_note=note,
            sign_out=self.csrf if self.plan.tokens is not None else "",
            own_page="" if principal.admin else f"/users/{quote(principal.user or '', safe='')}",
        )
        return HTMLResponse(page, headers=SECURITY_HEADERS)

    def json(self, data: Any) -> Any:
        from starlette.responses import Response

        body = json.dumps(data, ensure_ascii=False, default=str, indent=1)
        return Response(body, media_type="application/json", headers=SECURITY_HEADERS)


SECURITY_HEADERS = {
    # No script or style from anywhere else; the pages' own are inline.
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "script-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


def error_page(status: int, message: str) -> Any:
    from starlette.responses import HTMLResponse

    body = html.tag("p", message, class_="error")
    if status == 401:
        body = html.join([body, html.tag("p", html.link("/login", "Sign in with a token"))])
    page = html.Html(
        "<!doctype html>"
        + html.tag(
            "html",
            html.tag("head", html.Html('<meta charset="utf-8">'), html.tag("title", "memkeeper")),
            html.tag("body", html.tag("h1", f"{status}"), body),
        )
    )
    return HTMLResponse(page, status_code=status, headers=SECURITY_HEADERS)
