"""The launchd job (macOS) that runs ``memkeeper run``: a LaunchAgent, or a LaunchDaemon."""

from __future__ import annotations

import plistlib
from pathlib import Path

from memkeeper.service.installation import Installation

LAUNCHD_LABEL = "io.memkeeper.run"


def render_plist(inst: Installation) -> str:
    """The launchd job for ``memkeeper run`` (a LaunchAgent, or a LaunchDaemon for system)."""
    log_dir = inst.log_dir or Path("/usr/local/var/log/memkeeper")
    job: dict[str, object] = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": inst.args("run"),
        "RunAtLoad": True,
        # Restarted when it exits with an error or crashes, not after a clean stop (exit 0).
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 30,
        "ExitTimeOut": 30,
        "ProcessType": "Background",
        "LowPriorityIO": True,
        "Nice": 10,
        "Umask": 0o077,
        "StandardOutPath": str(log_dir / "memkeeper.log"),
        "StandardErrorPath": str(log_dir / "memkeeper.log"),
    }
    if inst.scope == "system" and inst.user:
        job["UserName"] = inst.user
    return plistlib.dumps(job, sort_keys=False).decode("utf-8")
