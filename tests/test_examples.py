"""The seeds' agents in examples/ run on memkeeper, end to end, against the fake LLM server.

Each example runs as its own process with ``--script`` feeding the turns of
``examples/*.script`` and ``--base-url`` pointing at tests/fake_llm.py on 127.0.0.1 (no
network, no real key). The test reads what the model was sent (the system prompt built from
``context``, the history), what the example printed, and the database it left behind —
including the raw bytes of both files after a forget.
"""

# Chinese conversation text uses fullwidth punctuation on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_embeddings import DIMS, embed_reply
from fake_llm import FakeLLM, Recorded, Reply, completion, default_summary

from memkeeper import MemoryStore

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
KEY = "0123456789abcdef.ExampleKeySecret"


def model(request: Recorded) -> Reply:
    """Embeddings for the index job and search; a summary for the summarize job (it asks for
    JSON, ``response_format``); a plain-text answer for the agents' chat."""
    if request.path.endswith("/embeddings"):
        return embed_reply(request)
    if request.body.get("response_format"):
        return default_summary(request)
    last = request.body["messages"][-1]["content"]
    return completion(content=f"(fake model) answering: {last}")


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM(model) as server:
        yield server


@pytest.fixture
def env(tmp_path: Path, fake: FakeLLM) -> dict[str, str]:
    """The examples' environment: a config with fast retries, the fake's small vectors, a
    small summarize threshold (12 messages, keep the newest 4), and a key for the fake."""
    config = tmp_path / "config.toml"
    config.write_text(
        f'[llm]\nbase_url = "{fake.url}"\ntimeout_seconds = 5\nretry_backoff_seconds = 0.01\n'
        f"[search]\nembedding_dimensions = {DIMS}\n"
        "[jobs.summarize]\nmax_messages = 12\nkeep_recent = 4\n",
        encoding="utf-8",
    )
    return {**os.environ, "MEMKEEPER_CONFIG": str(config), "ZHIPUAI_API_KEY": KEY}


def run_example(
    name: str, args: list[str], *, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"{name} exited {result.returncode}:\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    assert KEY not in result.stdout + result.stderr
    return result


def run_job(db: Path, job: str, env: dict[str, str]) -> None:
    """One maintenance job, as the service would run it (``memkeeper run-once --job``)."""
    result = subprocess.run(
        [sys.executable, "-m", "memkeeper", "--db", str(db), "run-once", "--job", job],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{job}  " in result.stdout and " ok " in result.stdout, result.stdout


def chats(fake: FakeLLM) -> list[Recorded]:
    return [
        r
        for r in fake.requests
        if r.path.endswith("/chat/completions") and not r.body.get("response_format")
    ]


def file_bytes(store_path: Path) -> bytes:
    """Every byte of the hot and cold files and their write-ahead logs."""
    names = [store_path, store_path.with_name(f"{store_path.stem}-cold{store_path.suffix}")]
    paths = [p for n in names for p in (n, Path(f"{n}-wal")) if p.exists()]
    return b"".join(p.read_bytes() for p in paths)


# -- seed 000: MemoryAgent ---------------------------------------------------------------------


def test_memory_agent_imports_injects_remembers_forgets_and_leaves_summaries_to_the_service(
    tmp_path: Path, fake: FakeLLM, env: dict[str, str]
) -> None:
    shutil.copy(EXAMPLES / "agent_memory.json", tmp_path / "agent_memory.json")
    db = tmp_path / "agent.db"
    script = EXAMPLES / "memory_agent.script"
    args = ["--db", str(db), "--user", "xiaoming", "--base-url", fake.url, "--script", str(script)]
    out = run_example("memory_agent.py", args, cwd=tmp_path, env=env).stdout

    # The seed's old memory file came in once, and was set aside.
    assert "imported agent_memory.json: 6 new, 0 already known" in out
    assert not (tmp_path / "agent_memory.json").exists()
    assert (tmp_path / "agent_memory.json.imported").exists()
    assert "assistant> recalled: 用户名 = 梅雅达" in out
    assert "assistant> forgotten: 所在城市 (1 value(s) erased" in out
    assert "assistant> no memory of '所在城市'" in out
    assert "assistant> (fake model) answering: 我叫什么？" in out

    first, before_forget, after_forget, last = chats(fake)
    assert all(r.path.endswith("/chat/completions") for r in chats(fake))
    # Long-term memory reaches the system prompt through context(): the imported facts.
    assert "- 用户名: 梅雅达" in first.system and "- 所在城市: 北京" in first.system
    assert "第1步完成" in first.system  # an imported note, with its time
    assert "- 职业: 老师" in before_forget.system
    assert "周五下午和学生家长开会" in before_forget.system
    assert "北京" not in after_forget.system and "北京" not in last.system
    # Short-term memory: the session's history, oldest first, the new message last.
    roles = [m["role"] for m in last.body["messages"]]
    assert roles == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert last.body["messages"][-1]["content"] == "周五下午我有什么安排？"

    with MemoryStore(db) as store:
        facts = {m.key: m.value for m in store.list_memories("xiaoming", kind="fact")}
        assert facts == {
            "用户名": "梅雅达",
            "职业": "老师",
            "销售数据_总行数": "12453",
            "销售数据_时间范围": "2026-07-01 至 2026-07-31",
        }
        assert store.recall("xiaoming", "所在城市") is None
        assert len(store.history("xiaoming", "chat")) == 8
    # The forgotten city left no byte behind: not in either file, not in the log.
    assert "北京".encode() not in file_bytes(db)

    # A restart: nothing imported again, the history goes on (16 messages, past the
    # threshold); the service's summarize job folds the older ones into a note.
    again = run_example("memory_agent.py", args, cwd=tmp_path, env=env).stdout
    assert "imported" not in again
    with MemoryStore(db) as store:
        assert len(store.history("xiaoming", "chat")) == 16
    run_job(db, "summarize", env)
    with MemoryStore(db) as store:
        assert len(store.history("xiaoming", "chat")) == 4  # keep_recent
        (summary,) = [
            m for m in store.list_memories("xiaoming", kind="note") if m.key == "summary:chat"
        ]
        assert summary.state == "active" and summary.value.startswith("Summary of messages")
    fake.requests.clear()
    run_example("memory_agent.py", args, cwd=tmp_path, env=env)
    assert summary.value in chats(fake)[0].system  # the summary reaches the prompt


def test_memory_agent_without_a_key_still_keeps_memory(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ZHIPUAI_API_KEY"}
    script = tmp_path / "turns.script"
    script.write_text("/remember city=Hangzhou\n你好\n/remember\n/recall city\n", encoding="utf-8")
    db = tmp_path / "agent.db"
    args = ["--db", str(db), "--script", str(script)]
    out = run_example("memory_agent.py", args, cwd=tmp_path, env=env).stdout
    assert "assistant> remembered: city = Hangzhou" in out
    assert "assistant> (no model: set ZHIPUAI_API_KEY" in out
    assert "assistant> error: usage: /remember KEY VALUE" in out
    assert "assistant> recalled: city = Hangzhou" in out


# -- seed 003: workbuddy -----------------------------------------------------------------------


def test_workbuddy_projects_episodes_preferences_search_and_forgetting_a_project(
    tmp_path: Path, fake: FakeLLM, env: dict[str, str]
) -> None:
    db = tmp_path / "workbuddy.db"
    args = ["--db", str(db), "--base-url", fake.url, "--script", str(EXAMPLES / "workbuddy.script")]
    out = run_example("workbuddy.py", args, cwd=tmp_path, env=env).stdout

    # Preferences carry confidence and source; an inferred one is confirmed by the user.
    assert (
        "preference outline_first = 汇报前先看提纲 (project acme, confidence 0.60, source " in out
    )
    assert "'inferred from past projects'" in out
    assert "preference outline_first = 汇报前先看提纲 (project acme, confidence 0.95" in out
    # PDF -> Word -> PDF three days later: the same PDF entry is current again.
    pdf = re.findall(r"preference report_format = PDF \(project acme.*entry (\w+)\)", out)
    assert len(pdf) == 2 and pdf[0] == pdf[1]
    current = "report_format = PDF  [active] confidence 0.95, source 'stated by the user'"
    assert f"{current}, entry {pdf[0]}" in out
    assert re.search(r"report_format = Word  \[superseded\]", out)
    assert "re-confirmed: re-asserted during its grey period" in out
    # Episodes per project, in time order.
    timeline = out.split("timeline of acme:")[1].split("you>")[0]
    assert timeline.index("客户提案") < timeline.index("周报")
    assert "需求评审" not in timeline
    # Retrieval by meaning (keyword signal here: no embeddings in this test).
    assert re.search(r"found for '报告用PDF格式吗':\n  [\d.]+  report_format = PDF", out)
    assert re.search(r"found for '公司logo':\n  [\d.]+  cover = 封面加公司logo", out)

    # The prompt: this project's context and the profile (name, role, in every project),
    # never another project's; the inferred preference once confirmed.
    before, after = chats(fake)
    for request in (before, after):
        assert "Current project: acme" in request.system
        assert "- name: 梅雅达" in request.system and "- role: 产品经理" in request.system
        assert (
            "- report_format: PDF" in request.system and "- cover: 封面加公司logo" in request.system
        )
        assert "客户提案" in request.system and "Markdown" not in request.system
    # Not in the slots: 0.6 < [context] min_confidence. (Search may list it as relevant to
    # "客户汇报": BM25 matches the two-character word 汇报.)
    assert "汇报前先看提纲" not in before.system.split("Relevant to this message:")[0]
    assert "- outline_first: 汇报前先看提纲" in after.system
    assert after.body["messages"][1]["content"] == before.body["messages"][-1]["content"]

    # "Forget this project": every entry of acme erased, hot, cold and log, to the byte.
    assert "forgot project acme: 4 entries and 2 episodes erased" in out
    with MemoryStore(db) as store:
        assert store.list_memories("me", namespace="acme") == []
        assert [c.action for c in store.changes(namespace="acme")] == ["forget"]
        assert store.episodes("me", namespace="acme") == []
        globex = store.list_memories("me", namespace="globex")
        assert [(m.key, m.value, m.state) for m in globex] == [
            ("report_format", "Markdown", "active")
        ]
        profile = {m.key: m.value for m in store.list_memories("me", namespace="")}
        assert profile == {"name": "梅雅达", "role": "产品经理"}
    raw = file_bytes(db)
    for text in ("封面加公司logo", "汇报前先看提纲", "outline_first", "三段式大纲", "结论放最前"):
        assert text.encode() not in raw, text

    # Retrieval by meaning: once the service's index job has embedded the entries, a search
    # ranks by similarity too (here the fake's vectors, hashed character trigrams).
    run_job(db, "index", env)
    script = tmp_path / "search.script"
    script.write_text("/project globex\n/search format of the reports\n", encoding="utf-8")
    args = ["--db", str(db), "--base-url", fake.url, "--script", str(script)]
    out = run_example("workbuddy.py", args, cwd=tmp_path, env=env).stdout
    hit = re.search(r"report_format = Markdown  \(similarity ([\d.]+)", out)
    assert hit and float(hit.group(1)) > 0, out
