"""The overview's figures on a large memory: computed once, served while a fresh copy is
computed in the background (stale while revalidating).

On a small memory the figures take a few milliseconds and every request computes them anew,
so the page is always exact. Once computing them took longer than :data:`FRESH_MS` (on a
million memories, ``status``'s size of every table takes seconds), a request is answered at
once from the last figures, which the page dates, and if those are older than ``max_age``
seconds one background thread computes the next. A write from the pages (undo, review,
forget) marks them stale, so the next request starts a refresh.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from memkeeper import logs

log = logs.get_logger("memkeeper.ui")

FRESH_MS = 150.0
"""Figures that take less than this are computed at every request."""
MAX_AGE_SECONDS = 30.0


class Snapshot:
    """The last figures ``compute`` gave, when, and how long they took."""

    def __init__(
        self, compute: Callable[[], dict[str, Any]], *, max_age: float = MAX_AGE_SECONDS
    ) -> None:
        self.compute = compute
        self.max_age = max_age
        self._lock = threading.Lock()
        self._data: dict[str, Any] | None = None
        self._at = 0.0
        self._took_ms = 0.0
        self._refreshing = False
        self._stale = False

    def _run(self) -> dict[str, Any]:
        began = time.perf_counter()
        data = self.compute()
        took = (time.perf_counter() - began) * 1000
        with self._lock:
            self._data, self._at, self._took_ms = data, time.monotonic(), took
            self._stale = False
        return data

    def _refresh(self) -> None:
        try:
            self._run()
        except Exception as exc:  # the next request tries again; the page keeps the last
            log.warning("the overview's figures could not be refreshed", error=str(exc))
        finally:
            with self._lock:
                self._refreshing = False

    def get(self) -> tuple[dict[str, Any], float]:
        """The figures and their age in seconds (0: computed for this request)."""
        with self._lock:
            data, at, took, stale = self._data, self._at, self._took_ms, self._stale
        if data is None or took < FRESH_MS:
            return self._run(), 0.0
        age = time.monotonic() - at
        if stale or age > self.max_age:
            with self._lock:
                start = not self._refreshing
                self._refreshing = True
            if start:
                threading.Thread(
                    target=self._refresh, name="memkeeper-ui-overview", daemon=True
                ).start()
        return data, age

    def mark_stale(self) -> None:
        with self._lock:
            self._stale = True
