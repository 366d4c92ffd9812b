"""Every maintenance rule, and every agent call, finds its rows through an index, never by
scanning a table.

The test records every statement the jobs run (SQLite's trace callback shows them with their
parameters bound), asks SQLite for each SELECT's query plan, and fails on a full scan of a
table or of a whole (non-partial) index.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime, timedelta

from freezegun import freeze_time

from memkeeper import MemoryStore
from memkeeper.config import Config
from memkeeper.maintenance.runner import run_once

PARTIAL_INDEXES = {"memories_ttl_override", "messages_unsummarized", "messages_summarized_at"}
TABLES = ("memories", "messages", "cold_memories")


def _plans(conn: sqlite3.Connection, statements: list[str]) -> list[tuple[str, str]]:
    plans = []
    for sql in statements:
        if not sql.lstrip().upper().startswith("SELECT"):
            continue
        if not any(re.search(rf"\b{table}\b", sql) for table in TABLES):
            continue
        for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"):
            plans.append((sql, row[3]))
    return plans


def _full_scans(plans: list[tuple[str, str]]) -> list[tuple[str, str]]:
    bad = []
    for sql, detail in plans:
        match = re.match(r"SCAN (\w+)(?: USING (?:COVERING )?INDEX (\w+))?", detail)
        if not match or match.group(1) not in TABLES:
            continue
        if match.group(2) not in PARTIAL_INDEXES:
            bad.append((sql, detail))
    return bad


def test_jobs_and_agent_calls_select_through_indexes(db_path) -> None:
    config = Config.model_validate({"jobs": {"prune": {"max_facts": 3}}})
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with freeze_time(start) as clock:
        store = MemoryStore(db_path, config=config)
        for user in ("a", "b"):
            for i in range(6):
                store.remember(user, f"k{i}", "v", confidence=0.3 if i % 2 else 0.9)
            store.remember(user, "city", "x", ttl_days=3)
            store.remember(user, "city", "y")
            store.add_note(user, "a note")
        for i in range(30):
            store.append_message("a", "s1", "user", f"message {i}")
        statements: list[str] = []
        store.storage.hot.conn.set_trace_callback(statements.append)
        for days in (20, 40, 200, 230):
            clock.move_to(start + timedelta(days=days))
            report = run_once(store, ["settle", "expire", "demote", "prune"])
            assert report.ok
        # The agents' calls find their rows through indexes too.
        store.recall("a", "k0")
        store.recall("a", "nothing")
        store.remember("a", "k1", "changed")
        store.remember("a", "k1", "v")  # re-asserted during its grey period
        store.list_memories("a", namespace="")
        store.context("a")
        store.history("a", "s1", limit=5)
        store.forget("b", "k2")
        store.storage.hot.conn.set_trace_callback(None)
        plans = _plans(store.storage.hot.conn, statements)
        assert len(plans) > 20
        assert _full_scans(plans) == []
        searched = {detail for _, detail in plans}
        for index in (
            "memories_due_by_use",
            "memories_due_by_state",
            "memories_by_kind_state",
        ):
            assert any(index in detail for detail in searched), index
        store.close()
