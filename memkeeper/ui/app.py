"""The web application: its routes, sign-in, errors as pages, and the uvicorn server.

Each route is one view of :mod:`memkeeper.ui` over one store (the CLI's, opened with actor
``ui``): reads through the library, writes (with ``--allow-writes``) through the same
functions as their CLI twins. The views run on the server's one event loop, one at a time,
so the store is never used by two requests at once.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from memkeeper import logs
from memkeeper.errors import InvalidInput, MemkeeperError, NotFound
from memkeeper.mcp.auth import AccessDenied
from memkeeper.mcp.serving import ThreadedServer
from memkeeper.ui import pages_actions, pages_memories, pages_overview, pages_runs, reads
from memkeeper.ui.security import COOKIE, LOOPBACK, Guard, Sessions, UiPlan, cookie_of
from memkeeper.ui.snapshot import Snapshot
from memkeeper.ui.web import MAX_FORM_BYTES, PageError, View, error_page

log = logs.get_logger("memkeeper.ui")

Handler = Callable[..., Awaitable[Any]]

_STATUS_OF = ((NotFound, 404), (AccessDenied, 403), (InvalidInput, 400))


def build_app(store: Any, plan: UiPlan, *, warm: bool = False) -> Any:
    """The Starlette app of ``memkeeper ui`` over ``store`` (which stays the caller's).

    ``warm``: compute the overview's figures now, before the app serves anything. On a large
    memory they take seconds (the sizes and counts of every table), and the overview then
    answers from them at once while the next figures are computed in the background
    (:mod:`memkeeper.ui.snapshot`): the server pays that once, at start, not its first
    visitor."""
    from starlette.applications import Starlette
    from starlette.responses import RedirectResponse
    from starlette.routing import Route

    sessions = Sessions()
    overview = Snapshot(lambda: reads.overview(store))
    if warm:
        overview.get()

    def page(handler: Handler, *names: str, public: bool = False) -> Callable[[Any], Any]:
        async def endpoint(request: Any) -> Any:
            view = View(request, store, plan, overview)
            started = time.perf_counter()
            try:
                if not public and not view.signed_in:
                    if request.method == "GET" and not view.wants_json:
                        return RedirectResponse("/login", status_code=303)
                    raise PageError(401, "sign in first (or send Authorization: Bearer <token>)")
                response = await handler(view, *(request.path_params[n] for n in names))
            except PageError as exc:
                response = error_page(exc.status, exc.message)
            except MemkeeperError as exc:
                status = next((code for kind, code in _STATUS_OF if isinstance(exc, kind)), 500)
                response = error_page(status, str(exc))
            # The route's pattern, never the path or query: they may carry ids and searches.
            log.debug(
                "ui request",
                method=request.method,
                route=request.scope.get("route").path if request.scope.get("route") else "?",
                status=response.status_code,
                ms=round((time.perf_counter() - started) * 1000, 1),
            )
            return response

        return endpoint

    async def login(view: View) -> Any:
        if plan.tokens is None:
            return RedirectResponse("/", status_code=303)
        if view.request.method == "GET":
            return await pages_actions.login_page(view)
        body = await view.request.body()
        if len(body) > MAX_FORM_BYTES:
            raise PageError(413, "form too large")
        token = (parse_qs(body.decode("utf-8", "replace")).get("token") or [""])[0].strip()
        principal = plan.tokens.lookup(token) if token else None
        if principal is None:
            log.warning("refused a UI sign-in", reason="unknown token")
            return await pages_actions.login_page(view, "unknown token")
        session = sessions.open(principal)
        log.info("UI sign-in", principal=principal.label)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE, session, max_age=sessions.seconds, httponly=True, samesite="strict", path="/"
        )
        return response

    async def logout(view: View) -> Any:
        await view.form()
        session = cookie_of(view.request.scope)
        if session:
            sessions.close(session)
        response = RedirectResponse("/login" if plan.tokens else "/", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    routes = [
        Route("/", page(pages_overview.overview)),
        Route("/login", page(login, public=True), methods=["GET", "POST"]),
        Route("/logout", page(logout), methods=["POST"]),
        Route("/runs", page(pages_runs.runs_list)),
        Route("/runs/{run_id}", page(pages_runs.run_page, "run_id")),
        Route("/runs/{run_id}/undo", page(pages_runs.undo_preview, "run_id")),
        Route("/runs/{run_id}/undo", page(pages_runs.undo_apply, "run_id"), methods=["POST"]),
        Route("/users", page(pages_memories.users_list)),
        Route("/users/{user_id}", page(pages_memories.user_page, "user_id")),
        Route("/memories/{memory_id}", page(pages_memories.memory_page, "memory_id")),
        Route("/review", page(pages_actions.review_page)),
        Route("/review", page(pages_actions.review_act), methods=["POST"]),
        Route("/forget", page(pages_actions.forget_page)),
        Route("/forget", page(pages_actions.forget_apply), methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(_GuardMiddleware, plan=plan, sessions=sessions)
    return app


class _GuardMiddleware:
    """:class:`~memkeeper.ui.security.Guard` in Starlette's middleware form."""

    def __init__(self, app: Any, plan: UiPlan, sessions: Sessions) -> None:
        self.guard = Guard(app, plan, sessions)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.guard(scope, receive, send)


class UiServer(ThreadedServer):
    """uvicorn serving :func:`build_app`, in a thread: until Ctrl-C or SIGTERM (``run``), or
    while a test needs it (``start``/``stop``)."""

    def __init__(self, store: Any, plan: UiPlan) -> None:
        import uvicorn

        self.plan = plan
        self.app = build_app(store, plan, warm=True)
        config = uvicorn.Config(
            self.app,
            host=plan.host,
            port=plan.port,
            log_config=None,
            access_log=False,  # an access line carries the query string (searches, ids)
            lifespan="off",
            timeout_graceful_shutdown=3,
        )
        super().__init__(config, what="memkeeper ui", thread_name="memkeeper-ui")

    @property
    def url(self) -> str:
        host = self.plan.host
        host = "127.0.0.1" if host in (*LOOPBACK, "0.0.0.0", "::") else host  # noqa: S104
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/"

    def run(self, on_start: Callable[[str], None] | None = None) -> None:
        """Serve until SIGTERM or Ctrl-C, then stop."""

        def started() -> None:
            log.info("memkeeper ui listening", url=self.url, writes=self.plan.allow_writes)
            if on_start is not None:
                on_start(self.url)

        self.serve_until_signalled(started)
