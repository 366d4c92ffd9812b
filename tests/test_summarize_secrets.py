"""The API key never appears in logs, in the database files, or in any error message.

The key has Zhipu's ``<id>.<secret>`` shape. This SDK version sends it as-is (``Bearer
<key>``; it signs a JWT only when token caching is switched on, which memkeeper never does),
so the raw key — and its secret half on its own — is what must never leak. The fake server
is hostile: its error bodies echo the Authorization header back.
"""

from __future__ import annotations

import io
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_llm import FakeLLM, Recorded, Reply, add_session, completion, error, summarize_config

from memkeeper import MemoryStore
from memkeeper.config import LlmSection
from memkeeper.llm import LlmClient, LlmError
from memkeeper.logs import configure
from memkeeper.maintenance.runner import run_once

KEY = "7f3c9a1e2b4d4c6f8a0b1c2d3e4f5a6b.Xq9ZsEcReTpArT2026"
SECRET_HALF = KEY.split(".")[1]


def echoing(status: int) -> Callable[[Recorded], Reply]:
    def respond(request: Recorded) -> Reply:
        return error(status, f"invalid token: {request.headers.get('Authorization')}")

    return respond


def echoing_html(request: Recorded) -> Reply:
    return Reply(
        body=f"<p>{request.headers.get('Authorization')}</p>".encode(), content_type="text/html"
    )


def assert_clean(text: str, where: str) -> None:
    assert KEY not in text, f"the API key leaked into {where}"
    assert SECRET_HALF not in text, f"the key's secret half leaked into {where}"


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_the_key_never_leaks(db_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    stream = io.StringIO()
    configure(level="debug", fmt=fmt, stream=stream)
    monkeypatch.setenv("ZHIPUAI_API_KEY", KEY)
    texts: list[tuple[str, str]] = []
    with FakeLLM() as fake:
        config = summarize_config(fake.url, job={"max_concurrency": 1}, max_retries=1)
        store = MemoryStore(db_path, config=config)
        for n in range(4):
            add_session(store, f"s{n}", 21, start=store.now())
        # A success, then a server error whose body echoes the key (the rest wait).
        fake.script(completion("The first session agreed on a budget of 2400 yuan."))
        fake.responder = echoing(500)
        runs = [run_once(store, ["summarize"]).results[0]]
        for responder in (echoing(401), echoing(400), echoing_html):
            fake.responder = responder
            runs.append(run_once(store, ["summarize"]).results[0])
        assert [run.status for run in runs] == ["failed", "failed", "failed", "ok"]
        assert runs[0].stats["sessions_summarized"] == 1
        assert runs[3].stats["sessions_rejected"] == 3
        # The server did receive the key, and did echo it: the errors show it redacted.
        assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in fake.requests)
        assert "[REDACTED]" in (runs[0].error or "")
        texts += [(run.error or "", f"run error {run.status}") for run in runs]
        for run in store.job_runs():
            texts.append((run.error or "", "job_runs.error"))
            texts.append((str(run.counts), "job_runs.counts"))

        # Exceptions raised straight from the client, with their tracebacks.
        section = LlmSection.model_validate(
            {"base_url": fake.url, "max_retries": 0, "retry_backoff_seconds": 0.0}
        )
        for responder in (echoing(500), echoing(401), echoing(400), echoing_html):
            fake.responder = responder
            with LlmClient.from_config(section) as client, pytest.raises(LlmError) as caught:
                client.complete([{"role": "user", "content": "hi"}])
            texts.append((str(caught.value), "exception message"))
            texts.append((repr(caught.value), "exception repr"))
            texts.append(("".join(traceback.format_exception(caught.value)), "traceback"))
            # Nothing of the SDK's (whose messages quote the server) travels along.
            assert caught.value.__context__ is None
            assert caught.value.__cause__ is None

        store.storage.hot.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        store.close()

    logs = stream.getvalue()
    assert "HTTP Request" in logs or "Retrying" in logs or "job finished" in logs
    texts.append((logs, f"the {fmt} log"))
    for text, where in texts:
        assert_clean(text, where)
    files = sorted(db_path.parent.glob(f"{db_path.name}*"))
    assert files
    for path in files:
        data = path.read_bytes()
        assert KEY.encode() not in data, f"the API key is in {path.name}"
        assert SECRET_HALF.encode() not in data, f"the key's secret half is in {path.name}"
