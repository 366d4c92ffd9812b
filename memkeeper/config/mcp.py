"""The configuration of the MCP server (``memkeeper mcp``, ``memkeeper run --mcp``): ``[mcp]``.

Part of the schema in :mod:`memkeeper.config` (kept apart to keep modules small). What the
server does with it — the token file's format and checks, the request size limit, the
DNS-rebinding protection — is in :mod:`memkeeper.mcp.auth` and :mod:`memkeeper.mcp.http`, and
in the README ("Agents in any language: the MCP server").
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from memkeeper.config.base import Section


def split_list(text: str) -> list[str]:
    """The items of a comma-separated setting, stripped, empty items dropped."""
    return [item.strip() for item in text.split(",") if item.strip()]


class McpSection(Section):
    token_file: str = Field(
        "",
        description="Absolute path (or ~/...) of the HTTP server's token file: TOML with one "
        '[[tokens]] table per token, each token = "..." and either user = "<user id>" or '
        "admin = true. It must be readable by its owner only (mode 0600). Empty: no tokens, "
        "and the HTTP server starts only on 127.0.0.1 with --no-auth.",
    )
    max_request_bytes: int = Field(
        1_048_576,
        gt=0,
        le=64 * 1_048_576,
        description="Largest HTTP request body accepted, in bytes; a larger one gets 413.",
    )
    allowed_hosts: str = Field(
        "",
        description="Host header values the HTTP server accepts besides 127.0.0.1, localhost "
        "and [::1] on its port, comma separated (e.g. memory.example.org:8765): the "
        "DNS-rebinding protection refuses every other Host.",
    )
    allowed_origins: str = Field(
        "",
        description="Origin header values accepted besides http://127.0.0.1, "
        "http://localhost and http://[::1] on any port, comma separated (browser clients).",
    )

    session_idle_seconds: float = Field(
        300,
        ge=1,
        le=86_400,
        description="Seconds without a request after which an HTTP session (a client of the "
        "initialize handshake) is closed; the client then opens a new one. 2026-07-28 "
        "requests are stateless and open none.",
    )
    max_sessions_per_principal: int = Field(
        16,
        ge=1,
        le=10_000,
        description="Open HTTP sessions one token (or the --no-auth user) may hold; one more "
        "gets HTTP 429 until a session ends or expires.",
    )

    @field_validator("token_file")
    @classmethod
    def _absolute(cls, value: str) -> str:
        # A relative path would name a different file in every working directory.
        if value and not Path(value).expanduser().is_absolute():
            raise ValueError(f"{value!r} must be an absolute path (or start with ~/)")
        return value
