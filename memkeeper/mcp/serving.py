"""uvicorn in a thread of its own: what the MCP HTTP server and ``memkeeper ui`` share.

Each is started and stopped by tests, the bench and the service (``start``/``stop``), or
served in the foreground until SIGTERM or Ctrl-C (``serve_until_signalled``). uvicorn serves
in a thread even then: left in the main thread, it would re-raise the SIGTERM it caught once
stopped, and the process would end killed by the signal instead of exiting 0.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from memkeeper.errors import MemkeeperError

START_TIMEOUT_SECONDS = 10.0
"""How long ``start`` waits for the socket, and ``stop`` for requests in flight."""


class ThreadedServer:
    """A ``uvicorn.Server`` for ``config``, served in a thread named ``thread_name``;
    ``what`` names it in errors ("the MCP HTTP server")."""

    def __init__(self, config: Any, *, what: str, thread_name: str) -> None:
        import uvicorn

        self.server = uvicorn.Server(config)
        self.what = what
        self.thread_name = thread_name
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port listened on (the real one when the config asked for 0)."""
        for server in getattr(self.server, "servers", None) or []:  # set once listening
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return int(self.server.config.port)

    def start(self) -> None:
        """Serve in a background thread; returns once listening (or raises)."""
        self._thread = threading.Thread(target=self.server.run, name=self.thread_name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self.server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not self.server.started:
            self.stop()
            config = self.server.config
            raise MemkeeperError(f"{self.what} could not listen on {config.host}:{config.port}")

    def stop(self) -> None:
        """Stop serving and wait for the thread (requests in flight get a few seconds)."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=START_TIMEOUT_SECONDS)
            self._thread = None

    def serve_until_signalled(self, on_start: Callable[[], None] | None = None) -> None:
        """``start``, call ``on_start``, serve until SIGTERM or Ctrl-C, then ``stop``."""
        stop = threading.Event()
        previous = {
            signum: signal.signal(signum, lambda *_: stop.set())
            for signum in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            self.start()
            if on_start is not None:
                on_start()
            while not stop.wait(0.5):
                if self._thread is None or not self._thread.is_alive():
                    raise MemkeeperError(f"{self.what} stopped unexpectedly")
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.stop()
