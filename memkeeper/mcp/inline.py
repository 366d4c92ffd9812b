"""Tool calls answered on the HTTP server's event loop itself, without a worker thread.

The profile of ``memkeeper bench --mcp-clients 8`` showed a worker thread's hand-over (the
queue, waking the thread, then waking the loop again with the answer) costing more than a
``recall`` itself. A ``recall`` or a keyword-only ``search`` whose use is buffered
(:mod:`memkeeper.storage.use_buffer`) only reads, and a read never waits for SQLite's write
lock (WAL readers don't), so :func:`answer_inline` runs it right on the loop, where it holds
the loop no longer than it would hold the GIL in a thread. Everything else runs in a worker
thread as before (:func:`memkeeper.mcp.calls.call`): the other tools, a search that may call
the embeddings endpoint (a network call), a call when no open store is free, and a call that
turns out to need a write (a renewal or a restore: :class:`NeedsWrite`, nothing done yet).
"""

from __future__ import annotations

from typing import Any

from memkeeper.mcp.calls import HANDLERS, Caller, bind
from memkeeper.mcp.schemas import BY_NAME
from memkeeper.mcp.store_ref import StoreRef
from memkeeper.storage import use_buffer
from memkeeper.storage.use_buffer import NeedsWrite
from memkeeper.store import MemoryStore

INLINE = frozenset({"recall", "search"})
"""The tools tried on the event loop."""


def answer_inline(
    stores: StoreRef, caller: Caller, tool: str, arguments: Any
) -> dict[str, Any] | None:
    """The answer of ``tool`` computed here, or None: run it in a worker thread instead.
    Raises the MemkeeperError of a refused call, as :func:`~memkeeper.mcp.calls.call` does."""
    if tool not in INLINE:
        return None
    try:
        return _call_inline(stores, caller, tool, arguments)
    except NeedsWrite:
        return None


def _may_embed(store: MemoryStore) -> bool:
    """Whether a search may embed its query: call the embeddings endpoint (an API key is
    set for it) or run the local model (in the cache): neither belongs on the loop."""
    from memkeeper.store.semantic import can_embed

    return can_embed(store.config)


def _call_inline(stores: StoreRef, caller: Caller, tool: str, arguments: Any) -> dict[str, Any]:
    """Run ``recall`` or ``search`` on this thread if it can be done by reading alone, on
    a store that is open and free (opening one may write): its answer, or NeedsWrite."""
    spec = BY_NAME[tool]
    given = bind(spec, arguments)
    user = caller.principal.acting_for(given.pop("user_id", None))
    with stores.borrow_free() as store:
        if store is None or use_buffer.buffering(store.storage) is None:
            raise NeedsWrite
        if tool == "search" and _may_embed(store):
            raise NeedsWrite  # the endpoint is a network call: not on the loop
        with use_buffer.reads_only():
            return HANDLERS[tool](store, caller, user, given)
