"""The README's tool table, rendered from the tools the server itself lists.

``memkeeper mcp --tools markdown`` prints it; a test renders it from a live server (asked
over the SDK's client) and fails when the README's copy differs, so the docs cannot drift
from the server.
"""

from __future__ import annotations

from typing import Any

BEGIN = "<!-- mcp-tools: begin (generated: memkeeper mcp --tools markdown) -->"
END = "<!-- mcp-tools: end -->"


def _effect(annotations: Any) -> str:
    if annotations is None:
        return ""
    if annotations.read_only_hint:
        return "reads"
    words = "erases" if annotations.destructive_hint else "writes"
    return f"{words}, idempotent" if annotations.idempotent_hint else words


def _arguments(schema: dict[str, Any]) -> str:
    required = set(schema.get("required", []))
    names = [name for name in schema.get("properties", {}) if name != "user_id"]
    return ", ".join(f"`{name}`" if name in required else f"`{name}`?" for name in names)


def tools_markdown(tools: list[Any]) -> str:
    """A Markdown table of ``tools`` (the SDK's Tool objects, as a client lists them)."""
    lines = [
        BEGIN,
        "| tool | effect | arguments (`?` optional) | what it does |",
        "|---|---|---|---|",
    ]
    for tool in tools:
        description = " ".join(str(tool.description).split()).replace("|", "\\|")
        lines.append(
            f"| `{tool.name}` | {_effect(tool.annotations)} | {_arguments(tool.input_schema)} "
            f"| {description} |"
        )
    lines.append(END)
    return "\n".join(lines)


def readme_table(readme: str) -> str:
    """The generated table as it stands in the README (markers included); '' if absent."""
    start = readme.find(BEGIN)
    end = readme.find(END, start)
    return readme[start : end + len(END)] if start >= 0 and end >= 0 else ""
