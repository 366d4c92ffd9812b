"""What the kernel says about a process's locks on a file, and whether a file is intact.

SQLite's POSIX advisory locks are the only way other processes learn that a database is in
use: a process whose locks on ``memory.db`` vanished lets the next process that closes the
database delete the write-ahead log it still uses (issue 18, item 1). ``/proc/locks`` lists
every lock with its owner's pid and the file's device and inode, so a test can check that an
operation left the process's locks as they were. Linux only; tests skip elsewhere.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

PROC_LOCKS = Path("/proc/locks")

needs_proc_locks = pytest.mark.skipif(
    not PROC_LOCKS.exists(), reason="/proc/locks (Linux) lists the process's POSIX locks"
)


def posix_locks(path: Path, pid: int | None = None) -> list[str]:
    """The POSIX locks process ``pid`` (default: this one) holds on the file at ``path``.

    Each as ``"READ 1073741826-1073742335"``. ``/proc/locks`` is read, never the database
    file itself (opening and closing that would cancel the very locks being looked at).
    """
    pid = os.getpid() if pid is None else pid
    info = os.stat(path)
    # The kernel names the file as "major:minor:inode" (hex, hex, decimal): match all three,
    # so a file of the same inode number on another device is not taken for this one.
    file_id = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    found = []
    for line in PROC_LOCKS.read_text().splitlines():
        # "1: POSIX  ADVISORY  READ 4242 fe:00:2166657 1073741826 1073742335"; a line with
        # "->" is a request waiting for that lock, not a lock held: it is skipped.
        fields = line.split()
        if len(fields) < 8 or fields[1] != "POSIX":
            continue
        if int(fields[4]) == pid and fields[5] == file_id:
            found.append(f"{fields[3]} {fields[6]}-{fields[7]}")
    return found


def integrity(path: Path) -> list[str]:
    """``PRAGMA integrity_check`` of the file, read through its WAL (["ok"] when intact)."""
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()
