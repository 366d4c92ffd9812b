"""Sessions the model will not summarize: parked after N refusals, listed, retried.

The fake server refuses with a content-filter 400 or answers what the gate rejects; the
runs happen at explicit times. Endpoint failures (500, a wrong model) never park a session.
"""

# Chinese provider messages use fullwidth punctuation on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM, add_session, completion, default_summary, error, summarize_config
from llm_fixtures import StoreFactory

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.maintenance.runner import JobResult, run_once
from memkeeper.store.parking import SessionRef, consecutive_failures
from memkeeper.summarize.parking import is_parked, parked

pytestmark = [
    pytest.mark.usefixtures("api_key"),
    pytest.mark.both_backends,
]  # the fake's key, never a real one

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 2, 3, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
FILTERED = "系统检测到输入或生成内容可能包含不安全或敏感内容，请您避免输入易产生敏感内容的提示语。"


def summarize(store: MemoryStore, now: datetime) -> JobResult:
    (result,) = run_once(store, ["summarize"], now=now).results
    return result


def refuse_s1(fake: FakeLLM, ids: list[int]) -> None:
    """The provider's content filter refuses every request holding s1's messages."""

    def reply(request: Any) -> Any:
        if f"[#{ids[0]} " in request.user:
            return error(400, FILTERED)
        return default_summary(request)

    fake.responder = reply


def parked_now(store: MemoryStore, now: datetime, session: str = "s1") -> bool:
    return is_parked(store.storage, "u1", "", session, now=now, config=store.config.jobs.summarize)


def requests_for(fake: FakeLLM, ids: list[int]) -> int:
    return sum(1 for r in fake.requests if f"[#{ids[0]} " in r.user)


def test_a_refused_session_is_parked_after_three_runs_and_then_skipped(
    make_store: StoreFactory, fake: FakeLLM
) -> None:
    store = make_store(job={"max_concurrency": 1})
    ids = add_session(store, "s1", 21, start=T0)
    refuse_s1(fake, ids)
    for run in range(3):
        assert not parked_now(store, NOW + run * HOUR)
        result = summarize(store, NOW + run * HOUR)
        assert result.stats["sessions_failed"] == 1
        assert result.stats["rejected_content_filter"] == 1
        assert consecutive_failures(store.storage, SessionRef("u1", "", "s1")) == run + 1
    assert result.stats["sessions_newly_parked"] == 1
    assert parked_now(store, NOW + 3 * HOUR)
    # Parked: the next runs spend nothing on it, while other sessions go on.
    other = add_session(store, "s2", 21, start=T0)
    spent = requests_for(fake, ids)
    result = summarize(store, NOW + 4 * HOUR)
    assert result.status == "ok"
    assert result.stats["sessions_parked"] == 1
    assert result.stats["sessions_summarized"] == 1
    assert requests_for(fake, ids) == spent
    assert requests_for(fake, other) == 1
    # The change log tells the story: three refusals, then the parking, with the reason.
    logged = [c for c in store.changes(user_id="u1") if c.action in ("session_failed", "park")]
    assert [c.action for c in logged] == ["session_failed"] * 3 + ["park"]
    assert logged[-1].memory_id is None
    assert "HTTP 400" in logged[-1].reason
    assert "敏感" in logged[-1].details["reason"]
    (item,) = parked(store.storage, now=NOW + 4 * HOUR, config=store.config.jobs.summarize)
    assert (item.session_id, item.failures) == ("s1", 3)
    assert item.retry_at == NOW + 2 * HOUR + timedelta(days=7)


def test_a_rejected_answer_every_time_parks_too(make_store: StoreFactory, fake: FakeLLM) -> None:
    store = make_store(job={"parking": {"after_failures": 2}})
    ids = add_session(store, "s1", 21, start=T0)
    bad = {"summary": "用户谈了很多事情，包括报告格式和交付时间。", "memories": [{"key": "a;b"}]}
    fake.responder = lambda _request: completion(content=json.dumps(bad))
    for run in range(2):
        result = summarize(store, NOW + run * HOUR)
        assert result.stats["sessions_rejected"] == 1
    assert result.stats["rejected_bad_key"] == 1
    assert parked_now(store, NOW + 2 * HOUR)
    assert requests_for(fake, ids) == 2


def test_an_answer_the_provider_filters_counts_as_its_content_filter(
    make_store: StoreFactory, fake: FakeLLM
) -> None:
    store = make_store(job={"parking": {"after_failures": 1}})
    add_session(store, "s1", 21, start=T0)
    fake.script(completion("被过滤的内容，不应保存为摘要，也不该落库。", finish_reason="sensitive"))
    result = summarize(store, NOW)
    assert result.stats["rejected_content_filter"] == 1
    assert parked_now(store, NOW + HOUR)


@pytest.mark.parametrize(
    "reply",
    [error(500, "internal error"), error(400, "模型不存在，请检查模型代码。")],
    ids=["server-error", "wrong-model"],
)
def test_failures_that_are_not_the_sessions_never_park_it(
    make_store: StoreFactory, fake: FakeLLM, reply: Any
) -> None:
    store = make_store(max_retries=0)
    add_session(store, "s1", 21, start=T0)
    fake.responder = lambda _request: reply
    for run in range(4):
        assert summarize(store, NOW + run * HOUR).status == "failed"
    assert not parked_now(store, NOW + 5 * HOUR)
    assert consecutive_failures(store.storage, SessionRef("u1", "", "s1")) == 0
    assert not [c for c in store.changes(user_id="u1") if c.action == "session_failed"]


def test_a_success_ends_the_streak(make_store: StoreFactory, fake: FakeLLM) -> None:
    store = make_store()
    ids = add_session(store, "s1", 21, start=T0)
    fake.script(error(400, FILTERED), error(400, FILTERED))
    summarize(store, NOW)
    summarize(store, NOW + HOUR)
    assert summarize(store, NOW + 2 * HOUR).stats["sessions_summarized"] == 1
    ref = SessionRef("u1", "", "s1")
    assert consecutive_failures(store.storage, ref) == 0
    add_session(store, "s1", 11, start=T0 + timedelta(days=1))
    fake.script(error(400, FILTERED), error(400, FILTERED))
    summarize(store, NOW + 3 * HOUR)
    summarize(store, NOW + 4 * HOUR)
    assert consecutive_failures(store.storage, ref) == 2
    assert not parked_now(store, NOW + 5 * HOUR)
    assert ids


def test_a_parked_session_is_retried_after_the_interval_and_reparked_at_once(
    make_store: StoreFactory, fake: FakeLLM
) -> None:
    store = make_store(job={"parking": {"after_failures": 2, "retry_after_days": 3}})
    ids = add_session(store, "s1", 21, start=T0)
    refuse_s1(fake, ids)
    summarize(store, NOW)
    summarize(store, NOW + HOUR)  # parked at NOW + 1h, retry at NOW + 1h + 3 days
    summarize(store, NOW + timedelta(days=3))
    assert requests_for(fake, ids) == 2
    result = summarize(store, NOW + HOUR + timedelta(days=3))
    assert requests_for(fake, ids) == 3  # tried once more...
    assert result.stats["sessions_newly_parked"] == 1  # ...and parked again at once
    assert parked_now(store, NOW + 2 * HOUR + timedelta(days=3))
    # When the provider accepts it again, the retry succeeds and the session is free.
    fake.responder = default_summary
    result = summarize(store, NOW + 2 * HOUR + timedelta(days=6))
    assert result.stats["sessions_summarized"] == 1
    assert parked(store.storage, now=NOW, config=store.config.jobs.summarize) == []


def test_status_review_and_the_retry_command(
    make_store: StoreFactory, fake: FakeLLM, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = make_store(job={"parking": {"after_failures": 1}})
    ids = add_session(store, "s1", 21, start=T0)
    refuse_s1(fake, ids)
    summarize(store, NOW)
    store.close()
    at = ["--db", str(db_path), "--now", (NOW + HOUR).isoformat()]

    assert main([*at, "status"]) == 0
    out = capsys.readouterr().out
    assert "parked:    1 session(s) the model will not summarize" in out
    assert "u1 session s1: parked 2026-03-02 03:00 UTC after 1 refusals" in out
    assert "敏感" in out
    assert main([*at, "status", "--json"]) == 0
    (item,) = json.loads(capsys.readouterr().out)["parked_sessions"]
    assert (item["session_id"], item["retry_due"]) == ("s1", False)

    assert main([*at, "review", "sessions"]) == 0
    assert "session s1: parked" in capsys.readouterr().out
    assert main([*at, "review", "sessions", "--json"]) == 0
    (item,) = json.loads(capsys.readouterr().out)
    assert item["failures"] == 1 and "HTTP 400" in item["reason"]

    assert main([*at, "summarize", "retry", "nope", "--yes"]) == 3
    assert "no parked session 'nope'" in capsys.readouterr().err
    assert main([*at, "summarize", "retry", "s1", "--yes"]) == 0
    assert "released session s1 of user u1" in capsys.readouterr().out
    assert main([*at, "review", "sessions"]) == 0
    assert capsys.readouterr().out.strip() == "(no parked sessions)"

    with MemoryStore(db_path, config=summarize_config(fake.url)) as again:
        assert not parked_now(again, NOW + 2 * HOUR)
        fake.responder = default_summary
        assert summarize(again, NOW + 2 * HOUR).stats["sessions_summarized"] == 1
        (released,) = [c for c in again.changes(user_id="u1") if c.action == "unpark"]
        assert released.actor == "cli:summarize-retry"


def test_the_retry_command_needs_the_user_when_two_share_a_session_id(
    make_store: StoreFactory, fake: FakeLLM, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = make_store(job={"parking": {"after_failures": 1}})
    add_session(store, "s1", 21, user_id="ann", start=T0)
    add_session(store, "s1", 21, user_id="bob", start=T0)
    fake.responder = lambda _request: error(400, FILTERED)
    summarize(store, NOW)
    store.close()
    at = ["--db", str(db_path), "--now", (NOW + HOUR).isoformat()]
    assert main([*at, "summarize", "retry", "s1", "--yes"]) == 65
    assert "--user" in capsys.readouterr().err
    assert main([*at, "summarize", "retry", "s1", "-u", "bob", "--yes"]) == 0
    assert "released session s1 of user bob" in capsys.readouterr().out
    assert main([*at, "review", "sessions", "--json"]) == 0
    assert [i["user_id"] for i in json.loads(capsys.readouterr().out)] == ["ann"]


def test_forgetting_the_user_erases_the_parking_rows(
    make_store: StoreFactory, fake: FakeLLM
) -> None:
    store = make_store(job={"parking": {"after_failures": 1}})
    add_session(store, "s1", 21, start=T0)
    fake.responder = lambda _request: error(400, FILTERED)
    summarize(store, NOW)
    assert parked(store.storage, now=NOW, config=store.config.jobs.summarize)
    store.forget_user("u1")
    assert parked(store.storage, now=NOW, config=store.config.jobs.summarize) == []
    assert not [c for c in store.changes() if c.action in ("session_failed", "park")]


def test_the_store_layer_names_summary_notes_as_the_summarizer_does() -> None:
    from memkeeper.store.parking import summary_key as stored
    from memkeeper.summarize.session import summary_key

    assert stored("s-1") == summary_key("s-1") == "summary:s-1"
