"""What the commands print: one line (:func:`echo`) or one JSON document (:func:`print_json`),
without loading click.

:func:`echo` writes what ``click.echo`` writes: the text, a newline, a flush. It hands over to
``click.echo`` itself whenever click would do more than that: an escape sequence (which click
strips from output that is not a terminal), a stream whose encoding click corrects (ASCII), no
stream at all, or Windows' console. So the quick start (:mod:`memkeeper.cli.quick`) and the
click command line print the same bytes, and the common case needs no click.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

_RAW_IN_JSON = re.compile("[\u0080-\u009f\u2028\u2029]")
"""Characters json.dumps leaves raw with ensure_ascii=False that a terminal may act on: the C1
controls (U+009B starts an escape sequence on some terminals) and the line separators."""


def _plain(stream: Any) -> bool:
    """True when ``click.echo`` would write to ``stream`` as it is (see the module's docstring)."""
    if stream is None or sys.platform == "win32":
        return False
    encoding = (getattr(stream, "encoding", None) or "ascii").replace("_", "-").lower()
    return encoding in ("utf-8", "utf8")


def echo(text: str, *, err: bool = False) -> None:
    """Print ``text`` and a newline to stdout (stderr with ``err``), as ``click.echo`` does."""
    stream = sys.stderr if err else sys.stdout
    if "\x1b" in text or not _plain(stream):
        import click

        click.echo(text, err=err)
        return
    stream.write(text + "\n")
    stream.flush()


def _finite(data: Any) -> Any:
    """``data`` with every infinite or NaN float replaced by None."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: _finite(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(value) for value in data]
    return data


def print_json(data: Any) -> None:
    """``data`` as indented JSON, exact for a program and inert on a terminal: control
    characters are escaped (``\\u009b``), which JSON decodes back to the same text."""
    try:
        text = json.dumps(
            data, ensure_ascii=False, indent=2, sort_keys=False, default=str, allow_nan=False
        )
    except ValueError:  # Infinity and NaN are not JSON: a non-finite number prints as null
        text = json.dumps(_finite(data), ensure_ascii=False, indent=2, sort_keys=False, default=str)
    echo(_RAW_IN_JSON.sub(lambda found: f"\\u{ord(found.group()):04x}", text))
