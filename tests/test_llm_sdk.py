"""The GLM SDK memkeeper talks through (zai-sdk by default, zhipuai as the alternative), and
which environment variables name the key and the endpoint.

The CI leg ``.ci/zhipuai-leg`` runs this file in a venv holding zhipuai and not zai-sdk, with
``TEST_EXPECT_GLM_SDK=zhipuai``: the first test then proves that leg really used zhipuai.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
from fake_llm import FakeLLM, completion, error

from memkeeper.config import LlmSection
from memkeeper.llm import LlmAuthError, LlmClient, LlmNotConfigured, read_api_key, sdk
from memkeeper.llm.endpoint import describe_endpoint, resolve_base_url

KEY = "sdk-test-key.0123456789abcdef"


def test_the_sdk_in_use_is_the_expected_one() -> None:
    expected = os.environ.get("TEST_EXPECT_GLM_SDK", "zai")
    chosen = sdk.load()
    assert chosen.module == expected
    assert chosen.package == {"zai": "zai-sdk", "zhipuai": "zhipuai"}[expected]


def test_zai_sdk_is_preferred_where_installed() -> None:
    if importlib.util.find_spec("zai") is None:
        pytest.skip("zai-sdk is not installed (the zhipuai leg)")
    assert sdk.load().client_class.__name__ == "ZhipuAiClient"


def test_a_forced_sdk_that_is_not_installed_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    missing = "zhipuai" if importlib.util.find_spec("zhipuai") is None else "zai"
    if importlib.util.find_spec(missing) is not None:
        pytest.skip("both SDKs are installed")
    sdk.load.cache_clear()
    monkeypatch.setenv(sdk.SDK_ENV, missing)
    try:
        with pytest.raises(Exception, match=f"pip install {sdk.PACKAGES[missing]}"):
            sdk.load()
    finally:
        monkeypatch.delenv(sdk.SDK_ENV)
        sdk.load.cache_clear()


def test_an_unknown_forced_sdk_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    sdk.load.cache_clear()
    monkeypatch.setenv(sdk.SDK_ENV, "openai")
    try:
        with pytest.raises(Exception, match="use zai or zhipuai"):
            sdk.load()
    finally:
        monkeypatch.delenv(sdk.SDK_ENV)
        sdk.load.cache_clear()


def test_zhipuai_key_wins_over_zai_key() -> None:
    config = LlmSection()
    both = {"ZHIPUAI_API_KEY": "zhipu-key-0123456789", "ZAI_API_KEY": "zai-key-0123456789ab"}
    assert read_api_key(config, both) == "zhipu-key-0123456789"
    assert read_api_key(config, {"ZAI_API_KEY": "zai-key-0123456789ab"}) == "zai-key-0123456789ab"


def test_zai_key_is_not_read_when_another_variable_is_configured() -> None:
    config = LlmSection(api_key_env="MY_GLM_KEY")
    with pytest.raises(LlmNotConfigured, match="MY_GLM_KEY is not set"):
        read_api_key(config, {"ZAI_API_KEY": "zai-key-0123456789ab"})


def test_no_key_names_both_variables() -> None:
    with pytest.raises(LlmNotConfigured, match=r"ZHIPUAI_API_KEY is not set \(nor ZAI_API_KEY\)"):
        read_api_key(LlmSection(), {})


def test_base_url_order_config_then_zhipuai_then_zai() -> None:
    env = {"ZHIPUAI_BASE_URL": "http://zhipu.example/v4", "ZAI_BASE_URL": "http://zai.example/v4"}
    assert resolve_base_url("http://config.example/v1", env) == "http://config.example/v1"
    assert resolve_base_url(None, env) == "http://zhipu.example/v4"
    assert resolve_base_url(None, {"ZAI_BASE_URL": "http://zai.example/v4"}) == (
        "http://zai.example/v4"
    )
    assert resolve_base_url(None, {}).startswith("https://open.bigmodel.cn/")


def test_zai_base_url_reaches_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The endpoint comes from ZAI_BASE_URL when nothing else names one, whichever SDK."""
    with FakeLLM() as fake:
        fake.script(completion(content="hello"))
        monkeypatch.delenv("ZHIPUAI_BASE_URL", raising=False)
        monkeypatch.setenv("ZAI_BASE_URL", fake.url)
        config = LlmSection(max_retries=0, retry_backoff_seconds=0.01)
        assert describe_endpoint(None) == fake.url
        with LlmClient(config, api_key=KEY) as client:
            assert client.complete([{"role": "user", "content": "hi"}]).text == "hello"
        assert fake.requests[0].headers.get("Authorization") == f"Bearer {KEY}"


def test_auth_errors_are_classified_through_the_chosen_sdk() -> None:
    with FakeLLM() as fake:
        fake.script(error(401, "bad key"))
        config = LlmSection(base_url=fake.url, max_retries=2, retry_backoff_seconds=0.01)
        with LlmClient(config, api_key=KEY) as client, pytest.raises(LlmAuthError):
            client.complete([{"role": "user", "content": "hi"}])
        assert len(fake.requests) == 1
