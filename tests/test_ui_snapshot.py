"""The overview's figures: exact at every request while they are quick to compute; on a
large memory served at once from the last ones while the next are computed in the
background, and marked stale by a write."""

from __future__ import annotations

import time

from memkeeper.ui import snapshot
from memkeeper.ui.snapshot import Snapshot


def counter(pause: float):
    calls = {"n": 0}

    def compute() -> dict[str, int]:
        time.sleep(pause)
        calls["n"] += 1
        return {"n": calls["n"]}

    return compute, calls


def wait_for(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_quick_figures_are_computed_at_every_request() -> None:
    compute, calls = counter(0.0)
    figures = Snapshot(compute)
    assert figures.get() == ({"n": 1}, 0.0)
    assert figures.get() == ({"n": 2}, 0.0)
    assert calls["n"] == 2


def test_slow_figures_are_served_while_the_next_are_computed(monkeypatch) -> None:
    monkeypatch.setattr(snapshot, "FRESH_MS", 20.0)
    compute, calls = counter(0.2)
    figures = Snapshot(compute, max_age=0.5)
    assert figures.get() == ({"n": 1}, 0.0)  # the first request waits for them
    began = time.perf_counter()
    data, age = figures.get()
    assert data == {"n": 1} and age > 0 and time.perf_counter() - began < 0.1
    assert calls["n"] == 1  # young enough: no refresh
    time.sleep(0.6)
    data, _ = figures.get()  # old: served, and one refresh starts
    assert data == {"n": 1}
    figures.get()
    wait_for(lambda: figures.get()[0] == {"n": 2})
    assert calls["n"] == 2
    figures.mark_stale()  # a write: the next request starts a refresh at once
    assert figures.get()[0] == {"n": 2}
    wait_for(lambda: figures.get()[0] == {"n": 3})


def test_the_server_computes_the_first_figures_before_it_serves(monkeypatch, tmp_path) -> None:
    """``memkeeper ui`` warms the overview as it starts: on a large memory its first visitor
    is answered from figures already there, not kept waiting for them."""
    from memkeeper import MemoryStore
    from memkeeper.ui import app, reads
    from memkeeper.ui.security import UiPlan

    monkeypatch.setattr(snapshot, "FRESH_MS", 0.0)  # every memory counts as large here
    computed: list[int] = []
    real = reads.overview
    monkeypatch.setattr(reads, "overview", lambda store: computed.append(1) or real(store))
    with MemoryStore(tmp_path / "memory.db") as store:
        store.remember("ann", "city", "Oslo")
        app.build_app(store, UiPlan(port=0))
        assert computed == []  # a test's app computes on demand
        server = app.UiServer(store, UiPlan(port=0))
        assert computed == [1]  # the server's, before anything was asked
        with app_client(server.app) as web:
            assert web.get("/", params={"format": "json"}).status_code == 200
        assert computed == [1]  # the first request was answered from them


def app_client(web_app):
    from starlette.testclient import TestClient

    return TestClient(web_app, base_url="http://127.0.0.1:8766")
