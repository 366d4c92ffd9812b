"""This host's name in a fleet: what ``status``, ``job_runs.host`` and the locks' holders show.

Its own module, with no database driver behind it, so that SQLite's paths (the job runner,
``status``) name the host without importing PostgreSQL's driver, an optional extra.
"""

from __future__ import annotations

import os
import socket

ENV_HOST_NAME = "MEMKEEPER_HOST_NAME"
"""Overrides the machine's name (containers that all call themselves ``localhost``; the
tests' simulated hosts)."""


def host_name() -> str:
    """This host's name in the fleet: ``MEMKEEPER_HOST_NAME``, else the machine's name."""
    return (os.environ.get(ENV_HOST_NAME) or "").strip()[:40] or socket.gethostname()
