"""The floor: the pass's transitions written as the fewest set-based SQL statements.

On a copy of the bench's database, the same rules the jobs apply (``jobs/*.py``), in the same
order (settle, expire, demote, prune), select what is due with one query per rule; then, in
chunks of :data:`CHUNK` ids, each change is written with a handful of statements per chunk:

* a state change (expire): ``INSERT INTO changes SELECT ...`` (one change-log row per entry,
  its before and after images built by ``json_object`` in SQL) and ``UPDATE memories ... WHERE
  id IN (chunk)``, in one hot transaction;
* a move to cold storage: the cold images read with one ``SELECT`` and written with one
  ``executemany`` in one cold transaction, then the change-log rows and ``DELETE ... WHERE id
  IN (chunk)`` in one hot transaction.

The files are opened the way memkeeper opens them (through a
:class:`~memkeeper.store.MemoryStore`), so the pragmas are the same. What the floor leaves out
is what makes memkeeper safe and explainable beyond the log rows: re-reading each entry to
skip those an agent touched, the in-flight marks of a move, job-run records, checkpoints.
Prune ranks with :mod:`memkeeper.scoring` in Python, as the job does. The bench checks that
memkeeper and the floor end in the same state.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memkeeper.clock import fixed, to_db
from memkeeper.config import Config
from memkeeper.records import Memory
from memkeeper.scoring import rank_key, retention_score
from memkeeper.storage.changelog import CHANGE_COLUMNS, image_of
from memkeeper.storage.columns import COLD_COLUMNS, MEMORY_COLUMNS
from memkeeper.store import MemoryStore

CHUNK = 5000
_IDS = "id IN (SELECT value FROM json_each(:ids))"
_DAYS = "CAST(julianday(:now) - julianday({}) AS INTEGER)"


def _image(columns: Sequence[str], overrides: dict[str, str]) -> str:
    """``json_object(...)`` of a memory row, some columns replaced by SQL expressions."""
    pairs = ", ".join(f"'{name}', {overrides.get(name, name)}" for name in columns)
    return f"json_object({pairs})"


class Floor:
    """The floor's writer over one store's two files (see the module docstring)."""

    def __init__(self, store: MemoryStore, now: datetime) -> None:
        self.hot = store.storage.hot.conn
        cold = store.storage.cold(create=True)
        assert cold is not None
        self.cold = cold.conn
        self.config = store.config
        self.moment = now
        self.now = to_db(now)
        self.counts: Counter[str] = Counter()
        self.select_seconds = 0.0

    def cutoff(self, days: float) -> str:
        return to_db(self.moment - timedelta(days=days))

    def select(self, where: str, params: dict[str, Any]) -> list[str]:
        began = time.perf_counter()
        rows = self.hot.execute(f"SELECT id FROM memories WHERE {where}", params).fetchall()
        self.select_seconds += time.perf_counter() - began
        return [row[0] for row in rows]

    def _log_rows(self, job: str, action: str, after: str, reason: str, details: str) -> str:
        exprs = {
            "at": ":now",
            "actor": f"'job:{job}'",
            "run_id": f"'floor-{job}'",
            "action": f"'{action}'",
            "memory_id": "id",
            "user_id": "user_id",
            "namespace": "namespace",
            "reason": reason,
            "source": "source",
            "before": _image(MEMORY_COLUMNS, {}),
            "after": after,
            "details": details,
        }
        names = ", ".join(CHANGE_COLUMNS)
        values = ", ".join(exprs.get(name, "NULL") for name in CHANGE_COLUMNS)
        return f"INSERT INTO changes ({names}) SELECT {values} FROM memories WHERE {_IDS}"

    def set_state(self, ids: list[str], state: str, job: str, action: str, reason: str) -> None:
        """Hot entries change state (``reason``: an SQL expression over the row)."""
        after = _image(MEMORY_COLUMNS, {"state": f"'{state}'", "state_since": ":now"})
        log = self._log_rows(job, action, after, reason, "NULL")
        for start in range(0, len(ids), CHUNK):
            params = self._params(ids[start : start + CHUNK])
            self.hot.execute("BEGIN IMMEDIATE")
            self.hot.execute(log, params)
            self.hot.execute(
                f"UPDATE memories SET state = '{state}', state_since = :now WHERE {_IDS}", params
            )
            self.hot.execute("COMMIT")
        self.counts[action] += len(ids)

    def retire(
        self,
        ids: list[str],
        cold_reason: str,
        job: str,
        reason: str,
        *,
        notes: dict[str, tuple[str, str]] | None = None,
    ) -> None:
        """Hot entries move to cold storage; ``notes``: per-id (reason, details) from Python."""
        overrides = {
            "state": "'cold'",
            "state_since": ":now",
            "cold_reason": f"'{cold_reason}'",
            "retired_at": ":now",
        }
        read = ", ".join(overrides.get(name, name) for name in COLD_COLUMNS)
        details = "NULL"
        if notes is not None:
            reason = "(SELECT reason FROM temp.floor_notes n WHERE n.id = memories.id)"
            details = "(SELECT details FROM temp.floor_notes n WHERE n.id = memories.id)"
            self.hot.execute(
                "CREATE TEMP TABLE IF NOT EXISTS floor_notes"
                " (id TEXT PRIMARY KEY, reason TEXT, details TEXT)"
            )
        log = self._log_rows(job, "retire", _image(COLD_COLUMNS, overrides), reason, details)
        insert = (
            f"INSERT INTO cold_memories ({', '.join(COLD_COLUMNS)})"
            f" VALUES ({', '.join('?' * len(COLD_COLUMNS))})"
        )
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            params = self._params(chunk)
            rows = self.hot.execute(f"SELECT {read} FROM memories WHERE {_IDS}", params).fetchall()
            self.cold.execute("BEGIN IMMEDIATE")
            self.cold.executemany(insert, rows)
            self.cold.execute("COMMIT")
            self.hot.execute("BEGIN IMMEDIATE")
            if notes is not None:
                self.hot.execute("DELETE FROM temp.floor_notes")
                self.hot.executemany(
                    "INSERT INTO temp.floor_notes VALUES (?, ?, ?)",
                    [(memory_id, *notes[memory_id]) for memory_id in chunk],
                )
            self.hot.execute(log, params)
            self.hot.execute(f"DELETE FROM memories WHERE {_IDS}", params)
            self.hot.execute("COMMIT")
        self.counts[f"retire ({cold_reason})"] += len(ids)

    def _params(self, chunk: Sequence[str]) -> dict[str, Any]:
        return {"ids": json.dumps(list(chunk)), "now": self.now, **self.rule_params}

    @property
    def rule_params(self) -> dict[str, Any]:
        jobs = self.config.jobs
        return {
            "grey": jobs.settle.grey_days,
            "grace": jobs.expire.review_grace_days,
            "ttl_fact": jobs.expire.ttl_days.fact,
            "ttl_preference": jobs.expire.ttl_days.preference,
            "ttl_note": jobs.expire.ttl_days.note,
            "min_confidence": jobs.demote.min_confidence,
            "unused": jobs.demote.unused_days,
        }

    # -- the jobs' rules, in the jobs' order ------------------------------------------------

    def settle(self) -> None:
        due = self.select(
            "state = 'superseded' AND state_since < :cut",
            {"cut": self.cutoff(self.config.jobs.settle.grey_days)},
        )
        reason = (
            f"printf('superseded %d days ago ≥ grey period %d days', "
            f"{_DAYS.format('state_since')}, :grey)"
        )
        self.retire(due, "superseded", "settle", reason)

    def expire(self) -> None:
        config = self.config.jobs.expire
        over = self.select(
            "state = 'pending_review' AND state_since < :cut AND pinned = 0",
            {"cut": self.cutoff(config.review_grace_days)},
        )
        reason = (
            "printf('still unused %d days after review began ≥ grace %d days', "
            f"{_DAYS.format('state_since')}, :grace)"
        )
        self.retire(over, "expired", "expire", reason)
        due: list[str] = []
        for kind in ("fact", "preference", "note"):
            due += self.select(
                "state = 'active' AND kind = :kind AND last_used_at < :cut AND pinned = 0"
                " AND ttl_days IS NULL",
                {"kind": kind, "cut": self.cutoff(getattr(config.ttl_days, kind))},
            )
        overrides = self.hot.execute(
            "SELECT DISTINCT ttl_days FROM memories WHERE ttl_days IS NOT NULL AND state = 'active'"
        ).fetchall()
        for (ttl,) in overrides:
            due += self.select(
                "state = 'active' AND ttl_days = :ttl AND last_used_at < :cut AND pinned = 0",
                {"ttl": ttl, "cut": self.cutoff(ttl)},
            )
        ttl = "coalesce(ttl_days, CASE kind WHEN 'fact' THEN :ttl_fact"
        ttl += " WHEN 'preference' THEN :ttl_preference ELSE :ttl_note END)"
        reason = (
            f"printf('unused %d days ≥ TTL %d days; pending review', "
            f"{_DAYS.format('last_used_at')}, {ttl})"
        )
        self.set_state(due, "pending_review", "expire", "expire", reason)

    def demote(self) -> None:
        config = self.config.jobs.demote
        due = self.select(
            "state IN ('active', 'pending_review') AND last_used_at < :cut"
            " AND confidence < :min_confidence AND pinned = 0",
            {"cut": self.cutoff(config.unused_days), "min_confidence": config.min_confidence},
        )
        reason = (
            "printf('confidence %g < %g and unused %d days ≥ %d days', confidence, "
            f":min_confidence, {_DAYS.format('last_used_at')}, :unused)"
        )
        self.retire(due, "low_confidence", "demote", reason)

    def prune(self) -> None:
        began = time.perf_counter()
        cap = self.config.jobs.prune.max_facts
        weights = self.config.scoring
        facts = "kind = 'fact' AND state = 'active'"
        groups = self.hot.execute(
            f"SELECT user_id, namespace, count(*) FROM memories WHERE {facts}"
            " GROUP BY user_id, namespace HAVING count(*) > ?",
            [cap],
        ).fetchall()
        notes: dict[str, tuple[str, str]] = {}
        for user_id, namespace, total in groups:
            rows = self.hot.execute(
                f"SELECT * FROM memories WHERE user_id = ? AND namespace = ? AND {facts}",
                [user_id, namespace],
            )
            names = [column[0] for column in rows.description]
            ranked = []
            for row in rows:
                memory = Memory.from_image(image_of(dict(zip(names, row, strict=True))))
                if not memory.pinned:
                    score = retention_score(memory, self.moment, weights)
                    ranked.append((rank_key(memory, score), memory.id, score))
            ranked.sort(key=lambda item: item[0])
            for rank, (_, memory_id, score) in enumerate(ranked[: total - cap], start=1):
                details = {"score": score.to_dict(), "rank": rank}
                details |= {"active_facts": total, "max_facts": cap}
                notes[memory_id] = (
                    f"{total} active facts > cap {cap}; score {score.score:.3f} was #{rank} lowest",
                    json.dumps(details, sort_keys=True),
                )
        self.select_seconds += time.perf_counter() - began
        self.retire(list(notes), "over_cap", "prune", "NULL", notes=notes)


def run_floor(hot_path: Path, config: Config, now: datetime) -> dict[str, Any]:
    """Run the floor on ``hot_path`` at ``now``; its time, its selection time and counts."""
    store = MemoryStore(hot_path, config=config, clock=fixed(now))
    try:
        floor = Floor(store, now)
        began = time.perf_counter()
        floor.settle()
        floor.expire()
        floor.demote()
        floor.prune()
        seconds = time.perf_counter() - began
    finally:
        store.close()
    return {
        "seconds": round(seconds, 4),
        "select_seconds": round(floor.select_seconds, 4),
        "changes": sum(floor.counts.values()),
        "by_label": dict(sorted(floor.counts.items())),
        "chunk": CHUNK,
    }
