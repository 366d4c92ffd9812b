"""``memkeeper ui`` over HTTP (Starlette's test client) on a year of the demo, both backends:
the pages say what the CLI says, their writes do what the CLI's twins do, and the safety
rules hold (tokens, a user's token seeing only its user, CSRF, Host, Origin, read-only)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from test_ui_support import (
    ADMIN_TOKEN,
    LIN_TOKEN,
    NOW,
    cli_json,
    demo_database,
    fresh_copy,
    memories_of,
    twin_of,
    ui_store,
    write_token_file,
)

from memkeeper.cli import main
from memkeeper.config import Config
from memkeeper.errors import ConfigError
from memkeeper.ui.app import build_app
from memkeeper.ui.security import UiPlan, plan

pytestmark = [pytest.mark.both_backends]
BASE = "http://127.0.0.1:8766"


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_database(tmp_path_factory.mktemp("ui-demo-base"))


@pytest.fixture
def db(demo: Path, tmp_path: Path, db_path: Any, backend: str) -> str:
    return fresh_copy(demo, tmp_path, db_path, backend)


@pytest.fixture
def open_stores() -> Iterator[list[Any]]:
    stores: list[Any] = []
    yield stores
    for store in stores:
        store.close()


def client(db: str, stores: list[Any], **how: Any) -> TestClient:
    store = ui_store(db)
    stores.append(store)
    return TestClient(build_app(store, UiPlan(port=8766, **how)), base_url=BASE)


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


def a_run_with_changes(web: TestClient, job: str) -> str:
    runs = web.get("/runs", params={"job": job, "format": "json"}).json()["runs"]
    return next(r["run_id"] for r in runs if r["counts"].get("changes"))


def test_the_overview_says_what_status_says(
    db: str, open_stores: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    web = client(db, open_stores)
    page = web.get("/", params={"format": "json"}).json()
    status = cli_json(capsys, db, "status")
    for key in ("counts", "messages", "episodes", "jobs", "last_runs", "warnings", "search"):
        assert page[key] == status[key], key
    assert page["files"]["hot"]["bytes"] == status["files"]["hot"]["bytes"]
    html = web.get("/").text
    for state, kinds in status["counts"].items():
        for kind, count in kinds.items():
            assert f'data-figure="{state}.{kind}">{count}<' in html
    assert "<svg" in html and "http" not in re.sub(r'xmlns="http://www.w3.org/2000/svg"', "", html)
    series = page["chart"]["series"]
    assert len(page["chart"]["days"]) == 90 and sum(series["pruned"].values()) > 0
    # The memory's growth: the entries created in the last 30 days, as the change log says.
    since = page["chart"]["days"][-30]
    created = [
        c for c in cli_json(capsys, db, "log", "--limit", "1000000") if c["action"] == "create"
    ]
    grown = sum(1 for c in created if c["at"][:10] >= since)
    assert f'data-figure="created_30_days">{grown}<' in html


def test_a_runs_page_lists_the_changes_log_run_lists(
    db: str, open_stores: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    web = client(db, open_stores)
    run_id = a_run_with_changes(web, "prune")
    page = web.get(f"/runs/{run_id}", params={"format": "json"}).json()
    logged = cli_json(capsys, db, "log", "--run", run_id, "--limit", "1000000")
    assert page["changes"] == logged and logged
    html = web.get(f"/runs/{run_id}").text
    for change in logged:
        assert f'data-change="{change["id"]}"' in html
    listing = web.get("/runs").text
    assert 'rel="next"' in listing and "page 1 of" in listing
    assert web.get("/runs", params={"page": "2"}).status_code == 200


def test_undo_from_the_page_equals_memkeeper_undo(
    db: str,
    demo: Path,
    open_stores: list[Any],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    web = client(db, open_stores, allow_writes=True)
    run_id = a_run_with_changes(web, "prune")
    twin = twin_of(demo, tmp_path)
    preview = web.get(f"/runs/{run_id}/undo")
    cli_preview = cli_json(capsys, db, "undo", run_id, "--dry-run")
    assert f'data-figure="reverted">{len(cli_preview["reverted"])}<' in preview.text
    before = memories_of(capsys, db)
    answer = web.post(
        f"/runs/{run_id}/undo", data={"csrf": csrf_of(preview.text), "confirm": "yes"}
    )
    assert answer.status_code == 200, answer.text
    after_page = memories_of(capsys, db)
    assert after_page != before
    assert main(["--db", twin, "--now", NOW, "undo", run_id, "--yes"]) == 0
    assert memories_of(capsys, twin) == after_page


def test_a_large_runs_undo_preview_judges_a_page_at_a_time_as_the_whole_dry_run_does(
    db: str,
    demo: Path,
    tmp_path: Path,
    open_stores: list[Any],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past one page of changes the preview judges the page it shows (its cost follows the
    page, not the run); page by page, the judgements are the whole dry run's."""
    from collections import Counter

    from memkeeper.ui import pages_runs

    web = client(db, open_stores, allow_writes=True)
    twin = ui_store(twin_of(demo, tmp_path))  # the same runs, read on SQLite
    open_stores.append(twin)
    by_run = Counter(c.run_id for c in twin.changes(limit=100_000) if c.run_id)
    run_id, total = by_run.most_common(1)[0]
    assert total >= 3, "the demo's year has a run of several changes"
    monkeypatch.setattr(pages_runs, "CHANGES_PER_PAGE", 2)
    whole = cli_json(capsys, db, "undo", run_id, "--dry-run")
    found: dict[str, list[Any]] = {"reverted": [], "already_undone": [], "conflicts": []}
    pages = -(-total // 2)
    for page in range(1, pages + 1):
        answer = web.get(f"/runs/{run_id}/undo", params={"page": page, "format": "json"})
        judged = answer.json()
        assert (judged["total"], judged["page"]) == (total, page)
        assert judged["judged"] == min(2, total - 2 * (page - 1))
        found["reverted"] += judged["reverted"]
        found["already_undone"] += judged["already_undone"]
        found["conflicts"] += sorted(judged["conflicts"])
    assert sorted(found["reverted"]) == sorted(whole["reverted"])
    assert sorted(found["already_undone"]) == sorted(whole["already_undone"])
    assert sorted(found["conflicts"]) == sorted(whole["conflicts"])
    page_one = web.get(f"/runs/{run_id}/undo")
    assert "this page judges changes 1 to 2" in page_one.text
    assert 'id="confirm-undo"' in page_one.text  # the apply is offered for the whole run


@pytest.mark.parametrize("action", ["keep", "let go", "forget"])
def test_review_actions_equal_their_cli_twins(
    db: str,
    demo: Path,
    open_stores: list[Any],
    capsys: pytest.CaptureFixture[str],
    action: str,
    tmp_path: Path,
) -> None:
    web = client(db, open_stores, allow_writes=True)
    page = web.get("/review")
    pending = cli_json(capsys, db, "review", "list")
    ids = [memory["id"] for memory in pending][:2]
    assert ids
    answer = web.post("/review", data={"csrf": csrf_of(page.text), "action": action, "id": ids})
    assert answer.status_code == 200, answer.text
    by_page = {m["id"]: m for m in memories_of(capsys, db)}
    for memory_id in ids:
        if action == "keep":
            assert by_page[memory_id]["state"] == "active"
        elif action == "let go":
            assert by_page[memory_id]["state"] == "cold"
            assert by_page[memory_id]["cold_reason"] == "dropped"
        else:
            assert memory_id not in by_page
    fresh = twin_of(demo, tmp_path)
    command = {"keep": ["review", "keep"], "let go": ["review", "drop"], "forget": ["forget-id"]}
    for memory_id in ids if action == "forget" else [None]:
        args = [*command[action], *([memory_id] if memory_id else ids)]
        assert main(["--db", fresh, "--now", NOW, *args, "--yes"]) == 0
    assert memories_of(capsys, fresh) == memories_of(capsys, db)


def test_forget_previews_then_erases_as_forget_namespace(
    db: str, open_stores: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    web = client(db, open_stores, allow_writes=True)
    users = cli_json(capsys, db, "list")
    namespace = next(m["namespace"] for m in users if m["user_id"] == "lin" and m["namespace"])
    ids = sorted(m["id"] for m in users if m["user_id"] == "lin" and m["namespace"] == namespace)
    preview = web.get("/forget", params={"user": "lin", "namespace": namespace})
    assert f'data-figure="memories">{len(ids)}<' in preview.text
    shown = web.get(
        "/forget", params={"user": "lin", "namespace": namespace, "format": "json"}
    ).json()["preview"]
    assert sorted(i for found in shown["by_kind"].values() for i in found) == ids
    answer = web.post(
        "/forget",
        data={
            "csrf": csrf_of(preview.text),
            "user": "lin",
            "namespace": namespace,
            "key": "",
            "confirm": "yes",
        },
    )
    assert answer.status_code == 200, answer.text
    left = [m for m in memories_of(capsys, db) if m["user_id"] == "lin"]
    assert all(m["namespace"] != namespace for m in left)
    erasures = web.get("/forget", params={"format": "json"}).json()["erasures"]
    assert erasures[0]["actor"] == "ui:forget_namespace"
    assert erasures[0]["erased"]["memories"] == len(ids)
    assert shown["messages"] == erasures[0]["erased"]["messages"]
    assert "erased one namespace" in web.get("/forget").text


def test_a_users_token_sees_only_that_users_pages(
    db: str, open_stores: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = write_token_file(tmp_path / "tokens.toml")
    config = Config.model_validate({"mcp": {"token_file": str(tokens)}})
    how = plan(config, host="127.0.0.1", port=8766, auth=True)
    store = ui_store(db)
    open_stores.append(store)
    web = TestClient(build_app(store, how), base_url=BASE)
    lin = {"Authorization": f"Bearer {LIN_TOKEN}"}
    own = web.get("/users/lin", headers=lin)
    assert own.status_code == 200
    assert 'href="/users/lin"' in own.text and 'href="/runs"' not in own.text
    assert web.get("/users/xiaoming", headers=lin).status_code == 403
    for path in ("/runs", "/users", "/forget", "/"):
        assert web.get(path, headers=lin, follow_redirects=False).status_code in (303, 403)
    others = [m for m in cli_json(capsys, db, "list") if m["user_id"] != "lin"]
    assert web.get(f"/memories/{others[0]['id']}", headers=lin).status_code == 403
    review = web.get("/review", headers=lin, params={"format": "json"}).json()
    assert {m["user_id"] for m in review} <= {"lin"}
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    assert web.get("/users/xiaoming", headers=admin).status_code == 200
    # No token, a wrong one: a browser is sent to sign in, a script gets 401.
    assert web.get("/", follow_redirects=False).headers["location"] == "/login"
    assert web.get("/", params={"format": "json"}).status_code == 401
    assert (
        web.get(
            "/", headers={"Authorization": "Bearer wrong-token-xxxxxxxxxx"}, follow_redirects=False
        ).status_code
        == 303
    )
    # Signing in: a cookie session, HttpOnly and SameSite=Strict.
    answer = web.post("/login", data={"token": LIN_TOKEN}, follow_redirects=False)
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"]
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    assert LIN_TOKEN not in cookie
    assert web.get("/users/lin").status_code == 200
    assert web.get("/users/xiaoming").status_code == 403
    assert web.post("/login", data={"token": "not-a-token-at-all"}).status_code == 401


def test_tokens_are_required_off_the_loopback(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs tokens"):
        plan(Config(), host="0.0.0.0", auth=False)
    with pytest.raises(ConfigError, match="token file"):
        plan(Config(), host="192.0.2.1")
    tokens = write_token_file(tmp_path / "tokens.toml")
    config = Config.model_validate({"mcp": {"token_file": str(tokens)}})
    assert plan(config, host="192.0.2.1").tokens is not None
    assert plan(Config()).tokens is None
    tokens.chmod(0o644)
    with pytest.raises(ConfigError, match="mode"):
        plan(config, host="192.0.2.1")


@pytest.mark.sqlite_only  # the web layer's rules: the same on both backends
def test_host_origin_csrf_and_read_only(db: str, open_stores: list[Any]) -> None:
    read_only = client(db, open_stores)
    assert read_only.get("/", headers={"Host": "evil.example:8766"}).status_code == 421
    assert read_only.get("/", headers={"Host": "localhost:8766"}).status_code == 200
    assert read_only.get("/", headers={"Origin": "http://evil.example"}).status_code == 403
    page = read_only.get("/review")
    assert 'name="csrf"' not in page.text and "Read-only" in page.text
    assert read_only.post("/review", data={"action": "keep", "id": "x"}).status_code == 403
    writes = client(db, open_stores, allow_writes=True)
    page = writes.get("/review")
    token = csrf_of(page.text)
    pending = re.findall(r'name="id" value="([^"]+)"', page.text)
    wrong = token[:-1] + ("1" if token.endswith("0") else "0")
    for data in ({}, {"csrf": "0" * 64}, {"csrf": wrong}):
        answer = writes.post("/review", data={**data, "action": "keep", "id": pending[0]})
        assert answer.status_code == 403 and "CSRF" in answer.text
    evil = writes.post(
        "/review",
        data={"csrf": token, "action": "keep", "id": pending[0]},
        headers={"Origin": "http://evil.example"},
    )
    assert evil.status_code == 403
    good = writes.post(
        "/review",
        data={"csrf": token, "action": "keep", "id": pending[0]},
        headers={"Origin": BASE},
    )
    assert good.status_code == 200
    assert good.headers["content-security-policy"].startswith("default-src 'none'")


@pytest.mark.sqlite_only  # the web layer's rules: the same on both backends
def test_values_never_reach_the_logs_and_secrets_never_a_page(
    db: str, open_stores: list[Any], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG, logger="memkeeper")
    web = client(db, open_stores, allow_writes=True)
    memory = web.get("/users/lin", params={"format": "json"}).json()["memories"][0]
    web.get("/users/lin", params={"q": memory["value"][:12]})
    web.get(f"/memories/{memory['id']}")
    web.get("/forget", params={"user": "lin", "key": memory["key"] or "x"})
    page = web.get("/review")
    logged = "\n".join(record.getMessage() + str(record.__dict__) for record in caplog.records)
    assert memory["value"] not in logged
    assert memory["value"][:12] not in logged
    assert csrf_of(page.text) not in logged
    tokens = write_token_file(tmp_path / "tokens.toml")
    config = Config.model_validate({"mcp": {"token_file": str(tokens)}})
    store = ui_store(db)
    open_stores.append(store)
    secured = TestClient(build_app(store, plan(config, auth=True)), base_url=BASE)
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    for path in ("/", "/runs", "/users", "/forget", "/review"):
        text = secured.get(path, headers=admin).text
        assert ADMIN_TOKEN not in text and LIN_TOKEN not in text and str(tokens) not in text
