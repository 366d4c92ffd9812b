"""Backing up a corrupt live database says so, in one line (issue 18, item 16).

It used to blame the copy ("the backup copy failed its check"), with SQLite's whole
integrity report: 21 lines that never said the live database was the problem.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memkeeper import MemoryStore
from memkeeper.cli import main

EXIT_DATABASE = 74


def _garble(db_path: Path, where: str) -> None:
    """Overwrite the start of every page of one table or index (no store has it open)."""
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = [r[0] for r in conn.execute(f"SELECT pageno FROM dbstat WHERE name = '{where}'")]
    conn.close()
    assert pages
    with db_path.open("r+b") as raw:
        for page in pages[1:] or pages:
            raw.seek((page - 1) * page_size + 8)
            raw.write(b"\x55" * 48)


@pytest.mark.parametrize("where", ["messages", "memories_due_by_use"])
def test_a_corrupt_live_database_is_named_in_one_line(
    db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    with MemoryStore(db_path) as store:
        for index in range(400):
            store.remember("u", f"key-{index}", f"value {index} " + "v" * 100)
            store.append_message("u", "s", "user", f"message {index} " + "x" * 200)
    _garble(db_path, where)
    dest = tmp_path / "b"
    assert main(["--db", str(db_path), "backup", str(dest)]) == EXIT_DATABASE
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"the live database {db_path} is corrupt" in err
    assert "restore-backup" in err and ".recover" in err
    assert not [p.name for p in dest.iterdir() if p.name != "manifest.json"]
