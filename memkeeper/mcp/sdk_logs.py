"""Keep the ``mcp`` SDK's log lines to what an operator needs.

The SDK logs sessions and requests at info level ("Created new transport with session ID",
"StreamableHTTP session manager started"), kept for ``-vv``; its streamable HTTP transport
has logged an error with a traceback each time a client closed its session (an
``anyio.ClosedResourceError`` from its own streams closing, mcp 1.x): such lines are dropped,
a normal end of session is not a failure.
"""

from __future__ import annotations

import logging

SDK_LOGGERS = ("mcp", "sse_starlette")


class _SessionClosedNoise(logging.Filter):
    """Drop the transport's ClosedResourceError tracebacks at a session's normal end."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return type(exc).__name__ != "ClosedResourceError"


_NOISE_FILTER = _SessionClosedNoise()


def quiet_sdk(debug: bool) -> None:
    """Set the SDK's loggers to warning (debug with ``-vv``) and drop its session-end noise."""
    level = logging.DEBUG if debug else logging.WARNING
    for name in SDK_LOGGERS:
        logging.getLogger(name).setLevel(level)
    transport = logging.getLogger("mcp.server.streamable_http")
    if _NOISE_FILTER not in transport.filters:
        transport.addFilter(_NOISE_FILTER)
