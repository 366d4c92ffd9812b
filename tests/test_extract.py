"""Extraction of durable facts from conversations: the gate, the three sieves, explain.

The real zhipuai client talks to the fake server on 127.0.0.1, which answers the summarizing
call with scripted ``{"summary": ..., "memories": [...]}`` objects; every assertion is on
the database afterwards.
"""

# Chinese conversation text uses fullwidth punctuation on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fake_llm import FakeLLM, Reply, add_session, completion
from llm_fixtures import StoreFactory

from memkeeper import MemoryStore
from memkeeper.maintenance.runner import JobResult, run_once
from memkeeper.records import Memory
from memkeeper.summarize.extract import normalize_key, session_only

pytestmark = pytest.mark.usefixtures("api_key")  # the fake's key, never a real one

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 2, 3, 0, tzinfo=UTC)
SUMMARY = "用户讨论了报告格式和交付时间，确认了几项长期偏好。"


def answer(*memories: dict[str, Any], summary: str = SUMMARY) -> Reply:
    """The model's answer: a summary and these memories."""
    return completion(content=json.dumps({"summary": summary, "memories": list(memories)}))


def memory(key: str, value: str, ids: list[int], **fields: Any) -> dict[str, Any]:
    """One candidate as the prompt asks for it (lasting preference, confidence 0.9)."""
    return {
        "key": key,
        "value": value,
        "kind": "preference",
        "scope": "lasting",
        "confidence": 0.9,
        "message_ids": ids,
        **fields,
    }


def conversation(
    store: MemoryStore, lines: dict[int, str], *, session: str = "s1", start: datetime = T0
) -> list[int]:
    """21 messages (even positions are the user's); ``lines`` replaces some texts."""
    return add_session(
        store, session, 21, start=start, text=lambda i: lines.get(i, f"闲聊第{i}条，没什么要记的。")
    )


def summarize(store: MemoryStore, now: datetime = NOW) -> JobResult:
    (result,) = run_once(store, ["summarize"], now=now).results
    return result


def keyed(store: MemoryStore, user: str = "u1") -> list[Memory]:
    return sorted(
        (m for m in store.list_memories(user) if m.kind != "note"),
        key=lambda m: (m.key or "", m.created_at),
    )


# -- what is written ------------------------------------------------------------------------


def test_a_stated_preference_is_remembered_with_its_session_and_messages(
    make_store: StoreFactory, fake: FakeLLM
) -> None:
    store = make_store()
    ids = conversation(store, {2: "以后报告都用PDF格式。", 4: "我住在北京。"})
    fake.script(
        answer(
            memory("report_format", "PDF", [ids[2]], confidence=0.85),
            memory("home_city", "北京", [ids[4]], kind="fact", confidence=0.95),
        )
    )
    result = summarize(store)

    assert result.status == "ok"
    pref, city = (store.recall("u1", "report_format"), store.recall("u1", "home_city"))
    assert (pref.kind, pref.value, pref.confidence) == ("preference", "PDF", 0.85)
    assert (city.kind, city.value, city.confidence) == ("fact", "北京", 0.9)  # one statement
    assert pref.source == city.source == "session:s1"
    (created,) = store.changes(memory_id=pref.id)
    assert created.action == "create"
    assert created.actor == "job:summarize"
    assert created.run_id == result.run_id
    assert created.details["session_id"] == "s1"
    assert created.details["message_ids"] == [ids[2]]
    assert "extracted from session 's1'" in created.reason
    assert result.stats["memories_extracted"] == 2
    assert result.counts == {"summarize": 1, "create": 2}
    # explain quotes the sentence the value came from.
    text = store.explain(pref.id)
    assert f"said in message #{ids[2]}: user, 2026-03-01 09:00 UTC: '以后报告都用PDF格式。'" in text
    # The request asked for memories in the same call: one call, both answers.
    (request,) = fake.requests
    assert '"memories"' in request.system
    assert "message_ids" in request.system


def test_a_preference_stated_twice_is_confirmed_under_one_normalized_key(
    make_store: StoreFactory, fake: FakeLLM
) -> None:
    store = make_store()
    ids = conversation(store, {2: "回复我先给结论。", 8: "记住：先给结论再给理由。"})
    fake.script(
        answer(
            memory("Reply Style", "结论先行", [ids[2]], confidence=0.75),
            memory("ｒｅｐｌｙ－style", "结论先行", [ids[8]], confidence=0.8),
        )
    )
    result = summarize(store)
    (entry,) = keyed(store)
    assert (entry.key, entry.value, entry.confidence) == ("reply_style", "结论先行", 0.95)
    (created,) = store.changes(memory_id=entry.id)
    assert created.details["message_ids"] == [ids[2], ids[8]]
    assert created.details["extracted"]["confirmed_in_session"] is True
    assert result.stats["memories_extracted"] == 1


def test_the_same_value_in_a_later_session_reconfirms_and_a_new_value_supersedes(
    make_store: StoreFactory, fake: FakeLLM
) -> None:
    store = make_store()
    first = conversation(store, {2: "以后报告用PDF。"})
    fake.script(answer(memory("report_format", "PDF", [first[2]], confidence=0.8)))
    summarize(store)
    again = conversation(store, {2: "报告还是PDF。"}, session="s2", start=T0 + timedelta(days=1))
    fake.script(answer(memory("report_format", "PDF", [again[2]], confidence=0.8)))
    summarize(store, NOW + timedelta(days=1))
    pdf = store.recall("u1", "report_format")
    assert (pdf.value, pdf.confidence, pdf.source) == ("PDF", 0.95, "session:s2")
    assert [c.action for c in store.changes(memory_id=pdf.id)] == ["create", "reconfirm"]

    later = conversation(
        store, {4: "以后报告改用Word。"}, session="s3", start=T0 + timedelta(days=2)
    )
    fake.script(answer(memory("report_format", "Word", [later[4]])))
    result = summarize(store, NOW + timedelta(days=2))
    word = store.recall("u1", "report_format")
    assert (word.value, word.source) == ("Word", "session:s3")
    old = store.get(pdf.id)
    assert old is not None and old.state == "superseded"
    assert result.stats["memories_superseded"] == 1


@pytest.mark.parametrize(
    ("candidate", "reason"),
    [
        ({"confidence": 0.6}, "low_confidence"),
        ({"kind": "mood", "key": "mood_today", "value": "烦躁"}, "mood"),
        ({"key": "user_mood", "value": "低落"}, "mood"),
        ({"scope": "session"}, "not_lasting"),
        ({"at": 2, "text": "这次不要PDF，发Word吧。"}, "not_lasting"),
        ({"at": 3}, "not_from_user"),
    ],
    ids=["low-confidence", "mood-kind", "mood-key", "session-scope", "this-time", "assistant"],
)
def test_the_first_sieve_drops_and_counts(
    make_store: StoreFactory, fake: FakeLLM, candidate: dict[str, Any], reason: str
) -> None:
    store = make_store()
    at = candidate.pop("at", 2)
    ids = conversation(store, {at: candidate.pop("text", "报告发PDF。")})
    fake.script(answer({**memory("report_format", "PDF", [ids[at]]), **candidate}))
    result = summarize(store)
    assert result.stats["sessions_summarized"] == 1  # the summary is written all the same
    assert result.stats[f"extract_dropped_{reason}"] == 1
    assert keyed(store) == []


def test_a_lasting_word_beside_this_time_keeps_the_preference(
    make_store: StoreFactory, fake: FakeLLM
) -> None:
    assert session_only(["这次不要PDF。"])
    assert not session_only(["这次开始，以后都不要PDF。"])
    assert not session_only(["No PDF this time, and from now on never."])
    assert not session_only(["今天开始我在新公司上班。"])
    assert session_only(["I'm working from home today."])
    assert normalize_key("  Report-Format ") == normalize_key("report__format") == "report_format"
    store = make_store()
    ids = conversation(store, {2: "这次开始，以后都不要PDF。"})
    fake.script(answer(memory("report_format", "不要PDF", [ids[2]])))
    summarize(store)
    assert store.recall("u1", "report_format").value == "不要PDF"


def test_extraction_can_be_switched_off(make_store: StoreFactory, fake: FakeLLM) -> None:
    store = make_store(job={"extract": {"enabled": False}})
    ids = conversation(store, {2: "以后报告都用PDF格式。"})
    fake.script(answer(memory("report_format", "PDF", [ids[2]])))
    result = summarize(store)
    assert result.stats["sessions_summarized"] == 1
    assert keyed(store) == []
    assert '"memories"' not in fake.requests[0].system


def test_an_older_conversation_does_not_override_a_newer_or_pinned_value(
    make_store: StoreFactory, fake: FakeLLM
) -> None:
    store = make_store()
    ids = conversation(store, {2: "报告用PDF。", 4: "我在A公司上班。"})
    store.remember("u1", "report_format", "Word")  # the agent's own, after the messages
    store.remember("u1", "employer", "B公司", pinned=True)
    fake.script(
        answer(
            memory("report_format", "PDF", [ids[2]]),
            memory("employer", "A公司", [ids[4]], kind="fact"),
        )
    )
    result = summarize(store, datetime.now(UTC) + timedelta(days=1))
    assert store.recall("u1", "report_format").value == "Word"
    assert store.recall("u1", "employer").value == "B公司"
    assert result.stats["extract_skipped_stale"] == 1
    assert result.stats["extract_skipped_pinned"] == 1


def test_undo_of_the_run_takes_the_extraction_back_too(
    make_store: StoreFactory, fake: FakeLLM
) -> None:
    from memkeeper.maintenance.undo import undo_run

    store = make_store()
    before_value = store.remember("u1", "report_format", "PDF", kind="preference")
    ids = add_session(
        store,
        "s1",
        21,
        start=datetime.now(UTC) + timedelta(minutes=1),
        text=lambda i: "以后报告改用Word。" if i == 2 else f"闲聊第{i}条，没什么要记的。",
    )
    fake.script(answer(memory("report_format", "Word", [ids[2]])))
    result = summarize(store, datetime.now(UTC) + timedelta(hours=1))
    (word,) = [m for m in keyed(store) if m.state == "active"]  # not recall: a use is a change
    assert word.value == "Word"

    report = undo_run(store, result.run_id, now=datetime.now(UTC) + timedelta(hours=2))

    assert report.conflicts == {}
    current = store.recall("u1", "report_format")
    assert (current.id, current.value) == (before_value.id, "PDF")
    assert [m.id for m in store.history("u1", "s1")] == ids
    assert [m for m in store.list_memories("u1") if m.value == "Word"] == []


@pytest.mark.both_backends  # tombstones on PostgreSQL too (issue 22, Erasure)
def test_a_forgotten_key_comes_back_only_from_words_said_after_the_forget(
    make_store: StoreFactory, fake: FakeLLM
) -> None:
    store = make_store()
    before = conversation(store, {2: "我住在北京。"}, start=datetime.now(UTC) - timedelta(days=1))
    store.remember("u1", "home_city", "北京", kind="fact")
    assert store.forget("u1", "home_city") == 1
    fake.script(answer(memory("home_city", "北京", [before[2]], kind="fact")))
    result = summarize(store, datetime.now(UTC) + timedelta(hours=1))
    assert result.stats["extract_skipped_forgotten"] == 1
    assert store.recall("u1", "home_city") is None
    # Said again after the forget: that is new information, not an old message.
    after = conversation(
        store, {2: "我搬到上海了。"}, session="s2", start=datetime.now(UTC) + timedelta(minutes=1)
    )
    fake.script(answer(memory("home_city", "上海", [after[2]], kind="fact")))
    summarize(store, datetime.now(UTC) + timedelta(hours=2))
    assert store.recall("u1", "home_city").value == "上海"
