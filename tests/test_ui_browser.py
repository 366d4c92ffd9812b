"""``memkeeper ui`` in a real browser (Debian's Chromium, headless, driven by Playwright) on a
year of the demo, both backends: the figures on the pages are the CLI's, and the buttons do
what the CLI's twins do.

Each page is photographed. With ``UPDATE_UI_SCREENSHOTS=1`` the pictures go to
docs/images/ui/ (the documentation shows them: refresh them so); otherwise to the test's
temporary directory, so a run of the suite leaves the checkout as it was.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_ui_support import (
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
from memkeeper.ui.app import UiServer
from memkeeper.ui.security import UiPlan, plan

CHROMIUM = Path("/usr/bin/chromium")
playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.both_backends,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed"),
]
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images" / "ui"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_database(tmp_path_factory.mktemp("ui-demo-base"))


@pytest.fixture
def db(demo: Path, tmp_path: Path, db_path: Any, backend: str) -> str:
    return fresh_copy(demo, tmp_path, db_path, backend)


@pytest.fixture
def serve(db: str) -> Iterator[Any]:
    """``serve(**plan)``: a ``memkeeper ui --now NOW`` on the test's database; its URL."""
    running: list[tuple[UiServer, Any]] = []

    def start(how: UiPlan | None = None) -> str:
        store = ui_store(db)
        server = UiServer(store, how or UiPlan(port=0, allow_writes=True, pretend_now=True))
        server.start()
        running.append((server, store))
        return server.url.rstrip("/")

    yield start
    for server, store in running:
        server.stop()
        store.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context.new_page()
    context.close()


@pytest.fixture
def shoot(tmp_path: Path, backend: str) -> Any:
    """``shoot(page, name)``: a full-page picture of the page (SQLite's run only)."""

    def take(page: Any, name: str) -> None:
        if backend != "sqlite":
            return
        folder = IMAGES if os.environ.get("UPDATE_UI_SCREENSHOTS") else tmp_path / "images"
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / f"{name}.png"), full_page=True)

    return take


def figure(page: Any, name: str) -> str:
    return page.locator(f'[data-figure="{name}"]').first.inner_text()


def test_the_overview_shows_status_figures(
    db: str, serve: Any, page: Any, shoot: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    base = serve()
    page.goto(base + "/")
    status = cli_json(capsys, db, "status")
    for state, kinds in status["counts"].items():
        for kind, count in kinds.items():
            assert figure(page, f"{state}.{kind}") == str(count)
        assert figure(page, f"{state}.total") == str(sum(kinds.values()))
    assert figure(page, "episodes") == str(status["episodes"])
    assert figure(page, "messages") == str(status["messages"]["total"])
    for job in status["jobs"]:
        if job["last_run"]:
            shown = page.locator(f'[data-job-status="{job["job"]}"]').inner_text()
            assert shown == job["last_run"]["status"]
    assert page.locator("svg.chart rect").count() > 10
    shoot(page, "overview")


def test_a_runs_page_lists_the_changes_of_log_run(
    db: str, serve: Any, page: Any, shoot: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    base = serve()
    page.goto(base + "/runs?job=prune")
    shoot(page, "runs")
    pruned = [
        c
        for c in cli_json(capsys, db, "log", "--action", "retire", "--limit", "1000")
        if c["actor"] == "job:prune"
    ]
    run_id = pruned[-1]["run_id"]
    page.locator(f'[data-run="{run_id}"]').click()
    logged = cli_json(capsys, db, "log", "--run", run_id, "--limit", "1000000")
    shown = [
        int(x)
        for x in page.locator("[data-change]").evaluate_all(
            "nodes => nodes.map(n => n.dataset.change)"
        )
    ]
    assert shown == [change["id"] for change in logged]
    shoot(page, "run")


def test_undo_from_the_page_equals_memkeeper_undo(
    db: str,
    demo: Path,
    serve: Any,
    page: Any,
    shoot: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = serve()
    runs = [
        r
        for r in cli_json(capsys, db, "log", "--action", "retire", "--limit", "1000")
        if r["actor"] == "job:prune"
    ]
    run_id = runs[-1]["run_id"]
    page.goto(f"{base}/runs/{run_id}")
    page.get_by_text("Undo this run… (preview first)").click()
    preview = cli_json(capsys, db, "undo", run_id, "--dry-run")
    assert figure(page, "reverted") == str(len(preview["reverted"]))
    shoot(page, "undo-preview")
    page.locator("#confirm-undo").click()
    page.wait_for_selector("text=the undo's own run")
    twin = twin_of(demo, tmp_path)
    assert main(["--db", twin, "--now", NOW, "undo", run_id, "--yes"]) == 0
    assert memories_of(capsys, twin) == memories_of(capsys, db)


@pytest.mark.parametrize(
    ("button", "command"), [("keep", ["review", "keep"]), ("let go", ["review", "drop"])]
)
def test_review_buttons_equal_their_cli_twins(
    db: str,
    demo: Path,
    serve: Any,
    page: Any,
    shoot: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    button: str,
    command: list[str],
) -> None:
    base = serve()
    page.goto(base + "/review")
    shoot(page, "review")
    boxes = page.locator('input[name="id"]')
    ids = [boxes.nth(i).get_attribute("value") for i in range(min(2, boxes.count()))]
    assert ids
    for index in range(len(ids)):
        boxes.nth(index).check()
    page.locator(f'[id="review-{button}"]').click()
    page.wait_for_selector('[data-figure="done"]')
    assert figure(page, "done").endswith(str(len(ids)))
    twin = twin_of(demo, tmp_path)
    assert main(["--db", twin, "--now", NOW, *command, *ids, "--yes"]) == 0
    assert memories_of(capsys, twin) == memories_of(capsys, db)


def test_forget_previews_then_erases_as_forget(
    db: str,
    demo: Path,
    serve: Any,
    page: Any,
    shoot: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = serve()
    facts = [m for m in cli_json(capsys, db, "list", "-u", "xiaoming") if m["kind"] == "fact"]
    target = facts[0]
    page.goto(base + "/forget")
    page.fill('input[name="user"]', "xiaoming")
    page.fill('input[name="namespace"]', target["namespace"])
    page.fill('input[name="key"]', target["key"])
    page.locator("#forget-form button").click()
    reached = [
        m
        for m in cli_json(capsys, db, "list", "-u", "xiaoming")
        if m["key"] == target["key"] and m["namespace"] == target["namespace"]
    ]
    assert figure(page, "memories") == str(len(reached))
    shoot(page, "forget")
    page.locator("#confirm-forget").click()
    page.wait_for_selector('[data-figure="erased"]')
    twin = twin_of(demo, tmp_path)
    args = ["forget", "xiaoming", target["key"], "-n", target["namespace"], "--yes"]
    assert main(["--db", twin, "--now", NOW, *args]) == 0
    assert memories_of(capsys, twin) == memories_of(capsys, db)
    assert "erased every value of one key" in page.content()


def test_users_memories_and_a_memorys_life(
    db: str, serve: Any, page: Any, shoot: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    base = serve()
    page.goto(base + "/users")
    shoot(page, "users")
    page.locator('[data-user="lin"]').click()
    listed = cli_json(capsys, db, "list", "-u", "lin")
    assert f"Memories ({len(listed)})" in page.content()
    shoot(page, "user")
    page.fill('input[name="q"]', "book")
    page.locator('form[action="/users/lin"] button').click()
    mode = page.locator("[data-search-mode]").inner_text()
    assert mode in ("keyword-only", "by meaning and keywords")
    shoot(page, "search")
    changed = [
        c
        for c in cli_json(capsys, db, "log", "-u", "lin", "--limit", "1000")
        if c["memory_id"] and c["action"] == "retire"
    ]
    memory_id = changed[-1]["memory_id"]
    page.goto(f"{base}/memories/{memory_id}")
    explained = cli_json(capsys, db, "explain", memory_id)
    assert page.locator("pre.explain").inner_text().strip() == explained["text"].strip()
    actions = page.locator(".timeline li").evaluate_all("n => n.map(x => x.dataset.action)")
    assert [c["action"] for c in explained["changes"]] == [a for a in actions if a != "recall"]
    shoot(page, "memory")


def test_a_users_token_cannot_see_another_users_pages(
    db: str, serve: Any, page: Any, tmp_path: Path, shoot: Any
) -> None:
    tokens = write_token_file(tmp_path / "tokens.toml")
    config = Config.model_validate({"mcp": {"token_file": str(tokens)}})
    how = plan(config, host="127.0.0.1", port=0, auth=True)
    base = serve(how)
    page.goto(base + "/users/xiaoming")
    assert page.url.endswith("/login")
    shoot(page, "login")
    page.fill('input[name="token"]', LIN_TOKEN)
    page.get_by_role("button", name="Sign in").click()
    assert page.url.endswith("/users/lin")
    answer = page.goto(base + "/users/xiaoming")
    assert answer.status == 403
    assert page.goto(base + "/runs").status == 403
    assert page.goto(base + "/users/lin").status == 200
