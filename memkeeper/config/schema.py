"""memkeeper's configuration schema: its sections, their defaults, and validation.

The schema below is the single source of truth. ``config.toml`` at the root of the repository
is generated from it (``memkeeper config init`` writes the same text, and a test checks the
two never drift), so every key is documented with what it does and its unit.

Which file is read, and which database it points at, is decided by
:func:`memkeeper.settings.resolve` for the library, the CLI and the service alike (the order is
documented once, in the README's "Configuration" section). A missing default file means
defaults; a missing file that was asked for explicitly is an error. Validation errors name the
file, the key and what is wrong.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, ValidationError, field_validator

from memkeeper.config.base import JobSection, Section
from memkeeper.config.file import load_config
from memkeeper.config.jobs import (
    JOB_ORDER,
    DemoteJob,
    ExpireJob,
    JobsSection,
    PruneJob,
    SettleJob,
    SummarizeJob,
    TtlDays,
)
from memkeeper.config.mcp import McpSection
from memkeeper.config.retention import StatusSection
from memkeeper.config.search import SearchSection
from memkeeper.errors import ConfigError
from memkeeper.validation import MAX_DAYS

# The jobs' sections live in memkeeper.config.jobs; most callers import them from here.
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

_Section = Section  # the strict base of every section (memkeeper.config.base)
_Job = JobSection  # a job's section: enabled, schedule


class DatabaseSection(_Section):
    path: str = Field(
        "",
        description="Absolute path of the hot memory database, used when neither --db nor "
        "MEMKEEPER_DB is given. Empty: memory.db in the per-user data directory.",
    )
    url: str = Field(
        "",
        description="A PostgreSQL database instead of the SQLite file: postgresql://user@host"
        "/dbname (libpq's PGHOST, PGPASSWORD, ~/.pgpass and service files apply; keep the "
        "password out of this file). Used when neither --db nor MEMKEEPER_DB is given; path "
        "and cold_path are then unused. Empty: SQLite.",
    )
    connect_timeout_s: float = Field(
        10,
        gt=0,
        le=600,
        description="How long to wait for the PostgreSQL server to accept a connection, in "
        "seconds (database.url only).",
    )
    pool_size: int = Field(
        4,
        ge=1,
        le=100,
        description="Most connections a store keeps open to PostgreSQL (database.url only): "
        "each of its threads working at once (the MCP server's calls, a pass beside them) "
        "uses one; a thread beyond them waits up to connect_timeout_s for one to be free.",
    )
    cold_path: str = Field(
        "",
        description="Absolute path of the cold-storage database of that hot file (a hot file "
        "named by --db or MEMKEEPER_DB keeps its own). Empty: beside the hot file, named "
        "<hot name>-cold.db.",
    )
    busy_timeout_ms: int = Field(
        5000,
        gt=0,
        le=600_000,
        description="How long a writer waits for another process's lock, in milliseconds.",
    )
    batch_size: int = Field(
        500,
        gt=0,
        le=10000,
        description="Most entries changed per transaction by jobs and imports (jobs also "
        "keep each transaction near lock_hold_ms).",
    )
    lock_hold_ms: float = Field(
        20,
        gt=0,
        le=10000,
        description="How long a job's write transaction should hold the write lock, in "
        "milliseconds: jobs size their transactions (up to batch_size) to stay near it.",
    )
    synchronous: Literal["normal", "full"] = Field(
        "normal",
        description="SQLite's synchronous setting. normal (WAL's usual choice): a power loss "
        "may lose the last commits since a checkpoint, never corrupt the file; a forget is "
        "always on disk when it returns. full: every commit also syncs the WAL (slower). On "
        "PostgreSQL: normal is synchronous_commit = off (a crash may lose the last half "
        "second of commits, never corrupts; a forget still waits for its flush), full is on.",
    )
    cache_mb: int = Field(
        24,
        gt=0,
        le=65536,
        description="Page cache per connection (the hot and the cold file each have one), in "
        "MiB. Larger helps a pass over a large database; it counts in the RSS.",
    )
    mmap_mb: int = Field(
        0,
        ge=0,
        le=1048576,
        description="Memory-mapped I/O per connection, in MiB (0: off). Raise it for a large "
        "database on a machine with memory to spare; mapped pages count in the RSS.",
    )

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: str) -> str:
        if value and not re.match(r"(?i)postgres(ql)?://", value):
            raise ValueError("must be a postgresql:// or postgres:// URL (or empty for SQLite)")
        return value

    @field_validator("path", "cold_path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        # A relative path would name a different file in every working directory: the agent,
        # the CLI and the service would not share one database.
        if value and not Path(value).expanduser().is_absolute():
            raise ValueError(f"{value!r} must be an absolute path (or start with ~/)")
        return value


class LimitsSection(_Section):
    max_value_bytes: int = Field(
        65536,
        gt=0,
        le=16_777_216,
        description="Largest value, note or message accepted, in UTF-8 bytes.",
    )
    max_key_chars: int = Field(
        256,
        gt=0,
        le=10_000,
        description="Longest key, user id, namespace or session id, in characters.",
    )


class ContextSection(_Section):
    limit: int = Field(10, gt=0, le=200, description="Most entries in a prompt prefill.")
    min_confidence: float = Field(
        0.7, ge=0, le=1, description="Entries below this confidence (0-1) are left out of it."
    )


class ScoringSection(_Section):
    """The retention score (README "How memkeeper scores entries"), used by prune and context."""

    weight_confidence: float = Field(0.4, ge=0, le=1000, description="Weight of confidence (0-1).")
    weight_confirmed: float = Field(
        0.2,
        ge=0,
        le=1000,
        description="Weight of how recently the entry was written or re-confirmed.",
    )
    weight_recency: float = Field(
        0.25, ge=0, le=1000, description="Weight of how recently it was used."
    )
    weight_frequency: float = Field(
        0.15, ge=0, le=1000, description="Weight of how often it was used."
    )
    confirmed_half_life_days: float = Field(
        90,
        gt=0,
        le=MAX_DAYS,
        description="Days after which confirmation freshness counts half, in days.",
    )
    recency_half_life_days: float = Field(
        30, gt=0, le=MAX_DAYS, description="Days after which recency of use counts half, in days."
    )
    frequency_saturation: int = Field(
        20,
        gt=0,
        le=1_000_000,
        description="Number of uses at which the frequency component reaches 1.",
    )


class LlmSection(_Section):
    model: str = Field("glm-4.7-flash", min_length=1, description="Model name sent to the API.")
    base_url: str = Field(
        "",
        description="API base URL (any OpenAI-compatible endpoint). Empty: ZHIPUAI_BASE_URL, "
        "else ZAI_BASE_URL, else Zhipu's own.",
    )
    api_key_env: str = Field(
        "ZHIPUAI_API_KEY",
        min_length=1,
        description="Name of the environment variable holding the API key (with this "
        "default, ZAI_API_KEY is read when it is unset). The key itself is never read from "
        "this file.",
    )
    timeout_seconds: float = Field(
        60, gt=0, le=3600, description="Timeout of one API call, in seconds."
    )
    max_retries: int = Field(
        3, ge=0, le=10, description="Retries of a call after 429, 5xx or a timeout."
    )
    retry_backoff_seconds: float = Field(
        1.0, ge=0, le=3600, description="First wait before a retry, doubled each time, in seconds."
    )
    temperature: float = Field(0.3, ge=0, le=2, description="Sampling temperature.")
    max_output_tokens: int = Field(
        1024, gt=0, le=1_000_000, description="Longest answer asked for, in tokens."
    )
    disable_thinking: bool = Field(
        True,
        description='Send thinking={"type": "disabled"} (GLM models). Set false for endpoints '
        "that refuse unknown parameters.",
    )
    json_mode: bool = Field(
        True,
        description='Send response_format={"type": "json_object"}. The summary is asked for as '
        'JSON ({"summary": "..."}) either way; set false for endpoints without JSON mode.',
    )


class ServiceSection(_Section):
    timezone: str = Field(
        "UTC", description="IANA timezone in which job schedules are read, e.g. Europe/Berlin."
    )
    lock_wait_seconds: float = Field(
        60,
        ge=0,
        le=86_400,
        description="How long run-once waits for a job that is already running, in seconds.",
    )
    takeover_seconds: float = Field(
        15,
        ge=2,
        le=300,
        description="PostgreSQL fleets: a leader (or job-lock holder) that stops answering "
        "loses its lock after this long, and a standing-by service takes over.",
    )

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown timezone {value!r}; use an IANA name like UTC or Asia/Shanghai"
            ) from None
        return value


class LoggingSection(_Section):
    level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Least severe log level printed: debug, info, warning or error."
    )
    format: Literal["auto", "json", "console"] = Field(
        "auto",
        description="auto: JSON lines unless the log stream is a terminal (journald gets JSON).",
    )


class Config(_Section):
    """The whole configuration."""

    database: DatabaseSection = Field(default_factory=DatabaseSection, description="Files.")
    limits: LimitsSection = Field(default_factory=LimitsSection, description="Input limits.")
    context: ContextSection = Field(
        default_factory=ContextSection, description="The prompt prefill (context())."
    )
    scoring: ScoringSection = Field(
        default_factory=ScoringSection, description="The retention score."
    )
    search: SearchSection = Field(
        default_factory=SearchSection, description="Retrieval by meaning (search())."
    )
    jobs: JobsSection = Field(default_factory=JobsSection, description="Maintenance jobs.")
    llm: LlmSection = Field(default_factory=LlmSection, description="The summarizer's LLM.")
    service: ServiceSection = Field(
        default_factory=ServiceSection, description="The memkeeper run service."
    )
    logging: LoggingSection = Field(default_factory=LoggingSection, description="Logging.")
    status: StatusSection = Field(
        default_factory=StatusSection, description="When memkeeper status warns about size."
    )
    mcp: McpSection = Field(
        default_factory=McpSection, description="The MCP server (memkeeper mcp)."
    )


def _format_errors(path: Path, exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        key = ".".join(str(p) for p in error["loc"]) or "(top level)"
        kind = error["type"]
        if kind == "extra_forbidden":
            message = "unknown key"
        elif kind.endswith("_type") or kind in {"model_type", "literal_error"}:
            got = type(error.get("input")).__name__
            message = f"{error['msg'][0].lower()}{error['msg'][1:]} (got {got})"
        else:
            message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{key}: {message}")
    return f"{path}: " + "; ".join(parts)


def parse_config(data: dict[str, Any], path: Path) -> Config:
    """Validate already-parsed TOML data; errors name ``path`` and each bad key."""
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_errors(path, exc)) from None
