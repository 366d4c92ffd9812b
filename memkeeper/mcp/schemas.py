"""The MCP tools as data: name, description and JSON schema written for a model to read, and
what each tool does to memory (its MCP annotations).

Kept free of the ``mcp`` SDK (plain dicts and a dataclass) so the argument checks in
:mod:`memkeeper.mcp.calls` use the same definitions; :mod:`memkeeper.mcp.server` turns them
into the SDK's ``Tool`` objects. Each tool is one call of :class:`memkeeper.MemoryStore`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memkeeper.records import EPISODE_STATUSES, KEYED_KINDS, KINDS, ROLES, STATES
from memkeeper.validation import MAX_DAYS


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool: what the model reads, and what the tool does to memory."""

    name: str
    title: str
    description: str
    properties: dict[str, dict[str, Any]]
    required: tuple[str, ...] = ()
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False

    def input_schema(self) -> dict[str, Any]:
        """The tool's JSON schema (draft 2020-12 object)."""
        schema: dict[str, Any] = {
            "type": "object",
            "properties": self.properties,
            "additionalProperties": False,
        }
        if self.required:
            schema["required"] = list(self.required)
        return schema


def _text(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


USER_ID = _text(
    "Leave this out. Only a server reached with an admin token acts for any user, and then "
    "needs the user's id here; every other connection acts for its own user, and naming "
    "another user is refused."
)
NAMESPACE = _text(
    "Project namespace (e.g. a project or workspace id) that keeps projects apart. Leave it "
    "out (or empty) for the user's profile, shared by every project.",
    default="",
)
KEY = _text(
    "Name of the fact or preference, short and stable, e.g. 'city', 'preferred_language', "
    "'report_style'."
)
SOURCE = _text(
    "Optional: how you learned it, in a few words (e.g. 'stated by the user', 'inferred "
    "from the draft'). Your client's name is recorded with it."
)
CONFIDENCE = {
    "type": "number",
    "minimum": 0,
    "maximum": 1,
    "default": 0.9,
    "description": "How sure you are, 0-1: about 0.95 when the user said it, 0.6 when you "
    "inferred it. Low-confidence entries that nobody uses go to cold storage first.",
}
TTL_DAYS = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_DAYS,
    "description": "Optional: days this entry stays current without being used or re-confirmed "
    "(default: its kind's TTL). Then it waits for review instead of being deleted.",
}
MAX_LIST = 500
"""Most entries one list_memories, episodes or history call returns."""


def _limit(default: int) -> dict[str, Any]:
    return {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_LIST,
        "default": default,
        "description": f"Most items to return, the newest (default {default}).",
    }


MEMORY_ID = _text("The id of a memory, as returned by remember, add_note, recall or search.")

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "remember",
        "Remember a fact or preference",
        "Store a stable fact or preference about the user under a key (key 'city' = 'Paris'). "
        "Keep what is worth keeping across conversations - stated facts, preferences, "
        "decisions - not moods or one-off remarks. The same value again re-confirms the entry; "
        "a different value replaces it, and the old one is kept for a while so the change can "
        "be explained or undone. Returns the entry now current.",
        {
            "key": KEY,
            "value": _text("The value, as plain text."),
            "kind": _text(
                "fact (name, city, employer) or preference (tone, format, style).",
                enum=list(KEYED_KINDS),
                default="fact",
            ),
            "namespace": NAMESPACE,
            "confidence": CONFIDENCE,
            "source": SOURCE,
            "pinned": {
                "type": "boolean",
                "description": "Optional: true keeps the entry forever (no expiry, never pruned).",
            },
            "ttl_days": TTL_DAYS,
            "user_id": USER_ID,
        },
        required=("key", "value"),
        idempotent=True,
    ),
    ToolSpec(
        "recall",
        "Recall one fact or preference by key",
        "The current value of one key (exact lookup), or found=false. Use it when you know the "
        "key; use search to find memories by meaning. Marks the entry as used, which keeps it "
        "from expiring.",
        {
            "key": KEY,
            "namespace": NAMESPACE,
            "kind": _text("Optional: only this kind.", enum=list(KEYED_KINDS)),
            "user_id": USER_ID,
        },
        required=("key",),
        read_only=True,
    ),
    ToolSpec(
        "search",
        "Search memories by meaning",
        "The memories most relevant to a question or topic, best first: facts, preferences "
        "and notes of the namespace and the user's profile, ranked by meaning (embeddings, "
        "when configured), keywords, confidence and recent use. Use it at the start of a turn "
        "with the user's message as the query. Hits are marked as used.",
        {
            "query": _text("What to look for, in natural language (the user's message is fine)."),
            "namespace": NAMESPACE,
            "kinds": {
                "type": "array",
                "items": {"type": "string", "enum": list(KINDS)},
                "description": "Optional: only these kinds (fact, preference, note).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "Optional: most hits returned (default 3).",
            },
            "include_cold": {
                "type": "boolean",
                "default": False,
                "description": "Also search cold storage; hits found there become active again.",
            },
            "user_id": USER_ID,
        },
        required=("query",),
        read_only=True,
    ),
    ToolSpec(
        "forget",
        "Forget a key or one memory for good",
        "Erase, at the user's request, every value a key ever had - or one memory by id (a "
        "note, say) - with its whole history and what memkeeper derived from it (summaries "
        "and facts built from it are erased, texts that carry it are redacted): nothing is "
        "kept anywhere and it cannot be undone. Give exactly one of key and memory_id. "
        "Returns how many entries were erased; with dry_run, what would be erased, redacted "
        "and rebuilt (ids, kinds, counts) and nothing changes.",
        {
            "key": _text("The key to erase, every value it ever had (facts and preferences)."),
            "memory_id": _text("Or: the id of one memory to erase (e.g. a note)."),
            "namespace": NAMESPACE,
            "dry_run": {
                "type": "boolean",
                "default": False,
                "description": "Only list what would be erased, redacted and rebuilt.",
            },
            "user_id": USER_ID,
        },
        destructive=True,
        idempotent=True,
    ),
    ToolSpec(
        "add_note",
        "Add a note",
        "Store a note without a key: an event, a reminder, a decision with its reason, a "
        "summary. Notes are found by search and expire unless used. Returns the new note.",
        {
            "text": _text("The note, as plain text."),
            "namespace": NAMESPACE,
            "confidence": CONFIDENCE,
            "source": SOURCE,
            "pinned": {"type": "boolean", "default": False, "description": "Keep it forever."},
            "ttl_days": TTL_DAYS,
            "user_id": USER_ID,
        },
        required=("text",),
    ),
    ToolSpec(
        "context",
        "Memory to put in the prompt",
        "A ready prompt section about the user: the best high-confidence, recently used "
        "entries, the entries relevant to the query when one is given (marked as used), and the "
        "namespace's recent episodes. Put the returned text in your system prompt.",
        {
            "namespace": NAMESPACE,
            "query": _text("Optional: the user's message, to add the entries relevant to it."),
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "Optional: most entries (default 10).",
            },
            "user_id": USER_ID,
        },
        read_only=True,
    ),
    ToolSpec(
        "append_message",
        "Append a conversation message",
        "Add one message to a session's conversation history. Long histories are summarized "
        "into a note by the maintenance service, so there is no need to trim them yourself.",
        {
            "session_id": _text("Id of the conversation (any stable string)."),
            "role": _text("Who said it.", enum=list(ROLES)),
            "content": _text("The message text."),
            "namespace": NAMESPACE,
            "user_id": USER_ID,
        },
        required=("session_id", "role", "content"),
    ),
    ToolSpec(
        "record_episode",
        "Record a finished task",
        "Record one task of the project's timeline: what went in, what came out, what the user "
        "changed or said about it. The latest episodes come back in context().",
        {
            "task_name": _text("Short name of the task, e.g. 'weekly report'."),
            "namespace": NAMESPACE,
            "input_summary": _text("What the task started from.", default=""),
            "output_summary": _text("What it produced.", default=""),
            "user_feedback": _text("What the user changed or said about it.", default=""),
            "status": _text("How it ended.", enum=list(EPISODE_STATUSES), default="completed"),
            "user_id": USER_ID,
        },
        required=("task_name",),
    ),
    ToolSpec(
        "explain",
        "Explain a memory's history",
        "One memory's whole life in plain words: who wrote it and from which source (the client "
        "name of an MCP agent included), when it was used, renewed, expired, archived, replaced "
        "or restored, and by which maintenance job and why.",
        {"memory_id": MEMORY_ID, "user_id": USER_ID},
        required=("memory_id",),
        read_only=True,
        idempotent=True,
    ),
)

TOOLS = (
    *TOOLS,
    ToolSpec(
        "list_memories",
        "List the user's memories",
        "Browse what is stored about the user, oldest first (the newest `limit`), each with its "
        "id, kind, key, value, state and source. Filters: namespace (left out: every "
        "namespace; empty: the profile), state (active, pending_review, superseded, cold) and "
        "kind. Use search to find memories by meaning; use this to review or audit them. Does "
        "not mark anything as used. Returns the entries and how many matched in all.",
        {
            "namespace": _text(
                "Only this namespace ('' for the user's profile). Leave it out for every namespace."
            ),
            "state": _text("Only entries in this state.", enum=list(STATES)),
            "kind": _text("Only this kind.", enum=list(KINDS)),
            "limit": _limit(50),
            "user_id": USER_ID,
        },
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        "episodes",
        "The project's recent tasks",
        "The project's latest recorded episodes (tasks, as record_episode wrote them) in time "
        "order, oldest first: what went in, what came out, how it ended and what the user said "
        "about it. Use it to pick up where the project left off.",
        {"namespace": NAMESPACE, "limit": _limit(20), "user_id": USER_ID},
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        "history",
        "A conversation's recent messages",
        "A session's messages that are not summarized yet, oldest first (the newest `limit`), "
        "as append_message stored them. Older messages were folded into a summary note, which "
        "search and context find.",
        {
            "session_id": _text("Id of the conversation, as given to append_message."),
            "namespace": NAMESPACE,
            "limit": _limit(50),
            "user_id": USER_ID,
        },
        required=("session_id",),
        read_only=True,
        idempotent=True,
    ),
)

BY_NAME = {tool.name: tool for tool in TOOLS}
