"""The MCP prompts: ``memory_context``, the ``context`` tool as a prompt a client can insert.

Clients that show prompts (a slash command, a menu) offer ``memory_context``; its text is what
the ``context`` tool returns (:meth:`MemoryStore.context`), as one user message. Prompt
arguments are strings by the protocol's rule: ``user`` (who it is about: left out on a
connection bound to one user, needed with an admin token, as ``user_id`` is for the tools),
``namespace`` and ``query``. Runs in a worker thread, like a tool call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp import types

from memkeeper.errors import InvalidInput
from memkeeper.mcp.calls import Caller
from memkeeper.mcp.store_ref import StoreRef


@dataclass(frozen=True, slots=True)
class PromptSpec:
    """One prompt: its name, what it is for, and its (string) arguments."""

    name: str
    title: str
    description: str
    arguments: tuple[tuple[str, str], ...]

    def mcp_prompt(self) -> types.Prompt:
        return types.Prompt(
            name=self.name,
            title=self.title,
            description=self.description,
            arguments=[
                types.PromptArgument(name=name, description=text, required=False)
                for name, text in self.arguments
            ],
        )


MEMORY_CONTEXT = PromptSpec(
    "memory_context",
    "Memory about the user",
    "What memkeeper knows about the user, ready to put before a conversation: the best "
    "high-confidence, recently used entries, the ones relevant to the query, and the "
    "project's recent episodes.",
    (
        (
            "user",
            "The user's id. Leave it out unless the server was reached with an admin token.",
        ),
        ("namespace", "Project namespace; empty for the user's profile."),
        ("query", "Optional: the user's message, to add the entries relevant to it."),
    ),
)

PROMPTS = (MEMORY_CONTEXT,)
BY_NAME = {prompt.name: prompt for prompt in PROMPTS}


def prompt_result(
    stores: StoreRef, caller: Caller, name: str, arguments: dict[str, Any] | None
) -> types.GetPromptResult:
    """The prompt ``name`` filled for ``caller``; InvalidInput for an unknown name or argument."""
    spec = BY_NAME.get(name)
    if spec is None:
        raise InvalidInput(f"no prompt named {name[:40]!r}; the prompts are: {', '.join(BY_NAME)}")
    given = {key: value for key, value in (arguments or {}).items() if value not in (None, "")}
    known = [arg for arg, _text in spec.arguments]
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise InvalidInput(
            f"{name} has no argument {unknown[0][:40]!r}; its arguments are: {', '.join(known)}"
        )
    user = caller.principal.acting_for(given.get("user"), argument="user")
    text = ""
    with stores.borrow(create=False) as store:  # a prompt reads: it never creates the database
        if store is not None:
            namespace = given.get("namespace", "")
            text = store.context(user, namespace=namespace, query=given.get("query")).text
    return types.GetPromptResult(
        description=f"memkeeper's memory about {user}",
        messages=[types.PromptMessage(role="user", content=types.TextContent(text=text))],
    )
