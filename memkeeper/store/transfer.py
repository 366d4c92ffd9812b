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
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memkeeper import validation
from memkeeper.clock import USER_TIME_RANGE_TEXT, to_db, within_user_range
from memkeeper.errors import ImportFileError, InputFileMissing, InvalidInput
from memkeeper.maintenance.jobkit import batched
from memkeeper.records import KEYED_KINDS, STATES
from memkeeper.storage.schema import COLD_COLUMNS, MEMORY_COLUMNS
from memkeeper.storage.sqlite import immediate_transaction
from memkeeper.storage.transitions import Transition, apply, hot_image, supersede, with_changes
from memkeeper.store import MemoryStore

FORMATS = ("auto", "agent-json", "jsonl")
_TIME_FIELDS = ("created_at", "updated_at", "last_accessed_at", "state_since", "retired_at")


@dataclass
class ImportReport:
    """What an import did: entries created, already present, and conflicts left alone."""

    format: str
    created: int = 0
    unchanged: int = 0
    superseded: int = 0
    conflicts: list[str] = field(default_factory=list)
    filtered_out: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "created": self.created,
            "unchanged": self.unchanged,
            "superseded": self.superseded,
            "conflicting": len(self.conflicts),
            "conflicts": self.conflicts,
            "filtered_out": self.filtered_out,
        }


def timezone_named(name: str) -> ZoneInfo:
    """The IANA timezone ``name`` (``Asia/Shanghai``); InvalidInput naming it if unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidInput(
            f"unknown timezone {name!r}; expected an IANA name such as UTC or Asia/Shanghai"
        ) from None


def _in_range(moment: datetime, what: str) -> datetime:
    """``moment`` in UTC if memkeeper can compute with it; InvalidInput naming it if not."""
    utc = within_user_range(moment)
    if utc is None:
        raise InvalidInput(f"{what} {moment.isoformat()} is out of range: {USER_TIME_RANGE_TEXT}")
    return utc


def _read_text(path: Path) -> str:
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


def detect_format(path: Path, text: str) -> str:
    """``agent-json`` for a single JSON object with facts/notes, else ``jsonl``."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return "jsonl"
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return "jsonl"
    if isinstance(data, dict) and (set(data) & {"facts", "notes"} or not data):
        return "agent-json"
    return "jsonl"


# -- agent_memory.json -----------------------------------------------------------------------


@dataclass(frozen=True)
class _AgentEntry:
    kind: str
    key: str | None
    value: str
    created_at: datetime | None
    where: str


def _parse_note_time(text: Any, where: str, zone: ZoneInfo) -> datetime:
    if not isinstance(text, str):
        raise ImportFileError(f"{where}.time: must be text like '2026-07-01 10:00'")
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ImportFileError(
            f"{where}.time: {text[:40]!r} is not a time like '2026-07-01 10:00'"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    try:
        return _in_range(moment, "time")
    except InvalidInput as exc:
        raise ImportFileError(f"{where}.time: {exc}") from None


def _parse_agent_json(
    path: Path, text: str, store: MemoryStore, zone: ZoneInfo
) -> list[_AgentEntry]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFileError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ImportFileError(f"{path}: expected a JSON object with 'facts' and 'notes'")
    unknown = sorted(set(data) - {"facts", "notes"})
    if unknown:
        raise ImportFileError(f"{path}: key {unknown[0]!r}: unknown; expected 'facts' and 'notes'")
    entries: list[_AgentEntry] = []
    facts = data.get("facts", {})
    if not isinstance(facts, dict):
        raise ImportFileError(f"{path}: key 'facts': must be an object of key: value")
    limits = store.config.limits
    for key, value in facts.items():
        where = f"{path}: facts.{key}"
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ImportFileError(f"{where}: value must be text or a number")
        try:
            validation.identifier("key", key, max_chars=limits.max_key_chars)
            text_value = validation.text("value", str(value), max_bytes=limits.max_value_bytes)
        except InvalidInput as exc:
            raise ImportFileError(f"{where}: {exc}") from None
        entries.append(_AgentEntry("fact", key, text_value, None, where))
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
        entries.append(_AgentEntry("note", None, body, created, where))
    return entries


def _note_exists(store: MemoryStore, user_id: str, namespace: str, entry: _AgentEntry) -> bool:
    params = [user_id, namespace, entry.value]
    where = "user_id = ? AND namespace = ? AND kind = 'note' AND value = ?"
    if entry.created_at is not None:
        where += " AND created_at = ?"
        params.append(to_db(entry.created_at))
    if next(iter(store.storage.hot.query(f"SELECT 1 FROM memories WHERE {where}", params)), None):
        return True
    cold = store.storage.cold(create=False)
    return cold is not None and bool(
        next(iter(cold.query(f"SELECT 1 FROM cold_memories WHERE {where}", params)), None)
    )


def _import_agent_json(
    store: MemoryStore, entries: list[_AgentEntry], user_id: str, namespace: str, source: str
) -> ImportReport:
    report = ImportReport("agent-json")
    for batch in batched(entries, store.config.database.batch_size):
        with store.storage.lock, immediate_transaction(store.storage.hot):
            now = store.now()
            for entry in batch:
                if entry.kind == "note":
                    if _note_exists(store, user_id, namespace, entry):
                        report.unchanged += 1
                        continue
                    image = store._new_image(
                        user_id=user_id,
                        namespace=namespace,
                        kind="note",
                        key=None,
                        value=entry.value,
                        source=source,
                        confidence=0.9,
                        pinned=False,
                        ttl_days=None,
                        now=now,
                        created_at=entry.created_at,
                    )
                    apply(
                        store.storage,
                        [
                            Transition(
                                image["id"], None, image, "create", f"imported ({entry.where})"
                            )
                        ],
                        actor="cli:import",
                        now=now,
                    )
                    report.created += 1
                    continue
                assert entry.key is not None
                current = store._current(user_id, namespace, "fact", entry.key)
                if current is not None and current["value"] == entry.value:
                    report.unchanged += 1
                    continue
                transitions, _ = store._remember_plan(
                    user_id,
                    namespace,
                    "fact",
                    entry.key,
                    entry.value,
                    0.9,
                    source,
                    None,
                    None,
                    now,
                )
                apply(store.storage, transitions, actor="cli:import", now=now)
                report.created += 1
                report.superseded += int(current is not None)
    return report


# -- JSON Lines ------------------------------------------------------------------------------


def _check_line(record: Any, where: str, store: MemoryStore) -> dict[str, Any]:
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
    limits = store.config.limits
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
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidInput("access_count must be a whole number of at least 0")
        for name in _TIME_FIELDS:
            if name not in image:
                continue
            value = image[name]
            if value is None and name == "last_accessed_at":
                continue
            if not isinstance(value, str):
                raise InvalidInput(f"{name} must be an ISO-8601 time")
            try:
                moment = datetime.fromisoformat(value)
            except ValueError:
                raise InvalidInput(f"{name} is not an ISO-8601 time") from None
            if moment.tzinfo is None:
                raise InvalidInput(f"{name} has no timezone")
            image[name] = to_db(_in_range(moment, name))
        if state == "cold":
            validation.identifier("cold_reason", image["cold_reason"], max_chars=64)
    except InvalidInput as exc:
        raise ImportFileError(f"{where}: {exc}") from None
    return with_changes(image)


def _parse_jsonl(path: Path, text: str, store: MemoryStore) -> list[tuple[int, dict[str, Any]]]:
    records: list[tuple[int, dict[str, Any]]] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportFileError(f"{where}: invalid JSON: {exc.msg}") from None
        image = _check_line(record, where, store)
        if image["id"] in seen:
            raise ImportFileError(
                f"{where}: id {image['id']!r} already used on line {seen[image['id']]}"
            )
        seen[image["id"]] = number
        records.append((number, image))
    return records


def _import_jsonl(
    store: MemoryStore, records: list[tuple[int, dict[str, Any]]], path: Path
) -> ImportReport:
    report = ImportReport("jsonl")
    hot_lines = [(n, image) for n, image in records if image["state"] != "cold"]
    cold_lines = [(n, image) for n, image in records if image["state"] == "cold"]
    for batch in batched(hot_lines, store.config.database.batch_size):
        with store.storage.lock, immediate_transaction(store.storage.hot):
            now = store.now()
            existing = store.storage.current_images([image["id"] for _, image in batch])
            for number, image in batch:
                reason = f"imported from {path.name} line {number}"
                if image["id"] in existing:
                    _count_existing(report, existing[image["id"]], image, number)
                    continue
                transitions = [Transition(image["id"], None, image, "create", reason)]
                current = None
                if image["key"] is not None and image["state"] in ("active", "pending_review"):
                    current = store._current(
                        image["user_id"], image["namespace"], image["kind"], image["key"]
                    )
                if current is not None:
                    if current["value"] == image["value"]:
                        report.unchanged += 1
                        continue
                    report.superseded += 1
                    if current["updated_at"] >= image["updated_at"]:
                        transitions = [
                            Transition(
                                image["id"],
                                None,
                                hot_image(image, "superseded", now),
                                "create",
                                reason + " (older than current)",
                            )
                        ]
                    else:
                        transitions.insert(
                            0,
                            supersede(
                                current, image["id"], now, f"replaced by imported {image['id']}"
                            ),
                        )
                apply(store.storage, transitions, actor="cli:import", now=now)
                report.created += 1
    for batch in batched(cold_lines, store.config.database.batch_size):
        existing = store.storage.current_images([image["id"] for _, image in batch])
        transitions = []
        for number, image in batch:
            if image["id"] in existing:
                _count_existing(report, existing[image["id"]], image, number)
                continue
            transitions.append(
                Transition(
                    image["id"], None, image, "create", f"imported from {path.name} line {number}"
                )
            )
        outcomes = apply(store.storage, transitions, actor="cli:import", now=store.now())
        report.created += sum(outcome.applied for outcome in outcomes)
        for outcome in outcomes:
            if not outcome.applied:  # stored meanwhile by another process
                report.conflicts.append(
                    f"id {outcome.transition.memory_id} was stored meanwhile; left as it is"
                )
    return report


def _count_existing(
    report: ImportReport, stored: dict[str, Any], image: dict[str, Any], number: int
) -> None:
    if stored == image:
        report.unchanged += 1
    else:
        report.conflicts.append(
            f"line {number}: id {image['id']} exists with different content; left as it is"
        )


def import_file(
    store: MemoryStore,
    path: Path,
    *,
    user_id: str | None = None,
    namespace: str = "",
    fmt: str = "auto",
    timezone: str | None = None,
) -> ImportReport:
    """Import a file into the store; validates everything before writing anything."""
    path = Path(path)
    if fmt not in FORMATS:
        raise InvalidInput(f"format must be one of {', '.join(FORMATS)}")
    text = _read_text(path)
    if not text.strip():
        raise ImportFileError(f"{path}: the file is empty; there is nothing to import")
    kind = detect_format(path, text) if fmt == "auto" else fmt
    if kind == "agent-json":
        if user_id is None:
            raise InvalidInput("importing an agent_memory.json needs --user: whose memory is it?")
        user_id, namespace = store._owner(user_id, namespace)
        zone = timezone_named(timezone or store.config.service.timezone)
        entries = _parse_agent_json(path, text, store, zone)
        if not entries:
            raise ImportFileError(f"{path}: no facts and no notes; there is nothing to import")
        return _import_agent_json(store, entries, user_id, namespace, f"import:{path.name}")
    if namespace:
        raise InvalidInput(
            "--namespace applies to agent_memory.json only: JSON Lines carry each entry's own"
        )
    records = _parse_jsonl(path, text, store)
    filtered_out = 0
    if user_id is not None:
        kept = [(n, image) for n, image in records if image["user_id"] == user_id]
        filtered_out = len(records) - len(kept)
        records = kept
    report = _import_jsonl(store, records, path)
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
