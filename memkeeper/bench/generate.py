"""The bench's database: N memories over U users, generated deterministically and fast.

Rows are made in Python from one seeded random generator (the same ``--seed`` gives the same
file) and streamed into ``executemany``, one transaction per table, with no journal while
loading and the table's indexes dropped for the load and rebuilt afterwards (a sort each,
much faster than a million random index inserts). The schema is memkeeper's own: the files
are created by opening a :class:`~memkeeper.store.MemoryStore`, so they carry every
migration.

What the database holds, relative to the bench's "now" (:data:`NOW`) and the configured
rules (TTLs, grace and grey periods, the demotion threshold, the fact cap):

* kinds 70 % facts, 20 % preferences, 10 % notes; confidences uniform in 0.3-1.0; entries
  created over the last two years; 60 % of them recalled at least once;
* most entries used recently enough that no rule applies (what a daily pass leaves), and a
  share of each kind of due entry: :data:`FATES` (about 10 % due in all);
* every 25th user is heavy (twice the entries, packed into fewer namespaces), so some
  (user, namespace) pairs hold more active facts than the cap;
* conversation histories for every 10th user (1-3 sessions of 10-40 messages);
* 4 agent users (``bench-agent-N``, 40 recent facts each) that the bench's agents use, so
  their traffic never changes what the pass has to do.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memkeeper.config import Config
from memkeeper.storage.columns import COLD_COLUMNS, MEMORY_COLUMNS
from memkeeper.store import MemoryStore

NOW = datetime(2027, 1, 1, 3, 0, tzinfo=UTC)
"""The bench's "now": the generated ages count back from it and the pass runs at it."""

AGENT_PREFIX = "bench-"
"""User ids of the bench's own traffic (agents, rate measurements) start with this."""
AGENTS = 4
AGENT_FACTS = 40

KIND_SHARES = (("fact", 0.70), ("preference", 0.20), ("note", 0.10))
FATES = (
    # (fate, share of all generated memories)
    ("cold", 0.020),  # retired by earlier passes: lives in the cold file
    ("superseded", 0.030),  # half past the grey period: settle retires those
    ("pending", 0.015),  # half past the review grace: expire retires those
    ("expire", 0.040),  # active, unused a little longer than the kind's TTL
    ("demote", 0.015),  # active, confidence < threshold, unused past unused_days
    ("override", 0.010),  # its own ttl_days (60): a third of them past it
    ("pinned", 0.010),  # pinned: never due, whatever its age
)
_STATES = {"superseded": "superseded", "pending": "pending_review", "cold": "cold"}
HEAVY_EVERY = 25
NAMESPACE_SIZE = 45  # entries per namespace of a normal user: well under the cap
HEAVY_NAMESPACE_SIZE = 110  # of a heavy user: about 75 facts, over a cap of 50
OVERRIDE_TTL = 60
TWO_YEARS = 730.0
DAY = 86400
FILLER = (
    "Prefers concise answers with sources; works on the quarterly report; lives near the "
    "river; meets the team on Tuesdays; drinks tea, not coffee; "
)

# The rows are built in the schema's own column order.
MEMORY_FIELDS = MEMORY_COLUMNS
COLD_FIELDS = COLD_COLUMNS
MESSAGE_FIELDS = ("user_id", "namespace", "session_id", "role", "content", "created_at")


@dataclass(frozen=True)
class Generated:
    """What was generated, and how long it took."""

    hot: int
    cold: int
    messages: int
    users: int
    agent_users: tuple[str, ...]
    seconds: float

    @classmethod
    def of_load(cls, counts: dict[str, int], users: int, began: float) -> Generated:
        """What a load of :func:`tables` wrote (rows per table), timed from ``began``."""
        return cls(
            hot=counts["memories"],
            cold=counts["cold_memories"],
            messages=counts["messages"],
            users=users,
            agent_users=AGENT_USERS,
            seconds=time.perf_counter() - began,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "hot_memories": self.hot,
            "cold_memories": self.cold,
            "messages": self.messages,
            "users": self.users,
            "seconds": round(self.seconds, 3),
        }


class _Times:
    """Stored-time text (``to_db``'s format) of ``NOW - age``, whole seconds, made fast."""

    def __init__(self, now: datetime) -> None:
        self.epoch = int(now.timestamp())
        first = (self.epoch - int(TWO_YEARS + 400) * DAY) // DAY
        self.first_day = first
        self.days = [
            datetime.fromtimestamp(day * DAY, UTC).strftime("%Y-%m-%dT")
            for day in range(first, self.epoch // DAY + 1)
        ]
        self.clock = [
            f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}.000000+00:00" for s in range(DAY)
        ]

    def ago(self, days: float) -> str:
        moment = self.epoch - int(days * DAY)
        return self.days[moment // DAY - self.first_day] + self.clock[moment % DAY]


class _Maker:
    """Makes one user's rows from the shared seeded generator."""

    def __init__(self, rng: random.Random, config: Config, times: _Times) -> None:
        self.rng = rng
        self.times = times
        jobs = config.jobs
        self.ttl = {kind: getattr(jobs.expire.ttl_days, kind) for kind, _ in KIND_SHARES}
        self.grace = jobs.expire.review_grace_days
        self.grey = jobs.settle.grey_days
        self.min_confidence = jobs.demote.min_confidence
        self.unused_days = jobs.demote.unused_days
        bounds, total = [], 0.0
        for fate, share in FATES:
            total += share
            bounds.append((total, fate))
        self.fate_bounds = bounds
        self.cold: list[tuple[Any, ...]] = []

    def _kind(self, roll: float) -> str:
        total = 0.0
        for kind, share in KIND_SHARES:
            total += share
            if roll < total:
                return kind
        return KIND_SHARES[-1][0]

    def _fate(self, roll: float) -> str:
        for bound, fate in self.fate_bounds:
            if roll < bound:
                return fate
        return "normal"

    def _unused_days(self, fate: str, kind: str, confidence: float, since: float) -> float:
        """Days since last use, by fate (``since``: days in the current state, if pending)."""
        r = self.rng.random()
        ttl = self.ttl[kind]
        if fate == "expire":
            return ttl + 0.01 + 30 * r
        if fate == "pending":
            return ttl + since + 0.01 + 2 * r
        if fate == "demote":
            window = min(ttl - 1, self.unused_days + 59) - self.unused_days
            return self.unused_days + 0.01 + window * r
        if fate == "override":
            return 1.5 * OVERRIDE_TTL * r
        if fate == "pinned":
            return 400 * r
        if fate in ("cold", "superseded"):
            return since + 60 * r
        # Used recently enough that no rule applies: within the TTL, and within the
        # demotion window when the confidence is low.
        limit = ttl if confidence >= self.min_confidence else min(ttl, self.unused_days)
        return (limit - 1) * r

    def entry(
        self, user: str, namespace: str, index: int, kind: str, older: int
    ) -> tuple[Any, ...] | None:
        """One memory's row (None when it went to the cold list instead). A superseded value
        takes the key of entry ``older`` (an earlier one in the same namespace), which is
        usually the current value of that key."""
        rng, ago = self.rng, self.times.ago
        fate = self._fate(rng.random())
        if fate == "demote":
            kind = "fact" if kind == "preference" else kind  # a 30-day TTL leaves no window
            low = self.min_confidence - 0.3
            confidence = min(round(0.3 + low * rng.random(), 2), round(0.29 + low, 2))
        else:
            confidence = round(0.3 + 0.7 * rng.random(), 2)
        since = 0.0
        if fate == "superseded":
            since = 2 * self.grey * rng.random()
        elif fate == "pending":
            since = 2 * self.grace * rng.random()
        elif fate == "cold":
            since = 1 + 364 * rng.random()
        unused = self._unused_days(fate, kind, confidence, since)
        created = max(TWO_YEARS * rng.random(), unused + 0.01)
        used = ago(unused)
        if rng.random() < 0.6:  # recalled at least once: last used = last recalled
            accessed: str | None = used
            count = 1 + int(30 * rng.random())
            updated = ago(unused + (created - unused) * rng.random())
        else:
            accessed, count, updated = None, 0, used
        state = _STATES.get(fate, "active")
        row = (
            f"{rng.getrandbits(64):016x}",
            user,
            namespace,
            kind,
            None if kind == "note" else f"{kind[:4]}-{older if fate == 'superseded' else index}",
            f"{kind} {user}/{index}: {FILLER[: 20 + int(80 * rng.random())]}",
            "bench",
            confidence,
            state,
            1 if fate == "pinned" else 0,
            OVERRIDE_TTL if fate == "override" else None,
            ago(created),
            updated,
            accessed,
            count,
            updated if state == "active" else ago(since),
            used,
        )
        if state == "cold":
            self.cold.append((*row, "expired", row[15]))
            return None
        return row

    def user(self, number: int, count: int, heavy: bool) -> Iterator[tuple[Any, ...]]:
        """One user's hot rows, spread over namespaces (cold rows go to ``self.cold``)."""
        user = f"u{number:06d}"
        size = HEAVY_NAMESPACE_SIZE if heavy else NAMESPACE_SIZE
        spaces = max(1, round(count / size))
        names = ["", *(f"project-{n}" for n in range(1, spaces))]
        kind = self._kind
        for index in range(count):
            space = index % spaces
            older = index - spaces if index >= spaces else index
            row = self.entry(user, names[space], index, kind(self.rng.random()), older)
            if row is not None:
                yield row

    def rows(self, memories: int, users: int, agents: tuple[str, ...]) -> Iterator[tuple]:
        """Every hot row, user by user, then the agents' recent facts (keys ``k0``...)."""
        for number, (count, heavy) in enumerate(_counts(memories, users)):
            yield from self.user(number, count, heavy)
        for agent in agents:
            for index in range(AGENT_FACTS):
                at = self.times.ago(1 + 4 * self.rng.random())
                memory_id = f"{self.rng.getrandbits(64):016x}"
                row = (memory_id, agent, "", "fact", f"k{index}", f"agent value {index}", "bench")
                yield (*row, 0.9, "active", 0, None, at, at, None, 0, at, at)


def _counts(memories: int, users: int) -> list[tuple[int, bool]]:
    """Entries per user (heavy users get twice the share), summing to ``memories``."""
    weights = [2 if number % HEAVY_EVERY == 0 else 1 for number in range(users)]
    total = sum(weights)
    counts, cumulative, given = [], 0, 0
    for weight in weights:
        cumulative += weight
        upto = round(cumulative * memories / total)
        counts.append((upto - given, weight == 2))
        given = upto
    return counts


def _messages(rng: random.Random, times: _Times, users: int) -> Iterator[tuple[Any, ...]]:
    roles = ("user", "assistant")
    for number in range(3, users, 10):
        user = f"u{number:06d}"
        for session in range(1 + number // 10 % 3):
            start = 1 + 59 * rng.random()
            for index in range(10 + int(30 * rng.random())):
                text = f"message {index} of session {session}: {FILLER[: 30 + index]}"
                at = times.ago(start - index / 1440)
                yield (user, "", f"session-{session}", roles[index % 2], text, at)


@contextlib.contextmanager
def _bulk(conn: sqlite3.Connection) -> Iterator[None]:
    """Loading mode for this connection's fresh, private file: no journal, no syncs, a big
    cache; back to WAL (what memkeeper opens it in) afterwards."""
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")
    conn.execute("PRAGMA temp_store = MEMORY")
    try:
        yield
    finally:
        conn.execute("PRAGMA journal_mode = WAL")


def _insert(conn: sqlite3.Connection, table: str, fields: tuple[str, ...], rows: Any) -> int:
    """Insert ``rows`` in one transaction, ``table``'s indexes dropped meanwhile and rebuilt
    after (one sort each instead of a million random inserts). Returns how many."""
    indexes = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ?"
        " AND sql IS NOT NULL",
        [table],
    ).fetchall()
    values = ", ".join("?" * len(fields))
    conn.execute("BEGIN IMMEDIATE")
    try:
        for name, _sql in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        cursor = conn.executemany(
            f"INSERT INTO {table} ({', '.join(fields)}) VALUES ({values})", rows
        )
        for _name, sql in indexes:
            conn.execute(sql)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return max(cursor.rowcount, 0)


def tables(
    config: Config, *, memories: int, users: int, seed: int, now: datetime = NOW
) -> Iterator[tuple[str, tuple[str, ...], Iterable[tuple[Any, ...]]]]:
    """The bench's rows, table by table, for either backend: (table, fields, rows).

    Consumed in order: the hot rows first (making them also makes the cold ones), then the
    messages, then cold storage. The same seed gives the same rows on both backends.
    """
    if memories < 1 or users < 1:
        raise ValueError("the bench needs at least one memory and one user")
    return _tables(config, memories, users, seed, now)


def _tables(
    config: Config, memories: int, users: int, seed: int, now: datetime
) -> Iterator[tuple[str, tuple[str, ...], Iterable[tuple[Any, ...]]]]:
    rng = random.Random(seed)  # noqa: S311 - reproducible data, not secrets
    times = _Times(now)
    maker = _Maker(rng, config, times)
    yield "memories", MEMORY_FIELDS, maker.rows(memories, users, AGENT_USERS)
    yield "messages", MESSAGE_FIELDS, _messages(rng, times, users)
    yield "cold_memories", COLD_FIELDS, maker.cold


AGENT_USERS = tuple(f"{AGENT_PREFIX}agent-{n}" for n in range(AGENTS))


def generate(
    hot_path: Path,
    config: Config,
    *,
    memories: int,
    users: int,
    seed: int,
    now: datetime = NOW,
) -> Generated:
    """Create ``hot_path`` (and its cold file) holding the bench's database."""
    began = time.perf_counter()
    made = tables(config, memories=memories, users=users, seed=seed, now=now)
    store = MemoryStore(hot_path, config=config)
    counts: dict[str, int] = {}
    try:
        cold_db = store.storage.cold(create=True)
        assert cold_db is not None
        hot, cold = store.storage.hot.conn, cold_db.conn
        with _bulk(hot), _bulk(cold):
            for table, fields, rows in made:
                counts[table] = _insert(
                    cold if table == "cold_memories" else hot, table, fields, rows
                )
    finally:
        store.close()
    return Generated.of_load(counts, users, began)
