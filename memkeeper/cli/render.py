"""Plain-text rendering of records for the CLI (the ``--json`` forms use ``to_dict``)."""

from __future__ import annotations

from collections.abc import Sequence

from memkeeper.records import Memory


def _short(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def memory_line(memory: Memory) -> str:
    """One memory as one line: id, state, kind, owner, key = value."""
    owner = memory.user_id + (f"/{memory.namespace}" if memory.namespace else "")
    state = memory.state + (f"({memory.cold_reason})" if memory.cold_reason else "")
    label = f"{memory.key} = " if memory.key is not None else ""
    pin = " [pinned]" if memory.pinned else ""
    return (
        f"{memory.id}  {state:<16} {memory.kind:<10} {owner:<16} "
        f"{label}{_short(memory.value, 60)}{pin}"
    )


def memory_block(memory: Memory) -> str:
    """One memory in full, one field per line."""
    fields = memory.to_dict()
    width = max(len(name) for name in fields)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in fields.items())


def memory_table(memories: Sequence[Memory]) -> str:
    if not memories:
        return "(no memories)"
    return "\n".join(memory_line(memory) for memory in memories)
