"""The smoke version of ``memkeeper bench --ui``: a small generated memory, one pass, every
page timed once through the app as ``memkeeper ui`` starts it (the full size runs outside the
suite: 1,000,000 memories)."""

from __future__ import annotations

from memkeeper.bench.ui_pages import measure_ui, ui_table


def test_the_ui_bench_times_every_page_of_a_small_memory() -> None:
    found = measure_ui(memories=2_000, users=40, seed=1)
    pages = found["pages"]
    assert found["pass"]["changes"] > 0
    assert {"overview", "undo preview (the biggest run)", "forget (a user's preview)"} <= set(pages)
    assert all(page["status"] == 200 for page in pages.values()), pages
    assert found["start_ms"] > 0
    table = ui_table(found)
    assert "start (the overview's first figures, before serving)" in table
    assert "undo preview (the biggest run)" in table
