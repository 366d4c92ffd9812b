"""memkeeper's configuration: the schema, its defaults, loading and validation.

The package's modules, each with one job:

- :mod:`memkeeper.config.schema`: the schema (:class:`Config` and its sections) and
  :func:`parse_config`; with :mod:`~memkeeper.config.base` (the strict base section),
  :mod:`~memkeeper.config.jobs` and the sections kept apart to keep modules small
  (``index``, ``merge``, ``retention``, ``search``, ``mcp``, ``summarize_extras``);
- :mod:`memkeeper.config.file`: :func:`load_config`, the one reader of a config file;
- :mod:`memkeeper.config.view` over :mod:`memkeeper.config.defaults` (generated): the defaults
  read without pydantic, for a run with no config file;
- :mod:`memkeeper.config.doc`: ``config.toml``'s text and the generated defaults module.

The names below are the public API (``from memkeeper.config import Config``). They are
imported on first access (PEP 562), not with the package: the schema imports pydantic and
builds its models (~150 ms, more than a memory command's whole work; README, Performance:
start-up), and importing :mod:`memkeeper.config.view` imports this package first.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memkeeper.config.file import load_config
    from memkeeper.config.schema import (
        JOB_ORDER,
        Config,
        ContextSection,
        DatabaseSection,
        DemoteJob,
        ExpireJob,
        JobsSection,
        LimitsSection,
        LlmSection,
        LoggingSection,
        PruneJob,
        ScoringSection,
        ServiceSection,
        SettleJob,
        SummarizeJob,
        TtlDays,
        parse_config,
    )

# The same list as memkeeper.config.schema.__all__ (a test checks the two agree).
__all__ = [
    "JOB_ORDER",
    "Config",
    "ContextSection",
    "DatabaseSection",
    "DemoteJob",
    "ExpireJob",
    "JobsSection",
    "LimitsSection",
    "LlmSection",
    "LoggingSection",
    "PruneJob",
    "ScoringSection",
    "ServiceSection",
    "SettleJob",
    "SummarizeJob",
    "TtlDays",
    "load_config",
    "parse_config",
]

# Where each name lives: reading a config file needs no schema until there is a file.
_HOME = {name: "memkeeper.config.schema" for name in __all__} | {
    "load_config": "memkeeper.config.file",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first access (then cached here)."""
    home = _HOME.get(name)
    if home is None:  # a submodule not imported yet, or no such name: not the schema's
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
