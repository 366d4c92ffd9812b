"""The API key and the endpoint, as read from the config and the environment.

The key comes from the environment variable named by ``[llm] api_key_env``; it is registered
with :func:`memkeeper.logs.register_secret` the moment it is read. The SDK sends it as
``Authorization: Bearer <key>`` (this SDK version only signs a JWT when token caching is
switched on, which we leave off), so the raw key is what must never leak.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from memkeeper.config import LlmSection
from memkeeper.llm.errors import LlmNotConfigured
from memkeeper.logs import register_secret

DEFAULT_BASE_URL = "https://open.bigmodel.cn/api/paas/v4"


def read_api_key(config: LlmSection, environ: Mapping[str, str] | None = None) -> str:
    """The API key from the environment, registered as a secret; LlmNotConfigured if absent."""
    env = os.environ if environ is None else environ
    key = (env.get(config.api_key_env) or "").strip()
    if not key:
        raise LlmNotConfigured(
            f"no API key: the environment variable {config.api_key_env} is not set "
            "([llm] api_key_env names it); summarization is skipped"
        )
    register_secret(key)
    # A Zhipu key looks like "<id>.<secret>": never print the secret half on its own either.
    for part in key.split("."):
        if len(part) >= 8:
            register_secret(part)
    return key


def describe_endpoint(base_url: str | None) -> str:
    """The endpoint as safe to log: scheme, host, port and path, never user:password@."""
    url = base_url or os.environ.get("ZHIPUAI_BASE_URL") or DEFAULT_BASE_URL
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"
