"""One tool call's outcome, shared by the SDK's handler and the fast path.

:func:`run_tool` is what every ``tools/call`` does, whichever code parsed the request: the
caller's principal and client name to a :class:`~memkeeper.mcp.calls.Caller`, the call
answered on the event loop when it only reads (:mod:`memkeeper.mcp.inline`) or else in a
worker thread, and memkeeper's errors turned into one line (logged; an unexpected failure
with its traceback). The SDK's ``call_tool`` handler (:mod:`memkeeper.mcp.server`) wraps the
outcome in a ``CallToolResult``; :mod:`memkeeper.mcp.fast_call` writes the same result as
plain JSON. :func:`result_text` and :func:`error_text` are the text content of both.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio

from memkeeper import logs
from memkeeper.errors import MemkeeperError
from memkeeper.mcp.auth import Principal
from memkeeper.mcp.calls import Caller, call
from memkeeper.mcp.inline import answer_inline
from memkeeper.mcp.store_ref import StoreRef

log = logs.get_logger("memkeeper.mcp")


def result_text(data: dict[str, Any]) -> str:
    """A result's text content: the structured answer as compact JSON."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def error_text(message: str) -> str:
    """A refused call's text content: the one-line message, secrets redacted."""
    return logs.redact(message)


async def run_tool(
    stores: StoreRef,
    principal_of: Callable[[], Principal],
    client: str,
    name: str,
    arguments: Any,
) -> tuple[dict[str, Any] | None, str | None]:
    """Run tool ``name``: (its answer, None), or (None, the one-line error of the call)."""
    tool = name[:64]  # the client's word: kept short in logs and messages
    try:
        caller = Caller(principal_of(), client)
        data = answer_inline(stores, caller, name, arguments)
        if data is None:
            data = await anyio.to_thread.run_sync(
                partial(call, stores, caller, name, arguments), limiter=stores.limiter
            )
    except MemkeeperError as exc:
        log.info("tool call refused", tool=tool, client=client, error=logs.redact(str(exc)))
        return None, str(exc)
    except Exception as exc:
        logs.log_failure(log, "tool call failed", exc, tool=tool, client=client)
        return None, f"internal error in {tool} ({type(exc).__name__}); see the server log"
    log.debug("tool call", tool=tool, client=client, principal=caller.principal.label)
    return data, None
