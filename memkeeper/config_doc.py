"""Render the documented default configuration (config.toml) from the schema.

``config.toml`` at the repository root and ``memkeeper config init`` both come from here, so
the documentation of every key is written once, next to its type and default, and cannot drift.
"""

from __future__ import annotations

import json
import textwrap

from pydantic import BaseModel

from memkeeper.config import Config

HEADER = """\
# memkeeper configuration — every key, with its default.
#
# Generated from memkeeper/config.py (memkeeper config init writes this same file).
# Delete what you do not change: a missing key means its default. Unknown keys are errors.
# Checked with: memkeeper config check    Effective values: memkeeper config show
"""


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"cannot render {value!r} as TOML")


def _comment(text: str) -> list[str]:
    return [f"# {line}" for line in textwrap.wrap(text, width=92)]


def _render_table(model: BaseModel, prefix: str, description: str | None) -> list[str]:
    lines: list[str] = []
    if prefix:
        lines.append("")
        lines.extend(_comment(description or ""))
        lines.append(f"[{prefix}]")
    tables = []
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            tables.append((name, value, field.description))
            continue
        lines.extend(_comment(field.description or ""))
        lines.append(f"{name} = {_toml_value(value)}")
    for name, value, text in tables:
        lines.extend(_render_table(value, f"{prefix}.{name}" if prefix else name, text))
    return lines


def render_config(config: Config | None = None) -> str:
    """The TOML text of ``config`` (defaults when None), every key commented."""
    body = _render_table(config or Config(), "", None)
    return HEADER + "\n" + "\n".join(body).lstrip("\n") + "\n"
