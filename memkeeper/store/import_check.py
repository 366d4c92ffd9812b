"""Reading and checking an import file, before anything is written.

The whole file is read and every entry validated here — the same checks as the API's, against
the store's ``[limits]`` — so that a malformed file is rejected with the line or key at fault
and the database is left as it was. Nothing here touches the database: the checked entries are
applied by :mod:`memkeeper.store.import_apply`. The formats are described in
:mod:`memkeeper.store.transfer`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memkeeper import validation
from memkeeper.clock import parse_time, to_db
from memkeeper.config import LimitsSection
from memkeeper.errors import ImportFileError, InputFileMissing, InvalidInput
from memkeeper.records import KEYED_KINDS, STATES
from memkeeper.storage.columns import COLD_COLUMNS, MEMORY_COLUMNS
from memkeeper.storage.transitions import Image, with_changes

_TIME_FIELDS = ("created_at", "updated_at", "last_accessed_at", "state_since", "retired_at")


def timezone_named(name: str) -> ZoneInfo:
    """The IANA timezone ``name`` (``Asia/Shanghai``); InvalidInput naming it if unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidInput(
            f"unknown timezone {name!r}; expected an IANA name such as UTC or Asia/Shanghai"
        ) from None


def read_text(path: Path) -> str:
    """The import file's text (UTF-8, a BOM allowed); a clear error if it cannot be read."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputFileMissing(f"import file {path} does not exist") from None
    except IsADirectoryError:
        raise InputFileMissing(f"import file {path} is a directory") from None
    except OSError as exc:
        raise InputFileMissing(f"cannot read import file {path}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ImportFileError(
            f"{path}: line {line}: not UTF-8 text (bad byte at offset {exc.start})"
        ) from None


TOO_DEEP = "invalid JSON: nested too deeply"
MAX_COUNT = 10**15
"""The largest access_count an import takes (SQLite's integers stop at 2**63 - 1)."""


def too_deep_line(text: str) -> int:
    """The line where ``text``'s brackets nest deepest (strings skipped): where a JSON
    document too deep for the parser goes wrong."""
    depth = deepest = 0
    line = where = 1
    in_string = escaped = False
    for char in text:
        if char == "\n":
            line += 1
        elif in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, line
        elif char in "]}":
            depth -= 1
    return where


def detect_format(path: Path, text: str) -> str:
    """``agent-json`` for a single JSON object with facts/notes, else ``jsonl``."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return "jsonl"
    try:
        data = json.loads(text)
    except RecursionError:  # too deep to tell: the suffix decides (either parser says why)
        return "agent-json" if path.suffix.lower() == ".json" else "jsonl"
    except ValueError:  # not one JSON document
        return "jsonl"
    if isinstance(data, dict) and (set(data) & {"facts", "notes"} or not data):
        return "agent-json"
    return "jsonl"


# -- agent_memory.json -----------------------------------------------------------------------


@dataclass(frozen=True)
class AgentEntry:
    """One checked fact or note of an agent_memory.json, with where it is in the file."""

    kind: str
    key: str | None
    value: str
    created_at: datetime | None
    where: str


def _parse_note_time(text: Any, where: str, zone: ZoneInfo) -> datetime:
    if not isinstance(text, str):
        raise ImportFileError(f"{where}.time: must be text like '2026-07-01 10:00'")
    try:
        return parse_time(text, naive=zone)
    except InvalidInput as exc:
        raise ImportFileError(f"{where}.time: {exc}") from None


def parse_agent_json(
    path: Path, text: str, limits: LimitsSection, zone: ZoneInfo
) -> list[AgentEntry]:
    """Every fact and note of an agent_memory.json, checked; notes' naive times in ``zone``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFileError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise ImportFileError(f"{path}: line {too_deep_line(text)}: {TOO_DEEP}") from None
    except ValueError as exc:  # a number with more digits than Python converts
        raise ImportFileError(f"{path}: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ImportFileError(f"{path}: expected a JSON object with 'facts' and 'notes'")
    unknown = sorted(set(data) - {"facts", "notes"})
    if unknown:
        raise ImportFileError(f"{path}: key {unknown[0]!r}: unknown; expected 'facts' and 'notes'")
    entries: list[AgentEntry] = []
    facts = data.get("facts", {})
    if not isinstance(facts, dict):
        raise ImportFileError(f"{path}: key 'facts': must be an object of key: value")
    for key, value in facts.items():
        where = f"{path}: facts.{key}"
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ImportFileError(f"{where}: value must be text or a number")
        try:
            validation.identifier("key", key, max_chars=limits.max_key_chars)
            text_value = validation.text("value", str(value), max_bytes=limits.max_value_bytes)
        except InvalidInput as exc:
            raise ImportFileError(f"{where}: {exc}") from None
        entries.append(AgentEntry("fact", key, text_value, None, where))
    notes = data.get("notes", [])
    if not isinstance(notes, list):
        raise ImportFileError(f"{path}: key 'notes': must be a list")
    for index, note in enumerate(notes):
        where = f"{path}: notes[{index}]"
        if not isinstance(note, dict) or "note" not in note:
            raise ImportFileError(f"{where}: must be an object with 'note' (and 'time')")
        extra = sorted(set(note) - {"note", "time"})
        if extra:
            raise ImportFileError(f"{where}.{extra[0]}: unknown key")
        try:
            body = validation.text("note", note["note"], max_bytes=limits.max_value_bytes)
        except InvalidInput as exc:
            raise ImportFileError(f"{where}.note: {exc}") from None
        created = _parse_note_time(note["time"], where, zone) if "time" in note else None
        entries.append(AgentEntry("note", None, body, created, where))
    return entries


# -- JSON Lines ------------------------------------------------------------------------------


def _check_line(record: Any, where: str, limits: LimitsSection) -> Image:
    if not isinstance(record, dict):
        raise ImportFileError(f"{where}: must be a JSON object")
    state = record.get("state")
    if state not in STATES:
        raise ImportFileError(f"{where}: field 'state': must be one of {', '.join(STATES)}")
    columns = COLD_COLUMNS if state == "cold" else MEMORY_COLUMNS
    required = [c for c in columns if c != "last_used_at"]
    missing = [c for c in required if c not in record]
    if missing:
        raise ImportFileError(f"{where}: field {missing[0]!r} is missing")
    extra = sorted(set(record) - set(COLD_COLUMNS))
    if extra:
        raise ImportFileError(f"{where}: field {extra[0]!r}: unknown")
    try:
        image = {c: record[c] for c in required}
        validation.identifier("id", image["id"], max_chars=64)
        validation.identifier("user_id", image["user_id"], max_chars=limits.max_key_chars)
        validation.identifier(
            "namespace", image["namespace"], max_chars=limits.max_key_chars, allow_empty=True
        )
        validation.kind(image["kind"])
        if image["kind"] in KEYED_KINDS or image["key"] is not None:
            validation.identifier("key", image["key"], max_chars=limits.max_key_chars)
        validation.text("value", image["value"], max_bytes=limits.max_value_bytes)
        validation.text("source", image["source"], max_bytes=1024, allow_empty=True)
        image["confidence"] = validation.confidence(image["confidence"])
        if not isinstance(image["pinned"], bool):
            raise InvalidInput("pinned must be true or false")
        image["pinned"] = int(image["pinned"])
        validation.ttl_days(image["ttl_days"])
        count = image["access_count"]
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_COUNT:
            raise InvalidInput(f"access_count must be a whole number from 0 to {MAX_COUNT:,}")
        for name in _TIME_FIELDS:
            if name not in image:
                continue
            value = image[name]
            if value is None and name == "last_accessed_at":
                continue
            if not isinstance(value, str):
                raise InvalidInput(f"{name} must be an ISO-8601 time")
            image[name] = to_db(parse_time(value, naive=None, what=name))
        if state == "cold":
            validation.identifier("cold_reason", image["cold_reason"], max_chars=64)
    except InvalidInput as exc:
        raise ImportFileError(f"{where}: {exc}") from None
    return with_changes(image)


def parse_jsonl(path: Path, text: str, limits: LimitsSection) -> list[tuple[int, Image]]:
    """Every line of a JSON Lines export as a checked image, with its line number."""
    records: list[tuple[int, Image]] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportFileError(f"{where}: invalid JSON: {exc.msg}") from None
        except RecursionError:
            raise ImportFileError(f"{where}: {TOO_DEEP}") from None
        except ValueError as exc:  # a number with more digits than Python converts
            raise ImportFileError(f"{where}: invalid JSON: {exc}") from None
        image = _check_line(record, where, limits)
        if image["id"] in seen:
            raise ImportFileError(
                f"{where}: id {image['id']!r} already used on line {seen[image['id']]}"
            )
        seen[image["id"]] = number
        records.append((number, image))
    return records
