"""The configuration of the ``index`` job: ``[jobs.index]``.

Part of the schema in :mod:`memkeeper.config` (kept apart to keep modules small). What the
job embeds, in which batches and within which budgets, is set in ``[search]``
(``embedding_*`` and ``index_*``, :mod:`memkeeper.config.search`); the job is described in
``jobs/index.py``.
"""

from __future__ import annotations

from pydantic import Field

from memkeeper.config.base import SCHEDULE_DOC, JobSection


class IndexJob(JobSection):
    schedule: str = Field("*/5 * * * *", description=SCHEDULE_DOC)
