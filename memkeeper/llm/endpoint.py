"""The API key and the endpoint, as read from the config and the environment.

The key comes from the environment variable named by ``[llm] api_key_env``
(``ZHIPUAI_API_KEY`` by default); with that default, ``ZAI_API_KEY`` (zai-sdk's name) is read
when ``ZHIPUAI_API_KEY`` is unset: the configured name wins. It is registered with
:func:`memkeeper.logs.register_secret` the moment it is read. The base URL is
``[llm] base_url``, else ``ZHIPUAI_BASE_URL``, else ``ZAI_BASE_URL``, else Zhipu's own
endpoint; it is resolved here and passed to the SDK, which then reads no variable itself.
The SDK sends the key as ``Authorization: Bearer <key>`` (both SDKs sign a JWT only when token
caching is switched on, which we leave off), so the raw key is what must never leak.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from memkeeper.llm.errors import LlmNotConfigured
from memkeeper.logs import register_secret

if TYPE_CHECKING:
    from memkeeper.config import LlmSection

DEFAULT_BASE_URL = "https://open.bigmodel.cn/api/paas/v4"
DEFAULT_KEY_ENV = "ZHIPUAI_API_KEY"
ZAI_KEY_ENV = "ZAI_API_KEY"
BASE_URL_ENVS = ("ZHIPUAI_BASE_URL", "ZAI_BASE_URL")
"""Where the base URL comes from when ``[llm] base_url`` is empty, first set wins."""


def read_api_key(config: LlmSection, environ: Mapping[str, str] | None = None) -> str:
    """The API key from the environment, registered as a secret; LlmNotConfigured if absent."""
    env = os.environ if environ is None else environ
    key = (env.get(config.api_key_env) or "").strip()
    fallback = config.api_key_env == DEFAULT_KEY_ENV
    if not key and fallback:
        key = (env.get(ZAI_KEY_ENV) or "").strip()
    if not key:
        nor = f" (nor {ZAI_KEY_ENV})" if fallback else ""
        raise LlmNotConfigured(
            f"no API key: the environment variable {config.api_key_env} is not set{nor} "
            "([llm] api_key_env names it); summarization is skipped"
        )
    register_secret(key)
    # A Zhipu key looks like "<id>.<secret>": never print the secret half on its own either.
    for part in key.split("."):
        if len(part) >= 8:
            register_secret(part)
    return key


def resolve_base_url(base_url: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The endpoint to call: ``base_url``, else the first of :data:`BASE_URL_ENVS` set."""
    env = os.environ if environ is None else environ
    for name in BASE_URL_ENVS:
        if base_url:
            break
        base_url = (env.get(name) or "").strip()
    return base_url or DEFAULT_BASE_URL


def describe_endpoint(base_url: str | None) -> str:
    """The endpoint as safe to log: scheme, host, port and path, never user:password@."""
    url = resolve_base_url(base_url)
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"
