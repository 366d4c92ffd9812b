"""The port a memkeeper MCP server says it listens on, read from its JSON log lines.

Tests start servers on port 0 (the system picks a free port, never another process's) and
read the real one from the server's own "MCP server listening" line: a port picked
beforehand and checked by connecting to it could be another test's server's.
"""

from __future__ import annotations

import contextlib
import json


def listening_port(log_text: str) -> int | None:
    """The port of the log's "MCP server listening" line (None until it is logged)."""
    for line in log_text.splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("event") == "MCP server listening":
                return int(str(entry["url"]).rsplit(":", 1)[1].split("/", 1)[0])
    return None
