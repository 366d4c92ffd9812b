"""What a memkeeper backup directory holds, and the checks a backup must pass to be trusted.

A backup directory holds exactly the two database files (``memory.db`` and
``memory-cold.db``, whatever the live files are called) in rollback-journal mode, and
``manifest.json``, written last, describing them:

* ``format`` / ``format_version``: ``memkeeper-backup`` / 1;
* ``taken_at``: the UTC time of the snapshot (the store's clock);
* ``memkeeper_version``: the version that wrote it;
* after ``--prune-forgotten``: ``pruned_at`` and what was applied;
* per file: ``application_id``, the applied ``schema`` steps, ``rows`` per table, ``bytes``
  and ``sha256``.

:func:`verify` trusts none of it blindly: size and sha256 (a truncated or altered file),
``PRAGMA integrity_check``, the application id (a swapped or foreign file), the schema steps
(a backup written by a newer memkeeper is refused; an older one is migrated forward when the
restored file is next opened) and the row counts.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from memkeeper.errors import DatabaseError, InputFileMissing
from memkeeper.storage.sqlite.opening import FileKind
from memkeeper.storage.sqlite.schema import COLD, HOT
from memkeeper.storage.sqlite.steps import applied_names

MANIFEST = "manifest.json"
FORMAT = "memkeeper-backup"
FORMAT_VERSION = 1
FILES: dict[str, tuple[str, FileKind]] = {
    "hot": ("memory.db", HOT),
    "cold": ("memory-cold.db", COLD),
}
"""Each file of a backup: its role, its name in the backup directory, and its kind."""


def count_rows(conn: sqlite3.Connection) -> dict[str, int]:
    """Rows per table (virtual tables skipped: their shadow tables are counted)."""
    names = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name"
        )
    ]
    return {name: conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in names}


def applied_steps(conn: sqlite3.Connection, kind: FileKind) -> list[str]:
    """The schema steps recorded in a file, in the order they were applied."""
    return applied_names(conn, kind.migrations.name)


def describe(conn: sqlite3.Connection, kind: FileKind) -> dict[str, Any]:
    """A file's application id, schema steps and row counts, read in the caller's snapshot."""
    return {
        "application_id": conn.execute("PRAGMA application_id").fetchone()[0],
        "schema": applied_steps(conn, kind),
        "rows": count_rows(conn),
    }


def sha256_of(path: Path) -> str:
    """The sha256 hex of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection that never creates or changes a file (no journal, no WAL)."""
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of a backup directory, checked for shape; raises when it is not one."""
    path = Path(directory) / MANIFEST
    if not Path(directory).is_dir():
        raise InputFileMissing(f"backup directory {directory} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputFileMissing(
            f"{directory} is not a memkeeper backup: it has no {MANIFEST}"
        ) from None
    except (OSError, ValueError) as exc:
        raise DatabaseError(f"{path} cannot be read as a backup manifest ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DatabaseError(f"{path} is not a memkeeper backup manifest")
    if data.get("format_version") != FORMAT_VERSION:
        raise DatabaseError(
            f"{path} has backup format {data.get('format_version')!r}; this memkeeper reads "
            f"format {FORMAT_VERSION} (a newer memkeeper wrote it?)"
        )
    files = data.get("files")
    if not isinstance(files, dict) or set(files) != set(FILES):
        raise DatabaseError(f"{path} does not describe both files (hot and cold)")
    return data


def check_file(path: Path, kind: FileKind, expected: dict[str, Any]) -> None:
    """Raise DatabaseError unless the file at ``path`` is exactly what ``expected`` says."""
    if not path.is_file():
        raise DatabaseError(f"backup file {path} is missing")
    size = path.stat().st_size
    if size != expected.get("bytes") or sha256_of(path) != expected.get("sha256"):
        raise DatabaseError(
            f"backup file {path} is not the file its manifest describes ({size} bytes, "
            f"expected {expected.get('bytes')}; or its sha256 differs): truncated or changed"
        )
    conn = open_read_only(path)
    try:
        try:
            result = [row[0] for row in conn.execute("PRAGMA integrity_check(20)")]
            found = describe(conn, kind)
        except sqlite3.DatabaseError as exc:
            raise DatabaseError(f"backup file {path} is not a usable database ({exc})") from None
    finally:
        conn.close()
    if result != ["ok"]:
        raise DatabaseError(f"backup file {path} fails its integrity check: {'; '.join(result)}")
    if found["application_id"] != kind.application_id:
        other = dict(kind.others).get(found["application_id"])
        what = f"a memkeeper {other} file" if other else "not a memkeeper file"
        raise DatabaseError(f"backup file {path} is {what}, not a {kind.role} file")
    unknown = [step for step in found["schema"] if step not in kind.steps]
    if unknown:
        raise DatabaseError(
            f"backup file {path} was written by a newer memkeeper (schema steps "
            f"{', '.join(unknown)} are unknown to this version); upgrade memkeeper to restore it"
        )
    for field in ("application_id", "schema", "rows"):
        if found[field] != expected.get(field):
            raise DatabaseError(f"backup file {path} does not match its manifest ({field} differs)")


def verify(directory: Path) -> dict[str, Any]:
    """Check a backup directory completely (see the module docstring); returns its manifest."""
    manifest = read_manifest(directory)
    for role, (name, kind) in FILES.items():
        check_file(Path(directory) / name, kind, manifest["files"][role])
    return manifest
