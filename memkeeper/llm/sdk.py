"""Which GLM SDK memkeeper talks through, chosen once at import of the SDK: ``zai-sdk`` or
``zhipuai``.

``zai-sdk`` (import ``zai``, class ``ZhipuAiClient`` for the bigmodel.cn endpoint) is the
default: it is the vendor's current SDK, the one ``zhipuai``'s own README recommends, and it
allows ``pyjwt>=2.9`` — ``zhipuai`` 2.1.5 (its last release) pins ``pyjwt<2.9``, which no
``mcp`` from 1.20 on can share an environment with. ``zhipuai`` keeps working as the
alternative where it is the one installed: both SDKs have the same
``chat.completions.create`` and ``embeddings.create`` calls and the same error classes
under different roots (``ZaiError`` and ``ZhipuAIError``), so :class:`Sdk` names those
classes and :func:`make_client` builds either client the same way (our pooled httpx client,
no retries of the SDK's own, the base URL resolved by us, never read by the SDK from the
environment). :data:`SDK_ENV` (``MEMKEEPER_LLM_SDK=zai|zhipuai``) forces one where both are
installed.

Importing this module imports neither SDK; :func:`load` does, when a client is created.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass
from typing import Any

from memkeeper import logs
from memkeeper.llm.errors import LlmError

# The SDKs and httpx log through the stdlib: their records must meet the CLI's handler.
logs.settle()

SDK_ENV = "MEMKEEPER_LLM_SDK"
"""Environment variable forcing one SDK (``zai`` or ``zhipuai``) where both are installed."""

PREFERENCE = ("zai", "zhipuai")
"""Import names, in order of preference."""

PACKAGES = {"zai": "zai-sdk", "zhipuai": "zhipuai"}
"""The distribution (what ``pip install`` takes) of each import name."""


@dataclass(frozen=True, slots=True)
class Sdk:
    """One GLM SDK: its client class and the error classes :mod:`~memkeeper.llm.retries` asks."""

    module: str
    client_class: type
    base_error: type[BaseException]
    status_error: type[BaseException]
    timeout_error: type[BaseException]
    connection_error: type[BaseException]
    validation_error: type[BaseException]

    @property
    def package(self) -> str:
        return PACKAGES[self.module]


def _zai() -> Sdk:
    import zai
    from zai.core import _errors as errors

    return Sdk(
        "zai",
        zai.ZhipuAiClient,
        errors.ZaiError,
        errors.APIStatusError,
        errors.APITimeoutError,
        errors.APIConnectionError,
        errors.APIResponseValidationError,
    )


def _zhipuai() -> Sdk:
    import zhipuai

    return Sdk(
        "zhipuai",
        zhipuai.ZhipuAI,
        zhipuai.ZhipuAIError,
        zhipuai.APIStatusError,
        zhipuai.APITimeoutError,
        zhipuai.APIConnectionError,
        zhipuai.APIResponseValidationError,
    )


_LOADERS = {"zai": _zai, "zhipuai": _zhipuai}


@functools.cache
def load() -> Sdk:
    """The SDK in use: ``MEMKEEPER_LLM_SDK`` if set, else ``zai-sdk``, else ``zhipuai``."""
    forced = os.environ.get(SDK_ENV, "").strip().lower()
    if forced and forced not in _LOADERS:
        raise LlmError(f"{SDK_ENV}={forced[:20]!r}: use zai or zhipuai")
    for name in (forced,) if forced else PREFERENCE:
        if importlib.util.find_spec(name) is None:
            continue
        return _LOADERS[name]()
    wanted = PACKAGES[forced] if forced else "zai-sdk"
    raise LlmError(f"no GLM SDK is installed: pip install {wanted}")


def make_client(sdk: Sdk, *, api_key: str, base_url: str, timeout: float, http_client: Any) -> Any:
    """The SDK's client over ``http_client``, with no retries of its own (ours count budgets)."""
    return sdk.client_class(
        api_key=api_key,
        base_url=base_url,
        timeout=timeout,
        max_retries=0,
        http_client=http_client,
    )
