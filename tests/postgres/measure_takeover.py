"""Measure a fleet's takeover time: ``python tests/postgres/measure_takeover.py [URL]``.

Two ``memkeeper run`` hosts on one PostgreSQL database (a new one on the server at URL, or
on a pgserver started for the run); the leader is SIGKILLed (its sessions end at once), then,
with a fresh pair, SIGSTOPped (the server ends its idle lock session after
``takeover_seconds``). Prints, per case and round, the seconds from the signal until the
other host's election is recorded (``leadership``), and the seconds until its first job run.
Not part of the suite: a figure, not an assertion (README "Running a fleet").
"""

from __future__ import annotations

import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent.parent)]

import psycopg  # noqa: E402
from helpers.postgres import TestServer  # noqa: E402

from postgres.fleet import Host, leader, runs, seed_expired  # noqa: E402


def _database(base: str) -> str:
    name = f"mk_takeover_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _until(check, timeout: float = 120.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise SystemExit("timed out")


def one_round(base: str, how: signal.Signals, takeover: float) -> tuple[float, float]:
    url = _database(base)
    seed_expired(url, 1)
    with tempfile.TemporaryDirectory() as root:
        first = Host(Path(root), "host-a", url, takeover=takeover)
        _until(lambda: leader(url))
        second = Host(Path(root), "host-b", url, takeover=takeover)
        _until(lambda: "standing by" in second.log())
        done = len(runs(url))
        start = time.monotonic()
        first.signal(how)
        _until(lambda: (leader(url) or ("",))[0] == "host-b")
        elected = time.monotonic() - start
        _until(lambda: any(r["host"] == "host-b" for r in runs(url)[done:]))
        ran = time.monotonic() - start
        first.close()
        second.stop()
    return elected, ran


def main() -> None:
    server = None
    if len(sys.argv) > 1:
        base = sys.argv[1]
    else:
        server = TestServer.start()
        base = server.url
    try:
        for how, takeover in ((signal.SIGKILL, 15.0), (signal.SIGSTOP, 15.0), (signal.SIGSTOP, 3)):
            for n in range(3):
                elected, ran = one_round(base, how, takeover)
                print(
                    f"{how.name:8} takeover_seconds={takeover:g} round {n + 1}: "
                    f"new leader after {elected:.2f} s, its first job run after {ran:.2f} s",
                    flush=True,
                )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
