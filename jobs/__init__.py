"""The maintenance jobs, registered by name (installed as ``memkeeper.jobs``).

Each module holds one small job; adding a job is one file, one line here, one name in
:data:`memkeeper.config.JOB_ORDER` and its config section. ``ORDER`` is that documented order.
The runner imports this registry only when it runs a job.
"""

from __future__ import annotations

from memkeeper.jobs import demote, expire, index, merge, prune, retain, settle, summarize

from memkeeper.config import JOB_ORDER
from memkeeper.maintenance.jobkit import Job

_JOBS: tuple[Job, ...] = (
    settle.JOB,
    expire.JOB,
    demote.JOB,
    prune.JOB,
    index.JOB,
    merge.JOB,
    retain.JOB,
    summarize.JOB,
)

REGISTRY: dict[str, Job] = {job.name: job for job in _JOBS}
ORDER: tuple[str, ...] = JOB_ORDER
