"""Extraction's gate: one bad candidate rejects the whole answer, and so the session.

Each kind of bad answer (malformed JSON, invented message ids, values for another user,
keys with SQL or control characters, huge values, too many candidates) is rejected and
counted, nothing of the session is written, and the session is summarized next run.
"""

# Chinese conversation text uses fullwidth punctuation on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fake_llm import FakeLLM, Reply, add_session, completion, snapshot
from llm_fixtures import StoreFactory
from test_extract import NOW, SUMMARY, T0, answer, conversation, memory, summarize

pytestmark = pytest.mark.usefixtures("api_key")  # the fake's key, never a real one

# -- the gate: one bad candidate rejects the session ------------------------------------------


GOOD = "以后报告都用PDF格式。"


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (
            lambda ids: completion(content='{"summary": "' + SUMMARY + '", "memories": [{"key"'),
            None,
        ),
        (
            lambda ids: completion(content=json.dumps({"summary": SUMMARY, "memories": "PDF"})),
            "malformed",
        ),
        (lambda ids: answer({"key": "report_format", "value": "PDF"}), "malformed"),
        (
            lambda ids: answer(memory("report_format", "PDF", [ids[2]], confidence="high")),
            "malformed",
        ),
        (lambda ids: answer(memory("report_format", "PDF", [999_999])), "invented_message_ids"),
        (lambda ids: answer(memory("report_format", "PDF", [ids[2]], user_id="bob")), "other_user"),
        (
            lambda ids: answer(memory("report_format", "PDF", [ids[2]], namespace="work")),
            "other_user",
        ),
        (lambda ids: answer(memory("x'; DROP TABLE memories;--", "PDF", [ids[2]])), "bad_key"),
        (lambda ids: answer(memory("report drop table memories", "PDF", [ids[2]])), "bad_key"),
        (lambda ids: answer(memory("report\x07format", "PDF", [ids[2]])), "bad_key"),
        (lambda ids: answer(memory("report_format", "P" * 5000, [ids[2]])), "huge_value"),
        (lambda ids: answer(memory("report_format", "PDF\x00", [ids[2]])), "huge_value"),
        (lambda ids: answer(*[memory(f"k{i}", "v", [ids[2]]) for i in range(31)]), "too_many"),
    ],
    ids=[
        "broken-json",
        "not-a-list",
        "missing-fields",
        "bad-confidence",
        "invented-id",
        "other-user",
        "other-namespace",
        "sql-key",
        "sql-words-key",
        "control-key",
        "huge-value",
        "nul-value",
        "too-many",
    ],
)
def test_the_gate_rejects_the_whole_answer_and_the_session_is_retried_next_run(
    make_store: StoreFactory,
    fake: FakeLLM,
    bad: Callable[[list[int]], Reply],
    problem: str | None,
) -> None:
    store = make_store()
    ids = conversation(store, {2: GOOD})
    store.remember("u1", "home_city", "北京")
    before = snapshot(store)
    fake.script(bad(ids))

    result = summarize(store)

    assert result.status == "ok"
    assert result.stats["sessions_rejected"] == 1
    assert result.stats["sessions_summarized"] == 0
    assert result.stats[f"rejected_{problem or 'answer'}"] == 1
    assert snapshot(store) == before  # no summary, no memory, no marked message
    # Retried next run, and this time the answer is good.
    fake.script(answer(memory("report_format", "PDF", [ids[2]])))
    again = summarize(store, NOW + timedelta(hours=1))
    assert again.stats["sessions_summarized"] == 1
    assert store.recall("u1", "report_format").value == "PDF"


def test_a_chunked_session_extracts_from_every_segment_and_checks_ids_per_call(
    make_store: StoreFactory, fake: FakeLLM
) -> None:
    store = make_store(job={"input_budget_tokens": 1000, "max_concurrency": 1})
    ids = add_session(
        store,
        "s1",
        120,
        start=T0,
        text=lambda i: "以后报告都用PDF格式。" if i == 0 else f"第{i}条消息：" + "进度正常。" * 20,
    )
    shown: list[list[int]] = []

    def reply(request: Any) -> Reply:
        seen = [int(n) for n in re.findall(r"^\[#(\d+) ", request.user, re.M)]
        shown.append(seen)
        if request.kind == "fold":
            return completion("合并后的摘要：项目进度一切正常，用户要求报告一律使用PDF格式。")
        found = [memory("report_format", "PDF", [ids[0]])] if ids[0] in seen else []
        return answer(
            *found, summary=f"第{len(shown)}段摘要：这一段里项目进度一切正常，没有新的风险。"
        )

    fake.responder = reply
    result = summarize(store)
    assert result.stats["sessions_summarized"] == 1
    assert sum(1 for r in fake.requests if r.kind == "segment") >= 2
    assert store.recall("u1", "report_format").value == "PDF"
    assert ids[0] not in shown[1]  # each segment saw its own messages only


def test_a_segment_citing_a_message_of_another_segment_invents_it(
    make_store: StoreFactory, fake: FakeLLM
) -> None:
    store = make_store(job={"input_budget_tokens": 1000, "max_concurrency": 1})
    ids = add_session(store, "s1", 120, start=T0, text=lambda i: f"第{i}条：" + "进度正常。" * 20)
    before = snapshot(store)
    fake.responder = lambda _request: answer(
        memory("report_format", "PDF", [ids[0]]), summary="这一段里项目进度一切正常，没有新的风险。"
    )
    result = summarize(store)
    assert result.stats["rejected_invented_message_ids"] == 1
    assert snapshot(store) == before
