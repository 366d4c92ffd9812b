"""The tools' work: check a call's arguments, make the one :class:`MemoryStore` call, answer
with compact JSON.

Runs in a worker thread (the store is a SQLite handle; :mod:`memkeeper.mcp.server` hands each
call over with ``anyio.to_thread``). The arguments are checked in two steps: their shape here
(unknown or missing arguments, JSON types, with the API's wording), then every value by the
store itself, with :mod:`memkeeper.validation` — the same checks as the Python API and the
CLI. Every failure is a :class:`~memkeeper.errors.MemkeeperError` whose one-line message
becomes the tool error.

The store is opened with actor ``mcp``, so its changes are logged as ``mcp:remember``,
``mcp:add_note``, ``mcp:forget``, ``mcp:recall`` and ``mcp:search`` (a renewal or a
restore by a recall or a search; ``context`` marks its relevant entries through search).
What an agent writes carries the source ``mcp:<client name>`` (the name the client gave in
the MCP handshake), followed by the agent's own ``source`` words when it gave some: that is
what ``explain`` shows as where a value came from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memkeeper.errors import InvalidInput, NotFound
from memkeeper.mcp.auth import Principal
from memkeeper.mcp.schemas import BY_NAME, MAX_LIST, ToolSpec
from memkeeper.mcp.store_ref import StoreRef
from memkeeper.records import KINDS, STATES, Episode, Memory, Message
from memkeeper.storage import use_buffer
from memkeeper.store import DEFAULT_CONFIDENCE, MemoryStore

MAX_CLIENT_CHARS = 64
"""Longest client name kept in a source (it comes from the client, unchecked)."""

UNKNOWN_CLIENT = "unknown-client"

_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
}
_WORDS = {
    "string": "text",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
}


def client_name(raw: Any) -> str:
    """A client's self-given name, made safe for a source: printable, at most 64 characters."""
    if not isinstance(raw, str):
        return UNKNOWN_CLIENT
    cleaned = "".join(char for char in raw if char.isprintable()).strip()[:MAX_CLIENT_CHARS]
    return cleaned or UNKNOWN_CLIENT


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a call comes from: its principal and the client's name from the handshake."""

    principal: Principal
    client: str

    def source(self, words: str | None) -> str:
        """The source recorded with what this caller writes."""
        base = f"mcp:{self.client}"
        return f"{base}: {words}" if words else base


def _short(name: Any) -> str:
    text = str(name)
    return repr(text if len(text) <= 40 else text[:40] + "...")


def unknown_tool(name: Any) -> str:
    """The refusal of a call to a tool the server does not have."""
    return f"no tool named {_short(name)}; the tools are: {', '.join(BY_NAME)}"


def bind(spec: ToolSpec, arguments: Any) -> dict[str, Any]:
    """The call's arguments, checked for shape: no unknown, none missing, JSON types right.

    A null is taken as left out (models send ``"namespace": null`` for "none").
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise InvalidInput(f"{spec.name}: the arguments must be an object")
    unknown = [name for name in arguments if name not in spec.properties]
    if unknown:
        raise InvalidInput(
            f"{spec.name} has no argument {_short(unknown[0])}; "
            f"its arguments are: {', '.join(spec.properties)}"
        )
    given = {name: value for name, value in arguments.items() if value is not None}
    for name in spec.required:
        if name not in given:
            raise InvalidInput(f"{spec.name} needs the argument {name!r}")
    for name, value in given.items():
        kind = spec.properties[name].get("type")
        check = _JSON_TYPES.get(kind) if isinstance(kind, str) else None
        if check is not None and not check(value):
            raise InvalidInput(f"{name} must be {_WORDS[kind]}, not {type(value).__name__}")
        if kind == "array" and not all(isinstance(item, str) for item in value):
            raise InvalidInput(f"{name} must be a list of text")
    return given


def memory_json(memory: Memory) -> dict[str, Any]:
    """A memory as compact JSON for a model: what it says, where it stands, where it came from."""
    data: dict[str, Any] = {"id": memory.id, "kind": memory.kind}
    if memory.key is not None:
        data["key"] = memory.key
    data.update(
        value=memory.value,
        namespace=memory.namespace,
        state=memory.state,
        confidence=round(memory.confidence, 3),
        source=memory.source,
        updated_at=memory.updated_at.isoformat(),
        last_used_at=memory.last_used_at.isoformat(),
    )
    if memory.pinned:
        data["pinned"] = True
    return data


def _owned(store: MemoryStore, user: str, memory_id: str) -> None:
    """Refuse a memory id that is not ``user``'s, saying no more than "not found"."""
    memory = store.get(memory_id)
    if memory is not None:
        owner: str | None = memory.user_id
    else:
        rows = store.changes(memory_id=memory_id, limit=1)
        owner = rows[0].user_id if rows else None
    if owner != user:
        raise NotFound(f"no memory with id {_short(memory_id)} for this user")


def _remember(store: MemoryStore, caller: Caller, user: str, a: dict[str, Any]) -> dict[str, Any]:
    if a.get("kind") == "note":  # the API's own refusal names its Python method
        raise InvalidInput(
            "notes have no key: use the add_note tool for a note (remember's kind is fact "
            "or preference)"
        )
    memory = store.remember(
        user,
        a["key"],
        a["value"],
        namespace=a.get("namespace", ""),
        kind=a.get("kind", "fact"),
        confidence=a.get("confidence", DEFAULT_CONFIDENCE),
        source=caller.source(a.get("source")),
        pinned=a.get("pinned"),
        ttl_days=a.get("ttl_days"),
    )
    return {"memory": memory_json(memory)}


def _recall(store: MemoryStore, _caller: Caller, user: str, a: dict[str, Any]) -> dict[str, Any]:
    memory = store.recall(user, a["key"], namespace=a.get("namespace", ""), kind=a.get("kind"))
    return {"found": memory is not None, "memory": memory_json(memory) if memory else None}


def _search(store: MemoryStore, _caller: Caller, user: str, a: dict[str, Any]) -> dict[str, Any]:
    hits = store.search(
        user,
        a["query"],
        namespace=a.get("namespace", ""),
        kinds=a.get("kinds") or None,
        limit=a.get("limit"),
        include_cold=a.get("include_cold", False),
    )
    return {
        "hits": [
            {
                "score": round(hit.score, 3),
                "similarity": round(hit.similarity, 3),
                "keyword": round(hit.keyword, 3),
                "memory": memory_json(hit.memory),
            }
            for hit in hits
        ],
        # Why it was keyword-only ("" when by meaning): no model, no key, vectors not built.
        "keyword_only": hits.keyword_only,
    }


def _forget(store: MemoryStore, _caller: Caller, user: str, a: dict[str, Any]) -> dict[str, Any]:
    if ("key" in a) == ("memory_id" in a):
        raise InvalidInput("forget needs exactly one of key and memory_id")
    dry_run = bool(a.get("dry_run", False))
    if "key" in a:
        done = store.forget(user, a["key"], namespace=a.get("namespace", ""), dry_run=dry_run)
    else:
        _owned(store, user, a["memory_id"])
        done = store.forget_memory(a["memory_id"], dry_run=dry_run)
    if dry_run:  # ids, kinds and counts: never a value
        return {"forgotten": 0, "dry_run": True, "preview": done}
    return {"forgotten": done}


def _add_note(store: MemoryStore, caller: Caller, user: str, a: dict[str, Any]) -> dict[str, Any]:
    memory = store.add_note(
        user,
        a["text"],
        namespace=a.get("namespace", ""),
        source=caller.source(a.get("source")),
        confidence=a.get("confidence", DEFAULT_CONFIDENCE),
        pinned=a.get("pinned", False),
        ttl_days=a.get("ttl_days"),
    )
    return {"memory": memory_json(memory)}


def _context(store: MemoryStore, _caller: Caller, user: str, a: dict[str, Any]) -> dict[str, Any]:
    found = store.context(
        user, namespace=a.get("namespace", ""), limit=a.get("limit"), query=a.get("query")
    )
    return {
        "text": found.text,
        "memory_ids": [memory.id for memory in found.memories],
        "relevant_ids": [hit.memory.id for hit in found.relevant],
        "episodes": len(found.episodes),
    }


def _append_message(
    store: MemoryStore, _caller: Caller, user: str, a: dict[str, Any]
) -> dict[str, Any]:
    message = store.append_message(
        user, a["session_id"], a["role"], a["content"], namespace=a.get("namespace", "")
    )
    return {
        "message": {
            "id": message.id,
            "session_id": message.session_id,
            "role": message.role,
            "created_at": message.created_at.isoformat(),
        }
    }


def _record_episode(
    store: MemoryStore, _caller: Caller, user: str, a: dict[str, Any]
) -> dict[str, Any]:
    episode = store.record_episode(
        user,
        a["task_name"],
        namespace=a.get("namespace", ""),
        input_summary=a.get("input_summary", ""),
        output_summary=a.get("output_summary", ""),
        user_feedback=a.get("user_feedback", ""),
        status=a.get("status", "completed"),
    )
    return {
        "episode": {
            "id": episode.id,
            "task_name": episode.task_name,
            "status": episode.status,
            "created_at": episode.created_at.isoformat(),
        }
    }


def _explain(store: MemoryStore, _caller: Caller, user: str, a: dict[str, Any]) -> dict[str, Any]:
    _owned(store, user, a["memory_id"])
    return {"memory_id": a["memory_id"], "explanation": store.explain(a["memory_id"])}


def _one_of(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        raise InvalidInput(f"{name} must be one of: {', '.join(allowed)}")


def _list_memories(
    store: MemoryStore, _caller: Caller, user: str, a: dict[str, Any]
) -> dict[str, Any]:
    _one_of("state", a.get("state"), STATES)
    _one_of("kind", a.get("kind"), KINDS)
    memories = store.list_memories(
        user, namespace=a.get("namespace"), state=a.get("state"), kind=a.get("kind")
    )
    memories.sort(key=lambda memory: (memory.created_at, memory.id))
    shown = memories[-_limit(a, 50) :]
    return {"memories": [memory_json(memory) for memory in shown], "total": len(memories)}


def episode_json(episode: Episode) -> dict[str, Any]:
    """An episode as compact JSON for a model."""
    return {
        "id": episode.id,
        "task_name": episode.task_name,
        "status": episode.status,
        "input_summary": episode.input_summary,
        "output_summary": episode.output_summary,
        "user_feedback": episode.user_feedback,
        "created_at": episode.created_at.isoformat(),
    }


def message_json(message: Message) -> dict[str, Any]:
    """A conversation message as compact JSON for a model."""
    return {
        "id": message.id,
        "role": message.role,
        "content": message.content,
        "created_at": message.created_at.isoformat(),
    }


def _limit(a: dict[str, Any], default: int) -> int:
    limit = a.get("limit", default)
    if not 1 <= limit <= MAX_LIST:
        raise InvalidInput(f"limit must be from 1 to {MAX_LIST}")
    return int(limit)


def _episodes(store: MemoryStore, _caller: Caller, user: str, a: dict[str, Any]) -> dict[str, Any]:
    found = store.episodes(user, namespace=a.get("namespace", ""), limit=_limit(a, 20))
    return {"episodes": [episode_json(episode) for episode in found]}


def _history(store: MemoryStore, _caller: Caller, user: str, a: dict[str, Any]) -> dict[str, Any]:
    found = store.history(
        user, a["session_id"], namespace=a.get("namespace", ""), limit=_limit(a, 50)
    )
    return {"session_id": a["session_id"], "messages": [message_json(m) for m in found]}


Handler = Callable[[MemoryStore, Caller, str, dict[str, Any]], dict[str, Any]]

HANDLERS: dict[str, Handler] = {
    "remember": _remember,
    "recall": _recall,
    "search": _search,
    "forget": _forget,
    "add_note": _add_note,
    "context": _context,
    "append_message": _append_message,
    "record_episode": _record_episode,
    "explain": _explain,
    "list_memories": _list_memories,
    "episodes": _episodes,
    "history": _history,
}

NOTHING_YET: dict[str, dict[str, Any]] = {
    "recall": {"found": False, "memory": None},
    "search": {"hits": [], "keyword_only": ""},
    "forget": {"forgotten": 0},
    "context": {"text": "", "memory_ids": [], "relevant_ids": [], "episodes": 0},
    "list_memories": {"memories": [], "total": 0},
    "episodes": {"episodes": []},
}
"""What a tool that creates nothing answers while the database does not exist yet."""


def _nothing_yet(tool: str, given: dict[str, Any]) -> dict[str, Any]:
    if tool == "history":
        return {"session_id": given["session_id"], "messages": []}
    if tool == "explain":
        raise NotFound(f"no memory with id {_short(given['memory_id'])} for this user")
    return dict(NOTHING_YET[tool])


BUFFERING = frozenset({"recall", "search", "context"})
"""The tools whose uses go to the use buffer (:mod:`memkeeper.mcp.store_ref`); every other
tool writes the buffer first."""


def call(
    stores: StoreRef | MemoryStore, caller: Caller, tool: str, arguments: Any
) -> dict[str, Any]:
    """Run one tool call for ``caller``; its JSON answer, or a MemkeeperError.

    Only a tool that writes opens (and so creates) a missing database; the others answer as
    an empty memory would (:data:`NOTHING_YET`).
    """
    spec = BY_NAME.get(tool)
    if spec is None:
        raise InvalidInput(unknown_tool(tool))
    given = bind(spec, arguments)
    user = caller.principal.acting_for(given.pop("user_id", None))
    creates = not (spec.read_only or spec.destructive)
    if isinstance(stores, MemoryStore):  # one store, its uses written per call
        return HANDLERS[tool](stores, caller, user, given)
    with stores.borrow(create=creates) as store:
        if store is None:
            return _nothing_yet(tool, given)
        if tool not in BUFFERING:
            use_buffer.flush(store.storage)  # what it reports or changes includes every use so far
        return HANDLERS[tool](store, caller, user, given)
