"""The maintenance jobs, registered by name (installed as ``memkeeper.jobs``).

Each module holds one small job; adding a job is one file and one line here. ``ORDER`` is the
documented order in which ``run-once`` runs them: settle the grey period first, then expiry
and demotion, then the per-user cap (which counts what the others left), then summarization
(the slowest, and the only one that calls out).
"""

from __future__ import annotations

from memkeeper.jobs import demote, expire, prune, settle, summarize

from memkeeper.maintenance.jobkit import Job

_JOBS: tuple[Job, ...] = (settle.JOB, expire.JOB, demote.JOB, prune.JOB, summarize.JOB)

REGISTRY: dict[str, Job] = {job.name: job for job in _JOBS}
ORDER: tuple[str, ...] = tuple(REGISTRY)
