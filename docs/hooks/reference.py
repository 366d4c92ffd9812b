"""MkDocs hook: the reference pages' generated parts, rendered from the code at build time.

A page asks for a part with a marker line, ``<!-- generated: NAME -->``; the build replaces
it with the part rendered from the code, so the published reference cannot drift from it:

* ``config-keys`` (reference/config.md): every key of the configuration, table by table,
  with its type, default, range and description, from the schema
  (``memkeeper/config/schema.py``, the source ``config.toml`` is generated from too);
* ``mcp-prompts`` (reference/mcp.md): the MCP server's prompts and their arguments;
* ``mcp-protocol-versions`` (reference/mcp.md): the protocol versions the server accepts.

The Python API page (reference/python-api.md) is mkdocstrings' work; this hook only shows the
docstrings' Sphinx roles (``:class:`~memkeeper.Memory```) as the plain code they name.

An unknown marker fails the build, and so does a page that lost a marker this hook expects
(:data:`EXPECTED`). ``tests/test_reference_docs.py`` calls the renderers directly.
"""

from __future__ import annotations

import html
import json
import re
import typing
from collections.abc import Callable, Iterator
from typing import Any

MARKER = re.compile(r"^<!-- generated: (?P<name>[\w-]+) -->$", re.MULTILINE)

EXPECTED = {
    "reference/config.md": {"config-keys"},
    "reference/mcp.md": {"mcp-prompts", "mcp-protocol-versions"},
}
"""The markers each page must keep (by its path under docs/)."""


def _cell(text: str) -> str:
    """Text for one cell of a Markdown table: one line, no HTML, no emphasis."""
    text = html.escape(" ".join(text.split()), quote=False)
    return text.replace("|", "\\|").replace("*", "\\*")


def _code(text: str) -> str:
    """Text for a code span in a table cell (a default: no bar, no backquote expected)."""
    if "|" in text or "`" in text:
        raise ValueError(f"cannot put {text!r} in a table's code span")
    return text


def _toml(value: object) -> str:
    """A default as it is written in config.toml."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def _type_name(annotation: Any) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return "one of " + ", ".join(f"`{_toml(choice)}`" for choice in typing.get_args(annotation))
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def config_tables() -> Iterator[tuple[str, str, list[tuple[str, Any, Any]]]]:
    """Each TOML table of the configuration, in ``config.toml``'s order: its dotted name, its
    description, and its keys as ``(name, field, default)``."""
    from pydantic import BaseModel

    from memkeeper.config.schema import Config

    def walk(model: BaseModel, prefix: str, description: str) -> Iterator[Any]:
        keys = []
        tables = []
        for name, field in type(model).model_fields.items():
            value = getattr(model, name)
            if isinstance(value, BaseModel):
                tables.append((name, value, field.description or ""))
            else:
                keys.append((name, field, value))
        if prefix:
            yield prefix, description, keys
        for name, value, text in tables:
            yield from walk(value, f"{prefix}.{name}" if prefix else name, text)

    yield from walk(Config(), "", "")


def config_keys_markdown() -> str:
    """The configuration reference: one section per table, one row per key."""
    from memkeeper.config.doc import value_range

    out: list[str] = []
    for table, description, keys in config_tables():
        out += ["", f"### `[{table}]`", ""]
        if description:
            out += [description.strip(), ""]
        if not keys:
            out += ["This table holds only the tables below it.", ""]
            continue
        out += ["| key | type | default | range | what it does |", "|---|---|---|---|---|"]
        for name, field, value in keys:
            bounds = value_range(field).removeprefix("Range: ").removesuffix(".")
            out.append(
                f"| `{name}` | {_type_name(field.annotation)} | `{_code(_toml(value))}` "
                f"| {_cell(bounds)} | {_cell(field.description or '')} |"
            )
        out.append("")
    return "\n".join(out).strip("\n")


def mcp_prompts_markdown() -> str:
    """The MCP server's prompts: name, title, what it gives, and each (string) argument."""
    from memkeeper.mcp.prompts import PROMPTS

    out: list[str] = []
    for prompt in PROMPTS:
        out += [f"### `{prompt.name}`", "", f"**{prompt.title}.** {prompt.description}", ""]
        out += ["| argument | required | what it is |", "|---|---|---|"]
        for arg in prompt.mcp_prompt().arguments or []:
            required = "yes" if arg.required else "no"
            out.append(f"| `{arg.name}` | {required} | {_cell(arg.description or '')} |")
        out.append("")
    return "\n".join(out).strip("\n")


def mcp_protocol_versions_markdown() -> str:
    """The protocol versions the server accepts, newest first, with how each starts."""
    from memkeeper.mcp.fast_call import MODERN_VERSIONS
    from memkeeper.mcp.gate import HANDSHAKE_VERSIONS

    rows = ["| protocol version | how a client starts |", "|---|---|"]
    for version in sorted(MODERN_VERSIONS, reverse=True):
        rows.append(
            f"| `{version}` | no handshake: every request carries its version and client "
            "information, and `server/discover` describes the server |"
        )
    for version in sorted(HANDSHAKE_VERSIONS, reverse=True):
        rows.append(f"| `{version}` | the `initialize` handshake |")
    return "\n".join(rows)


RENDERERS: dict[str, Callable[[], str]] = {
    "config-keys": config_keys_markdown,
    "mcp-prompts": mcp_prompts_markdown,
    "mcp-protocol-versions": mcp_protocol_versions_markdown,
}


def render(markdown: str, page: str) -> str:
    """``markdown`` (the page at ``page``, relative to docs/) with its markers replaced;
    ValueError for an unknown marker or a missing expected one."""
    found = {match["name"] for match in MARKER.finditer(markdown)}
    unknown = found - set(RENDERERS)
    if unknown:
        raise ValueError(f"{page}: unknown generated part(s) {sorted(unknown)}")
    missing = EXPECTED.get(page, set()) - found
    if missing:
        raise ValueError(f"{page}: the marker(s) {sorted(missing)} are missing")
    return MARKER.sub(lambda match: RENDERERS[match["name"]](), markdown)


def on_page_markdown(markdown: str, page: Any, **_kwargs: Any) -> str:
    """MkDocs' hook: replace this page's markers."""
    return render(markdown, page.file.src_uri)


ROLE = re.compile(
    r":(?:class|meth|func|mod|data|attr|exc|obj):<code>(?P<tilde>~?)(?P<name>[^<]+)</code>"
)
"""A Sphinx cross-reference as the docstrings write it (``:class:`~memkeeper.Memory```),
once rendered: the role's name before the code span."""


def plain_roles(html_text: str) -> str:
    """The API page's HTML with the docstrings' Sphinx roles shown as plain code, and their
    literal-block markers (a paragraph ending in ``::``) as a colon."""

    def code(match: re.Match[str]) -> str:
        name = match["name"].rsplit(".", 1)[-1] if match["tilde"] else match["name"]
        return f"<code>{name}</code>"

    return ROLE.sub(code, html_text).replace("::</p>", ":</p>")


def on_page_content(html_text: str, page: Any, **_kwargs: Any) -> str:
    """MkDocs' hook: tidy the docstrings rendered into the Python API page."""
    return plain_roles(html_text) if page.file.src_uri == "reference/python-api.md" else html_text
