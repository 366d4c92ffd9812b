"""``backup`` / ``restore-backup`` on PostgreSQL: refused, naming the server's own tools.

memkeeper's backup copies its two SQLite files from one snapshot, verifies the copy, and
applies later erasures to it (``--prune-forgotten``, and on restore). On PostgreSQL the
server already offers the consistent copy (``pg_dump`` of memkeeper's schema: one snapshot
of every table, cold storage included), and operators back the whole server up anyway
(base backups with WAL archiving, or their provider's snapshots). memkeeper does not drive
``pg_dump``/``pg_restore`` itself (yet): they are a separate client installation that must
be at least the server's major version, and a restore replaces the memory of every host's
agents at once, which only the operator can schedule. So the commands refuse, in one line
with exit 2, and say what to run instead.

A dump holds what was erased after it was taken until it is deleted, and restoring one
brings back entries forgotten since (the tombstones recorded since are not in it): the
README's "Erasure on PostgreSQL" says how to handle dumps after a forget.
"""

from __future__ import annotations

from memkeeper.errors import NotOnThisBackend

DUMP = "pg_dump --schema={schema} --format=custom --file=memkeeper.dump '{url}'"
RESTORE = "pg_restore --clean --if-exists --dbname='{url}' memkeeper.dump"


def refuse(command: str, url: str, schema: str = "memkeeper") -> NotOnThisBackend:
    """The error ``command`` raises on the PostgreSQL database ``url`` (masked)."""
    if command == "restore-backup":
        instead = "restore a dump with " + RESTORE.format(url=url)
    elif command == "backup --prune-forgotten":
        instead = "take a new dump after a forget and delete the older ones"
    else:
        instead = "dump memkeeper's schema with " + DUMP.format(schema=schema, url=url)
    return NotOnThisBackend(
        f"{command} copies memkeeper's SQLite files; the memory is on PostgreSQL ({url}): "
        f"{instead} (see the README, Backup and restore)"
    )
