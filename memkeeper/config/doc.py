"""Render the documented default configuration (config.toml) from the schema.

``config.toml`` at the repository root and ``memkeeper config init`` both come from here, so
the documentation of every key is written once, next to its type and default, and cannot drift.
"""

from __future__ import annotations

import json
import textwrap
import typing

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from memkeeper.config.schema import Config
from memkeeper.config.view import as_model

HEADER = """\
# memkeeper configuration — every key, with its default.
#
# Generated from memkeeper/config/schema.py (memkeeper config init writes this same file).
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


def bounds(field: FieldInfo) -> tuple[str, float, str, float] | None:
    """A number field's bounds, ``(">=" or ">", low, "<=" or "<", high)``; None if not a
    number, or (a schema bug the tests catch) missing a bound."""
    low: tuple[str, float] | None = None
    high: tuple[str, float] | None = None
    for item in field.metadata:
        for attr, op in (("ge", ">="), ("gt", ">")):
            if getattr(item, attr, None) is not None:
                low = (op, getattr(item, attr))
        for attr, op in (("le", "<="), ("lt", "<")):
            if getattr(item, attr, None) is not None:
                high = (op, getattr(item, attr))
    if low is None or high is None:
        return None
    return (*low, *high)


def is_number(field: FieldInfo) -> bool:
    annotation = field.annotation
    options = typing.get_args(annotation) or (annotation,)
    return any(option in (int, float) for option in options if option is not bool)


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else repr(value)


def value_range(field: FieldInfo) -> str:
    """``Range: 1 to 600000.`` (``more than 0``/``less than`` where a bound is excluded)."""
    if not is_number(field):
        return ""
    found = bounds(field)
    if found is None:
        return ""
    low_op, low, high_op, high = found
    low_text = _number(low) if low_op == ">=" else f"more than {_number(low)}"
    high_text = _number(high) if high_op == "<=" else f"less than {_number(high)}"
    return f"Range: {low_text} to {high_text}."


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
        lines.extend(_comment(" ".join(filter(None, [field.description, value_range(field)]))))
        lines.append(f"{name} = {_toml_value(value)}")
    for name, value, text in tables:
        lines.extend(_render_table(value, f"{prefix}.{name}" if prefix else name, text))
    return lines


def render_config(config: Config | None = None) -> str:
    """The TOML text of ``config`` (defaults when None), every key commented."""
    body = _render_table(Config() if config is None else as_model(config), "", None)
    return HEADER + "\n" + "\n".join(body).lstrip("\n") + "\n"


DEFAULTS_HEADER = '''\
"""The default configuration as plain data, for start-up without pydantic (generated).

Generated from the schema (memkeeper/config/schema.py) by
:func:`memkeeper.config.doc.render_defaults`; do not edit: ``python -c 'from
memkeeper.config.doc import render_defaults as r; print(r(), end="")' > /tmp/defaults.py &&
mv /tmp/defaults.py memkeeper/config/defaults.py`` (through a file elsewhere: importing the
schema reads this module, so it must not be emptied first; tests/test_config_view.py checks
the two match).
:mod:`memkeeper.config.view` reads it when no config file exists, so that the memory commands
start without building the schema (README, Performance: start-up).
"""

from typing import Any

DEFAULTS: dict[str, Any] = '''


def _python_value(value: object, indent: int) -> list[str]:
    """``value`` as Python source, a dict one key a line (ruff format leaves it as it is)."""
    if isinstance(value, dict):
        pad = "    " * (indent + 1)
        lines = ["{"]
        for key, item in value.items():
            rendered = _python_value(item, indent + 1)
            lines.append(f"{pad}{json.dumps(key)}: {rendered[0]}")
            lines.extend(rendered[1:])
            lines[-1] += ","
        lines.append("    " * indent + "}")
        return lines
    if isinstance(value, str):
        return [json.dumps(value)]
    if isinstance(value, bool | int | float):
        return [repr(value)]
    raise TypeError(f"cannot render {value!r} as a plain default")


def render_defaults() -> str:
    """The text of :mod:`memkeeper.config.defaults`: ``Config().model_dump()`` as a literal."""
    return DEFAULTS_HEADER + "\n".join(_python_value(Config().model_dump(), 0)) + "\n"
