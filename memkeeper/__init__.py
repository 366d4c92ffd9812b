"""memkeeper — the memory layer and maintenance service behind AI agents.

Agents write facts, preferences, notes, episodes and conversation histories through
:class:`MemoryStore`; the maintenance jobs (``memkeeper run`` / ``run-once``, or
:func:`run_once`) keep that memory healthy on a schedule.
"""

from memkeeper.errors import MemkeeperError
from memkeeper.records import Change, Context, Episode, JobRun, Memory, Message
from memkeeper.store import MemoryStore

__version__ = "0.1.0"

__all__ = [
    "Change",
    "Context",
    "Episode",
    "JobRun",
    "MemkeeperError",
    "Memory",
    "MemoryStore",
    "Message",
    "__version__",
]
