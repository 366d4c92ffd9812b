"""Importing and exporting memories.

Two formats come in:

* the seed-000 agent's ``agent_memory.json`` — ``{"facts": {key: value}, "notes": [{"time":
  "2026-07-01 10:00", "note": "..."}]}`` — imported for one user (``--user``);
* memkeeper's own JSON Lines — one memory per line, every field — which ``export`` writes.

The whole file is read and validated before anything is written; a malformed file is rejected
with the line or key at fault and the database is left as it was. Importing the same file
again changes nothing: values already present are recognised and skipped, not re-confirmed.
A file with nothing to import (empty, or an agent file without facts or notes) is refused; a
line whose id is already stored with different content is left alone and reported as a
conflict (counted in the report). Times must lie in :data:`memkeeper.clock.USER_TIME_RANGE`.

This module holds the entry points and the export; reading and checking a file is
:mod:`memkeeper.store.import_check`, writing what it found :mod:`memkeeper.store.import_apply`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from memkeeper import validation
from memkeeper.errors import ImportFileError, InvalidInput
from memkeeper.store import MemoryStore
from memkeeper.store.import_apply import (
    ImportReport,
    Progress,
    import_agent_json,
    import_jsonl,
)
from memkeeper.store.import_check import (
    detect_format,
    parse_agent_json,
    parse_jsonl,
    read_text,
    timezone_named,
)

__all__ = [
    "FORMATS",
    "ImportReport",
    "detect_format",
    "export_lines",
    "export_to",
    "import_file",
    "timezone_named",
]

FORMATS = ("auto", "agent-json", "jsonl")


def import_file(
    store: MemoryStore,
    path: Path,
    *,
    user_id: str | None = None,
    namespace: str = "",
    fmt: str = "auto",
    timezone: str | None = None,
    as_new: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """Import a file into the store; validates everything before writing anything.

    ``as_new`` (agent_memory.json only) imports entries a forget erased as statements made
    now, instead of leaving them forgotten.
    """
    path = Path(path)
    if fmt not in FORMATS:
        raise InvalidInput(f"format must be one of {', '.join(FORMATS)}")
    text = read_text(path)
    if not text.strip():
        raise ImportFileError(f"{path}: the file is empty; there is nothing to import")
    kind = detect_format(path, text) if fmt == "auto" else fmt
    limits = store.config.limits
    if kind == "agent-json":
        if user_id is None:
            raise InvalidInput("importing an agent_memory.json needs --user: whose memory is it?")
        user_id, namespace = validation.owner(user_id, namespace, max_chars=limits.max_key_chars)
        zone = timezone_named(timezone or store.config.service.timezone)
        entries = parse_agent_json(path, text, limits, zone)
        if not entries:
            raise ImportFileError(f"{path}: no facts and no notes; there is nothing to import")
        return import_agent_json(
            store,
            entries,
            user_id,
            namespace,
            f"import:{path.name}",
            as_new=as_new,
            progress=progress,
        )
    if as_new:
        raise InvalidInput(
            "--as-new applies to agent_memory.json only: JSON Lines carry each entry's own id "
            "and times"
        )
    if namespace:
        raise InvalidInput(
            "--namespace applies to agent_memory.json only: JSON Lines carry each entry's own"
        )
    records = parse_jsonl(path, text, limits)
    filtered_out = 0
    if user_id is not None:
        kept = [(n, image) for n, image in records if image["user_id"] == user_id]
        filtered_out = len(records) - len(kept)
        records = kept
    report = import_jsonl(store, records, path, progress=progress)
    report.filtered_out = filtered_out
    return report


def export_lines(
    store: MemoryStore, *, user_id: str | None = None, namespace: str | None = None
) -> Iterator[str]:
    """The JSON Lines export: one memory per line, hot and cold, every field."""
    for memory in store.list_memories(user_id, namespace=namespace):
        image = memory.to_image()
        image["pinned"] = bool(image["pinned"])
        image.pop("last_used_at", None)
        yield json.dumps(image, ensure_ascii=False, sort_keys=True)


def export_to(store: MemoryStore, out: TextIO, **filters: Any) -> int:
    """Write the export to ``out``; returns the number of memories written."""
    written = 0
    for line in export_lines(store, **filters):
        out.write(line + "\n")
        written += 1
    return written
