"""The LLM client: the real zhipuai SDK against a fake server on 127.0.0.1."""

# Chinese conversation text uses fullwidth punctuation on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from fake_llm import FakeLLM, Reply, completion, error, raw

from memkeeper.config import LlmSection
from memkeeper.llm import (
    Budget,
    LlmAuthError,
    LlmBadAnswer,
    LlmClient,
    LlmNotConfigured,
    LlmRequestRejected,
    LlmUnavailable,
    describe_endpoint,
)

KEY = "a1b2c3d4e5f6.k3yS3cretPart0001"
PROMPT = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def section(url: str, **overrides: object) -> LlmSection:
    values: dict[str, object] = {
        "base_url": url,
        "timeout_seconds": 2.0,
        "max_retries": 2,
        "retry_backoff_seconds": 0.01,
    }
    values.update(overrides)
    return LlmSection.model_validate(values)


def client_for(url: str, sleeps: list[float] | None = None, **overrides: object) -> LlmClient:
    sleep = sleeps.append if sleeps is not None else (lambda _seconds: None)
    return LlmClient(section(url, **overrides), api_key=KEY, sleep=sleep)


def test_a_completion_is_reduced_to_text_reason_tokens_and_model(fake: FakeLLM) -> None:
    fake.script(completion("a summary", prompt_tokens=77, completion_tokens=11, model="glm-x"))
    with client_for(fake.url) as client:
        answer = client.complete(PROMPT)
    assert answer.text == '{"summary": "a summary"}'
    assert (answer.finish_reason, answer.prompt_tokens, answer.completion_tokens) == (
        "stop",
        77,
        11,
    )
    assert answer.model == "glm-x"
    assert answer.attempts == 1
    assert answer.total_tokens == 88


def test_the_request_carries_model_options_thinking_and_the_key(fake: FakeLLM) -> None:
    with client_for(fake.url, model="glm-4.7-flash", temperature=0.2) as client:
        client.complete(PROMPT, max_tokens=321)
    (request,) = fake.requests
    assert request.path == "/api/paas/v4/chat/completions"
    body = request.body
    assert body["model"] == "glm-4.7-flash"
    assert body["messages"] == PROMPT
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 321
    assert body["thinking"] == {"type": "disabled"}
    assert body["response_format"] == {"type": "json_object"}
    # The SDK sends the raw key (no JWT) unless token caching is switched on; we never do.
    assert request.headers["Authorization"] == f"Bearer {KEY}"


def test_thinking_and_json_mode_can_be_switched_off(fake: FakeLLM) -> None:
    with client_for(fake.url, disable_thinking=False, json_mode=False) as client:
        client.complete(PROMPT)
    # This SDK version always sends both keys; switched off, they are null.
    assert fake.requests[0].body["thinking"] is None
    assert fake.requests[0].body["response_format"] is None


def test_429_is_retried_with_backoff_then_succeeds(fake: FakeLLM) -> None:
    fake.script(error(429, "rate limited"), error(503), completion("fine"))
    sleeps: list[float] = []
    with client_for(fake.url, sleeps) as client:
        answer = client.complete(PROMPT)
    assert answer.attempts == 3
    assert len(fake.requests) == 3
    # Exponential backoff (with jitter between half and the full wait).
    assert len(sleeps) == 2
    assert 0.005 <= sleeps[0] <= 0.01
    assert 0.01 <= sleeps[1] <= 0.02


def test_retry_after_is_honoured_up_to_a_cap(fake: FakeLLM) -> None:
    fake.script(Reply(status=429, body=b"{}", headers={"Retry-After": "0.5"}), completion("ok"))
    sleeps: list[float] = []
    with client_for(fake.url, sleeps) as client:
        client.complete(PROMPT)
    assert sleeps == [0.5]


def test_500_forever_gives_up_after_the_configured_retries(fake: FakeLLM) -> None:
    fake.responder = lambda _request: error(500, "upstream exploded")
    with client_for(fake.url, max_retries=2) as client, pytest.raises(LlmUnavailable) as caught:
        client.complete(PROMPT)
    assert len(fake.requests) == 3
    assert caught.value.attempts == 3
    assert "HTTP 500" in str(caught.value)
    assert "upstream exploded" in str(caught.value)
    assert "after 3 attempts" in str(caught.value)


def test_a_timeout_is_retried_then_reported(fake: FakeLLM) -> None:
    fake.responder = lambda _request: completion("too late", delay=3)
    with (
        client_for(fake.url, timeout_seconds=0.2, max_retries=1) as client,
        pytest.raises(LlmUnavailable) as caught,
    ):
        client.complete(PROMPT)
    assert len(fake.requests) == 2
    assert "no answer within 0.2 s" in str(caught.value)


def test_a_refused_connection_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        client_for(f"http://127.0.0.1:{port}/v4", max_retries=1) as client,
        pytest.raises(LlmUnavailable, match="connection failed"),
    ):
        client.complete(PROMPT)


@pytest.mark.parametrize("status", [401, 403])
def test_an_authentication_error_is_not_retried(fake: FakeLLM, status: int) -> None:
    fake.responder = lambda _request: error(status, "令牌已过期或验证不正确")
    with client_for(fake.url) as client, pytest.raises(LlmAuthError) as caught:
        client.complete(PROMPT)
    assert len(fake.requests) == 1
    assert f"refused the API key (HTTP {status})" in str(caught.value)
    assert "ZHIPUAI_API_KEY" in str(caught.value)


def test_another_client_error_is_rejected_with_the_servers_reason(fake: FakeLLM) -> None:
    fake.responder = lambda _request: error(400, "模型不存在，请检查模型代码。")
    with client_for(fake.url) as client, pytest.raises(LlmRequestRejected) as caught:
        client.complete(PROMPT)
    assert len(fake.requests) == 1
    assert "HTTP 400: 模型不存在" in str(caught.value)


@pytest.mark.parametrize(
    "reply",
    [
        raw("<html>502 bad gateway</html>"),
        raw("not json at all", content_type="application/json"),
        Reply(body=b'{"unexpected": "shape"}'),
        Reply(body=b'{"choices": [], "usage": {}}'),
    ],
    ids=["html", "invalid-json", "wrong-shape", "no-choices"],
)
def test_a_malformed_body_is_a_bad_answer(fake: FakeLLM, reply: Reply) -> None:
    fake.script(reply)
    with client_for(fake.url) as client, pytest.raises(LlmBadAnswer):
        client.complete(PROMPT)
    assert len(fake.requests) == 1


def test_the_key_comes_from_the_named_environment_variable(fake: FakeLLM) -> None:
    config = section(fake.url, api_key_env="MY_GLM_KEY")
    with pytest.raises(LlmNotConfigured, match="MY_GLM_KEY is not set"):
        LlmClient.from_config(config, environ={"ZHIPUAI_API_KEY": KEY})
    with pytest.raises(LlmNotConfigured):
        LlmClient.from_config(config, environ={"MY_GLM_KEY": "   "})
    with LlmClient.from_config(config, environ={"MY_GLM_KEY": KEY}) as client:
        client.complete(PROMPT)
    assert fake.requests[0].headers["Authorization"] == f"Bearer {KEY}"


def test_zhipuai_base_url_is_used_when_the_config_has_none(
    fake: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZHIPUAI_BASE_URL", fake.url)
    with client_for("") as client:
        client.complete(PROMPT)
        assert client.endpoint == fake.url
    assert len(fake.requests) == 1


def test_the_endpoint_is_described_without_credentials() -> None:
    assert describe_endpoint("https://bob:hunter2@llm.example:8443/v1") == (
        "https://llm.example:8443/v1"
    )


def test_budget_reservations_respect_global_and_per_user_caps() -> None:
    budget = Budget(max_calls=5, max_tokens=1000, max_calls_per_user=3, max_tokens_per_user=600)
    assert budget.reserve("ann", 3, 500)
    assert not budget.reserve("ann", 1, 10)  # ann's calls are all reserved
    assert budget.reserve("bob", 2, 400)
    assert not budget.reserve("cid", 1, 10)  # the run's calls are all reserved
    budget.settle("ann", 3, 500, 1, 100)  # ann used less than she reserved
    assert budget.remaining("ann") == (2, 500)
    assert budget.remaining("cid") == (2, 500)
    assert budget.reserve("cid", 2, 500)
    assert budget.remaining("dan") == (0, 0)
