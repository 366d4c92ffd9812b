"""A month of one user's conversations, with a frozen clock: what extraction keeps.

Day 1 the user states a report-format preference twice and where they live; day 8 they
change the format, are in a bad mood and make a this-time-only remark; day 15 they forget
where they live; day 22 an older session that still mentions the city is summarized late,
and the new format is said again; day 30 the grey period of the old format has ended. At the
end exactly the right entries exist, the old format went through its grey period, the
forgotten city was never re-created from old messages, and the agent's own later
``remember`` of it is not blocked.
"""

# Chinese conversation text uses fullwidth punctuation on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM, Recorded, Reply, add_session, completion, summarize_config
from freezegun import freeze_time

from memkeeper import MemoryStore
from memkeeper.llm import sdk
from memkeeper.maintenance.runner import JobResult, run_once

DAY1 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)

# What the "model" proposes for a user sentence (the fake reads the transcript it is sent).
PROPOSALS: dict[str, dict[str, Any]] = {
    "以后报告都用PDF格式。": {"key": "Report Format", "value": "PDF", "confidence": 0.8},
    "记住，报告要PDF。": {"key": "report-format", "value": "PDF", "confidence": 0.85},
    "我住在北京。": {"key": "home_city", "value": "北京", "kind": "fact", "confidence": 0.95},
    "以后报告改用Word吧。": {"key": "report_format", "value": "Word", "confidence": 0.9},
    "今天心情好差，烦死了。": {"key": "current_mood", "value": "烦躁", "confidence": 0.9},
    "这次先别发PDF了。": {"key": "report_format", "value": "不要PDF", "confidence": 0.8},
    "我还是住北京。": {"key": "home_city", "value": "北京", "kind": "fact", "confidence": 0.9},
    "报告继续用Word。": {"key": "report_format", "value": "Word", "confidence": 0.8},
}


def model(request: Recorded) -> Reply:
    """Summarize, and propose one memory per sentence it knows, citing that message."""
    memories = []
    for number, sentence in re.findall(r"^\[#(\d+) user [^\]]*\] (.*)$", request.user, re.M):
        if sentence in PROPOSALS:
            memories.append(
                {"kind": "preference", "scope": "lasting", "message_ids": [int(number)]}
                | PROPOSALS[sentence]
            )
    summary = "用户谈了报告格式、住处和心情，以及一些日常闲聊的内容。"
    return completion(content=json.dumps({"summary": summary, "memories": memories}))


@pytest.fixture
def store(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryStore]:
    # The SDK's models cannot be defined while freezegun has replaced datetime: load the SDK
    # in use (zai-sdk or zhipuai) before the clock is frozen (the client would load it on
    # its first run).
    sdk.load()
    monkeypatch.setenv("ZHIPUAI_API_KEY", "0123456789abcdef.TestKeySecretPart")
    with FakeLLM(model) as fake, MemoryStore(db_path, config=summarize_config(fake.url)) as opened:
        yield opened


def talk(store: MemoryStore, session: str, lines: dict[int, str], when: datetime) -> list[int]:
    """21 messages of a session at ``when`` (even positions are the user's)."""
    return add_session(
        store, session, 21, start=when, text=lambda i: lines.get(i, f"闲聊{i}：天气不错。")
    )


def run(store: MemoryStore, jobs: list[str]) -> list[JobResult]:
    return run_once(store, jobs).results


def test_a_month_of_conversations(store: MemoryStore) -> None:
    with freeze_time(DAY1) as clock:
        day1 = talk(
            store,
            "d1",
            {2: "以后报告都用PDF格式。", 6: "记住，报告要PDF。", 8: "我住在北京。"},
            DAY1,
        )
        # An older session that also says where the user lives: not due yet (9 messages).
        old = add_session(
            store, "old", 9, start=DAY1, text=lambda i: "我还是住北京。" if i == 4 else "嗯。"
        )
        (summarize,) = run(store, ["summarize"])
        assert summarize.stats["memories_extracted"] == 2
        pdf = store.recall("u1", "report_format")
        assert (pdf.kind, pdf.value, pdf.confidence) == ("preference", "PDF", 0.95)  # said twice
        city = store.recall("u1", "home_city")
        assert (city.kind, city.value, city.confidence) == ("fact", "北京", 0.9)
        assert store.changes(memory_id=pdf.id)[0].details["message_ids"] == [day1[2], day1[6]]

        clock.move_to(DAY1 + timedelta(days=7))
        talk(
            store,
            "d8",
            {2: "以后报告改用Word吧。", 4: "今天心情好差，烦死了。", 6: "这次先别发PDF了。"},
            DAY1 + timedelta(days=7),
        )
        (summarize,) = run(store, ["summarize"])
        assert summarize.stats["extract_dropped_mood"] == 1
        assert summarize.stats["extract_dropped_not_lasting"] == 1
        word = store.recall("u1", "report_format")
        assert (word.value, word.source) == ("Word", "session:d8")
        assert store.get(pdf.id).state == "superseded"  # type: ignore[union-attr]

        clock.move_to(DAY1 + timedelta(days=14))
        assert store.forget("u1", "home_city") == 1

        clock.move_to(DAY1 + timedelta(days=21))
        # The old session gets new messages and becomes due; the forget redacted its
        # sentence about the city ("我还是住[erased]。"), so nothing proposes it again.
        add_session(store, "old", 12, start=DAY1 + timedelta(days=21), text=lambda i: "好。")
        talk(store, "d22", {2: "报告继续用Word。"}, DAY1 + timedelta(days=21))
        (summarize,) = run(store, ["summarize"])
        assert "extract_skipped_forgotten" not in summarize.stats
        with store.storage.lock:
            said = [r["content"] for r in store.storage.hot.query("SELECT content FROM messages")]
        assert "我还是住[erased]。" in said and not any("北京" in text for text in said)
        assert summarize.stats["memories_reconfirmed"] == 1
        assert store.recall("u1", "home_city") is None
        word = store.recall("u1", "report_format")
        assert (word.value, word.confidence, word.source) == ("Word", 0.95, "session:d22")

        clock.move_to(DAY1 + timedelta(days=29))
        (settle,) = run(store, ["settle"])  # the old format's grey period (14 days) is over
        assert sum(settle.counts.values()) == 1
        # The agent may still remember the city explicitly: only extraction is held back.
        store.remember("u1", "home_city", "上海")

    keyed = sorted(
        (m.kind, m.key, m.value, m.state) for m in store.list_memories("u1") if m.kind != "note"
    )
    assert keyed == [
        ("fact", "home_city", "上海", "active"),
        ("preference", "report_format", "PDF", "cold"),
        ("preference", "report_format", "Word", "active"),
    ]
    # No mood, no this-time remark, and the city never came back from the old messages.
    assert not [c for c in store.changes(user_id="u1") if (c.after or {}).get("value") == "北京"]
    notes = sorted(m.key for m in store.list_memories("u1", kind="note") if m.state == "active")
    assert notes == ["summary:d1", "summary:d22", "summary:d8", "summary:old"]
    assert len(old) == 9
