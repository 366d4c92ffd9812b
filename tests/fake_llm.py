"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, for the real zhipuai client.

``FakeLLM`` runs a ``ThreadingHTTPServer`` on a free port in a background thread. Point
``[llm] base_url`` at ``fake.url``; the SDK then posts to ``{url}/chat/completions``. Each
request is answered by the next scripted :class:`Reply` (``fake.script(...)``), else by the
``responder`` (default: a plausible summary naming the message ids it saw). Every request is
recorded (headers and JSON body), and the server tracks how many were in flight at once.

Also here: small helpers the summarizer tests share (a config pointing at the fake, fast
bulk insertion of conversation messages, a snapshot of the rows a failed run must not touch).
"""

# Chinese conversation text uses fullwidth punctuation on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memkeeper import MemoryStore
from memkeeper.clock import to_db
from memkeeper.config import Config
from memkeeper.storage.transaction import immediate_transaction


@dataclass
class Reply:
    """One scripted HTTP answer. ``delay`` seconds pass before it is sent."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


def completion(
    summary: str | None = None,
    *,
    content: str | None = None,
    finish_reason: str = "stop",
    prompt_tokens: int = 120,
    completion_tokens: int = 30,
    model: str = "glm-4.7-flash",
    delay: float = 0.0,
) -> Reply:
    """A chat completion whose answer is ``{"summary": summary}`` (or raw ``content``)."""
    text = content if content is not None else json.dumps({"summary": summary}, ensure_ascii=False)
    body = {
        "id": "chatcmpl-fake",
        "created": 1767258000,
        "model": model,
        "request_id": "fake",
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason,
                "message": {"role": "assistant", "content": text},
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return Reply(body=json.dumps(body, ensure_ascii=False).encode(), delay=delay)


def error(status: int, message: str = "fake error", *, delay: float = 0.0) -> Reply:
    """An error answer in the provider's JSON shape."""
    body = json.dumps({"error": {"code": str(status), "message": message}}).encode()
    return Reply(status=status, body=body, delay=delay)


def raw(text: str, content_type: str = "text/html") -> Reply:
    """A 200 answer whose body is not a chat completion."""
    return Reply(body=text.encode(), content_type=content_type)


@dataclass
class Recorded:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def system(self) -> str:
        return next(m["content"] for m in self.body["messages"] if m["role"] == "system")

    @property
    def user(self) -> str:
        return next(m["content"] for m in self.body["messages"] if m["role"] == "user")

    @property
    def kind(self) -> str:
        """update (one call), segment (part of a long history) or fold."""
        if "<partial_summary>" in self.user:
            return "fold"
        return "segment" if " of one long conversation" in self.system else "update"


def default_summary(request: Recorded) -> Reply:
    """A plausible answer: names the message ids and summaries it was given."""
    ids = [int(n) for n in re.findall(r"^\[#(\d+) ", request.user, re.M)]
    parts = len(re.findall(r"<(?:partial|previous)_summary>", request.user))
    if ids:
        text = f"Summary of messages #{min(ids)}-#{max(ids)} ({len(ids)} entries)"
    else:
        text = f"Merged summary of {parts} parts"
    if "<previous_summary>" in request.user:
        text += ", folding in the previous summary"
    return completion(text + ".")


Responder = Callable[[Recorded], Reply]


class FakeLLM:
    """The fake server. Use as a context manager, or call :meth:`close`."""

    def __init__(self, responder: Responder = default_summary, *, delay: float = 0.0) -> None:
        self.responder = responder
        self.delay = delay
        self.requests: list[Recorded] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/api/paas/v4"

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order (then the responder)."""
        with self._lock:
            self._queue.extend(replies)

    def reply_for(self, request: Recorded) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self.responder(request)

    def wait(self, seconds: float) -> None:
        """Sleep that ends early when the server closes (so no thread outlives a test)."""
        if seconds > 0:
            self._release.wait(seconds)

    def close(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLM:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: tests read ``fake.requests`` instead."""

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw_body = self.rfile.read(length)
                try:
                    body = json.loads(raw_body or b"{}")
                except ValueError:
                    body = {"unparsed": raw_body.decode("utf-8", "replace")}
                request = Recorded(self.path, dict(self.headers.items()), body)
                with fake._lock:
                    fake.requests.append(request)
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    reply = fake.reply_for(request)
                    fake.wait(fake.delay + reply.delay)
                    with contextlib.suppress(OSError):
                        self.send_response(reply.status)
                        self.send_header("Content-Type", reply.content_type)
                        self.send_header("Content-Length", str(len(reply.body)))
                        for name, value in reply.headers.items():
                            self.send_header(name, value)
                        self.end_headers()
                        self.wfile.write(reply.body)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

        return Handler


# -- helpers for the summarizer's tests -------------------------------------------------------


def summarize_config(url: str, *, job: dict[str, Any] | None = None, **llm: Any) -> Config:
    """A config whose LLM is the fake at ``url``, with short timeouts and backoff."""
    section: dict[str, Any] = {
        "base_url": url,
        "timeout_seconds": 2.0,
        "max_retries": 2,
        "retry_backoff_seconds": 0.01,
    }
    section.update(llm)
    return Config.model_validate({"jobs": {"summarize": job or {}}, "llm": section})


def add_session(
    store: MemoryStore,
    session_id: str,
    count: int,
    *,
    user_id: str = "u1",
    namespace: str = "",
    start: datetime,
    text: Callable[[int], str] = lambda i: f"第{i}条消息：张三说周五前交付，预算{i * 100}元。",
) -> list[int]:
    """Append ``count`` messages to a session in one transaction; returns their ids."""
    rows = [
        (
            user_id,
            namespace,
            session_id,
            "user" if i % 2 == 0 else "assistant",
            text(i),
            to_db(start + timedelta(seconds=i)),
        )
        for i in range(count)
    ]
    storage = store.storage
    with storage.lock, immediate_transaction(storage.hot):
        first = storage.hot.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
        storage.hot.conn.executemany(
            "INSERT INTO messages (user_id, namespace, session_id, role, content, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
    return list(range(first + 1, first + count + 1))


def snapshot(store: MemoryStore) -> dict[str, list[dict[str, Any]]]:
    """Every memory, message and change-log row (what a failed session must leave alone).

    Left out: the rows that count a session's refusals toward parking it (actions
    ``session_failed``, ``park``), which are about the session, not its memory
    (tests/test_parking.py checks them).
    """
    where = {"changes": " WHERE action NOT IN ('session_failed', 'park')"}
    with store.storage.lock:
        return {
            table: [
                dict(row)
                for row in store.storage.hot.query(
                    f"SELECT * FROM {table}{where.get(table, '')} ORDER BY 1"
                )
            ]
            for table in ("memories", "messages", "changes")
        }
