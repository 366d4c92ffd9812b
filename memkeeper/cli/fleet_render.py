"""The fleet in ``memkeeper status``: the leader, the services standing by, who ran what.

Only a PostgreSQL memory has a fleet (``service`` then carries ``leader``, ``members`` and
``runs``; see :func:`memkeeper.maintenance.locks.service_state`); on SQLite nothing is added.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memkeeper.cli.render import shown
from memkeeper.clock import system_now


def _age(text: str | None, now: datetime) -> str:
    if not text:
        return "?"
    seconds = (now - datetime.fromisoformat(text)).total_seconds()
    return f"{max(seconds, 0):.0f} s ago"


def fleet_lines(service: dict[str, Any]) -> list[str]:
    """Lines under ``service:`` (none on SQLite); ages by the real clock, not ``--now``."""
    if "members" not in service:
        return []
    now = system_now()
    lines = []
    leader = service.get("leader")
    if leader and service.get("running"):
        lines.append(
            f"  leader    {shown(leader['host'], None)} pid {leader['pid']} since "
            f"{leader['since']} (epoch {leader['epoch']}, "
            f"renewed {_age(leader['renewed_at'], now)})"
        )
    followers = [m for m in service["members"] if m["role"] == "follower"]
    for member in followers:
        lines.append(
            f"  standing by {shown(member['host'], None)} pid {member['pid']} "
            f"(seen {_age(member['seen_at'], now)})"
        )
    for run in service.get("runs", []):
        host = shown(run["host"], None) if run["host"] else "unknown host"
        lines.append(
            f"  ran       {run['job']:<10} {run['status']:<11} {run['started_at']} on {host}"
        )
    return lines
