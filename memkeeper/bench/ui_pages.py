"""``memkeeper bench --ui``: how long each page of ``memkeeper ui`` takes on a large memory.

A database of the bench's generator (1,000,000 memories over 10,000 users by default) gets
one maintenance pass (settle, expire, demote, prune: about a tenth of the memories change,
so the change log holds that many rows), then every page is asked for through the app in
process (Starlette's test client: no network, the time is the server's), a few times each,
as an admin on a read-only server. Reported: each page's median and slowest time against
the 300 ms target, with the page's size in bytes.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memkeeper.bench.generate import NOW, generate
from memkeeper.clock import fixed
from memkeeper.config import Config
from memkeeper.maintenance.runner import run_once
from memkeeper.store import MemoryStore

TARGET_MS = 300.0
TIMES = 5


def _pages(store: MemoryStore, run_ids: list[str]) -> dict[str, str]:
    """The pages to time, each by a name: the first of each kind of page."""
    runs = store.job_runs(limit=50)
    biggest = max(
        (r for r in runs if r.run_id in run_ids),
        key=lambda r: sum((r.counts.get("changes") or {}).values()),
    )
    some = store.changes(run_id=biggest.run_id, limit=1)
    user = some[0].user_id if some else "user-0"
    memory = some[0].memory_id if some else ""
    return {
        "overview": "/",
        "runs": "/runs",
        "runs, page 2": "/runs?page=2",
        "a run (its biggest)": f"/runs/{biggest.run_id}",
        "a run, last page": f"/runs/{biggest.run_id}?page=1000000",
        "undo preview (the biggest run)": f"/runs/{biggest.run_id}/undo",
        "users": "/users",
        "a user's memories": f"/users/{user}",
        "a user's memories, cold only": f"/users/{user}?state=cold",
        "a memory": f"/memories/{memory}",
        "review": "/review",
        "review, last page": "/review?page=1000000",
        "forget (a user's preview)": f"/forget?user={user}",
    }


def measure_pages(db: Path, say: Callable[[str], None], times: int = TIMES) -> dict[str, Any]:
    """Start the app as ``memkeeper ui`` does (its start time, ``start_ms``: the overview's
    first figures), then time each page ``times`` times."""
    from starlette.testclient import TestClient

    from memkeeper.ui.app import build_app
    from memkeeper.ui.security import UiPlan

    store = MemoryStore(db, config=Config(), clock=fixed(NOW), create=False)
    try:
        run_ids = [r.run_id for r in store.job_runs(limit=50)]
        say("start: the overview's first figures")
        began = time.perf_counter()
        app = build_app(store, UiPlan(port=8766), warm=True)  # as memkeeper ui starts
        found: dict[str, Any] = {"start_ms": round((time.perf_counter() - began) * 1000, 1)}
        client = TestClient(app, base_url="http://127.0.0.1:8766")
        for name, path in _pages(store, run_ids).items():
            say(f"page: {name}")
            spent, size, status = [], 0, 0
            for _ in range(times):
                began = time.perf_counter()
                answer = client.get(path)
                spent.append((time.perf_counter() - began) * 1000)
                size, status = len(answer.content), answer.status_code
            found[name] = {
                "path": path.split("?")[0] if "/users/" in path else path,
                "status": status,
                "median_ms": round(statistics.median(spent), 1),
                "max_ms": round(max(spent), 1),
                "bytes": size,
                "under_target": max(spent) < TARGET_MS,
            }
        return found
    finally:
        store.close()


def measure_ui(
    *, memories: int, users: int, seed: int, say: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """Generate, run one pass, and time every page; the figures as a JSON-ready dict."""
    config = Config()
    with tempfile.TemporaryDirectory(prefix="memkeeper-bench-ui-") as root:
        db = Path(root) / "memkeeper.db"
        say(f"generating {memories:,} memories over {users:,} users")
        generate(db, config, memories=memories, users=users, seed=seed)
        say("one maintenance pass (settle, expire, demote, prune)")
        began = time.perf_counter()
        with MemoryStore(db, config=config, clock=fixed(NOW)) as store:
            report = run_once(store, ["settle", "expire", "demote", "prune"], now=NOW)
            changes = sum(result.total_changes for result in report.results)
        pass_seconds = time.perf_counter() - began
        pages = measure_pages(db, say)
        start_ms = pages.pop("start_ms")
    return {
        "parameters": {"memories": memories, "users": users, "seed": seed, "times": TIMES},
        "pass": {"changes": changes, "seconds": round(pass_seconds, 1)},
        "target_ms": TARGET_MS,
        "start_ms": start_ms,
        "pages": pages,
        "all_under_target": all(page["under_target"] for page in pages.values()),
    }


def ui_table(figures: dict[str, Any]) -> str:
    lines = [
        f"memkeeper ui pages on {figures['parameters']['memories']:,} memories over "
        f"{figures['parameters']['users']:,} users, after a pass of "
        f"{figures['pass']['changes']:,} changes (median and slowest of "
        f"{figures['parameters']['times']}; target {figures['target_ms']:.0f} ms)",
    ]
    lines.append(
        f"  start (the overview's first figures, before serving) {figures['start_ms']:.1f} ms"
    )
    for name, page in figures["pages"].items():
        mark = "ok" if page["under_target"] else "SLOW"
        lines.append(
            f"  {name:<34} {page['median_ms']:>8.1f} ms  {page['max_ms']:>8.1f} ms  "
            f"{page['bytes']:>9,} B  {page['status']}  {mark}"
        )
    return "\n".join(lines)
