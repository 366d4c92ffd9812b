"""The keyword index (issue 11, "2. Keyword"): FTS5 trigram over key and value, kept in step
by triggers in both files, filtered by owner, and erased with no residue."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
from helpers import T0, files_containing
from sqlite_utils import Database

from memkeeper import MemoryStore
from memkeeper.clock import to_db
from memkeeper.maintenance import curation
from memkeeper.maintenance.runner import run_once
from memkeeper.paths import cold_path_for
from memkeeper.storage import keywords
from memkeeper.storage.sqlite.schema import COLD, HOT, cold_migrations, hot_migrations
from memkeeper.storage.sqlite.scrub import scrub
from memkeeper.store.bm25 import Scored, keyword_scores, score_all

pytestmark = pytest.mark.both_backends

CURRENT = ("active", "pending_review")


def find(
    db: Database | None,
    query: str,
    *,
    table: str = "memories",
    user: str = "alice",
    namespaces: tuple[str, ...] = ("",),
    kinds: tuple[str, ...] | None = None,
    states: tuple[str, ...] = CURRENT,
    limit: int = 10,
) -> list[Scored]:
    assert db is not None
    return keyword_scores(
        db,
        table=table,
        user_id=user,
        namespaces=namespaces,
        query=query,
        kinds=kinds,
        states=states,
    )[:limit]


def ids(hits: list[Scored]) -> list[str]:
    return [hit.id for hit in hits]


def check_index(db: Database | None, table: str) -> None:
    """FTS5's own check: the index matches the content table exactly. (PostgreSQL's keyword
    data are generated columns of the row itself, in step by construction: nothing to check;
    the finds around each check test it there.)"""
    assert db is not None
    if getattr(db, "dialect", "sqlite") == "postgres":
        return
    db.conn.execute(f"INSERT INTO {table}_fts ({table}_fts, rank) VALUES ('integrity-check', 1)")


@pytest.fixture
def store(db_path: Path):
    with MemoryStore(db_path) as opened:
        yield opened


def test_english_and_chinese_match(store: MemoryStore) -> None:
    pdf = store.remember("alice", "report_format", "PDF")
    note = store.add_note("alice", "封面加公司logo")
    other = store.remember("alice", "city", "Lisbon")
    hot = store.storage.hot
    assert ids(find(hot, "公司logo")) == [note.id]
    assert ids(find(hot, "封面")) == [note.id]  # two characters: the substring scan
    assert ids(find(hot, "LOGO")) == [note.id]  # case-insensitive
    assert ids(find(hot, "report format")) == [pdf.id]
    # stemmed words, "_" splitting a key: "reports" finds report_format
    assert ids(find(hot, "how does this user want reports?")) == [pdf.id]
    assert ids(find(hot, "pdf")) == [pdf.id]
    assert find(hot, "Madrid") == []
    hits = find(hot, "lisbon or pdf")
    assert sorted(ids(hits)) == sorted([pdf.id, other.id])
    assert all(hit.score > 0 and 0 < hit.coverage <= 1 for hit in hits)


def test_short_queries_scan_the_users_rows(store: MemoryStore) -> None:
    pdf = store.remember("alice", "report_format", "PDF")
    store.remember("bob", "report_format", "PDF")
    hot = store.storage.hot
    assert ids(find(hot, "pd")) == [pdf.id]
    assert ids(find(hot, "F")) == [pdf.id]
    assert ids(find(hot, "_f")) == [pdf.id]  # LIKE wildcards are escaped: a literal "_"
    assert find(hot, "%") == []
    assert find(hot, "") == [] and find(hot, "   ") == []
    both = store.remember("alice", "ab", "xy")
    hits = find(hot, "ab xy")
    assert ids(hits) == [both.id]


@pytest.mark.parametrize(
    "query",
    ['"', "*", "AND", "(", "a AND (b", '"unterminated', "NEAR(logo cover)", "key:logo", "-x",
     "^abc", "logo*", "OR OR", "NOT", ")(", "'; DROP TABLE memories; --", "\\", "\x00abc"],
)  # fmt: skip
def test_fts_syntax_in_queries_never_raises(store: MemoryStore, query: str) -> None:
    store.remember("alice", "cover", 'logo AND (big) "quoted" NEAR*')
    find(store.storage.hot, query)


def test_quotes_and_operators_are_matched_as_text(store: MemoryStore) -> None:
    entry = store.remember("alice", "cover", 'logo AND (big) "quoted" NEAR*')
    hot = store.storage.hot
    assert ids(find(hot, '"quoted"')) == [entry.id]
    assert ids(find(hot, "AND (big)")) == [entry.id]


def test_users_and_namespaces_never_mix(store: MemoryStore) -> None:
    mine = store.remember("alice", "tool", "pandas dataframe")
    project = store.remember("alice", "tool", "pandas dataframe", namespace="proj")
    store.remember("bob", "tool", "pandas dataframe")
    hot = store.storage.hot
    for query in ("pandas", "pa"):
        assert ids(find(hot, query)) == [mine.id]
        assert ids(find(hot, query, namespaces=("proj",))) == [project.id]
        assert sorted(ids(find(hot, query, namespaces=("", "proj")))) == sorted(
            [mine.id, project.id]
        )
        assert find(hot, query, user="carol") == []
        assert find(hot, query, namespaces=()) == []


def test_kinds_and_states_filter(store: MemoryStore) -> None:
    old = store.remember("alice", "style", "formal tone")
    new = store.remember("alice", "style", "casual tone")  # conflict: old is superseded
    note = store.add_note("alice", "tone of the meeting was tense")
    hot = store.storage.hot
    assert sorted(ids(find(hot, "tone"))) == sorted([new.id, note.id])
    assert ids(find(hot, "tone", kinds=("note",))) == [note.id]
    assert ids(find(hot, "tone", kinds=("fact",))) == [new.id]
    assert find(hot, "tone", kinds=()) == []
    assert ids(find(hot, "formal", states=("superseded",))) == [old.id]
    assert find(hot, "formal") == []
    assert len(find(hot, "tone", limit=1)) == 1


def test_the_index_follows_every_change_and_move(db_path: Path) -> None:
    now = [T0]
    store = MemoryStore(db_path, clock=lambda: now[0])
    kept = store.remember("alice", "hot", "keepsake value")
    first = store.remember("alice", "cold", "wanderer value")
    second = store.remember("alice", "cold", "wanderer again")  # conflict
    hot = store.storage.hot
    assert ids(find(hot, "wanderer")) == [second.id]
    now[0] += timedelta(days=10)
    store.recall("alice", "hot")
    for days in (200, 30):  # expire, then retire to cold after the grace period
        now[0] += timedelta(days=days)
        run_once(store, ["expire"])
        store.recall("alice", "hot")
    cold = store.storage.cold(create=False)
    states = {m.id: m.state for m in store.list_memories("alice")}
    assert states[second.id] == "cold" and states[kept.id] == "active"
    hot_states = ("active", "pending_review", "superseded")
    assert second.id not in ids(find(hot, "wanderer", states=hot_states))
    assert first.id not in ids(find(hot, "wanderer", states=hot_states)) or (
        states.get(first.id) == "superseded"
    )
    assert second.id in ids(find(cold, "wanderer", table="cold_memories", states=("cold",)))
    assert ids(find(hot, "keepsake")) == [kept.id]
    check_index(hot, "memories")
    check_index(cold, "cold_memories")
    curation.restore(store, [second.id])
    assert ids(find(hot, "wanderer")) == [second.id]
    assert second.id not in ids(find(cold, "wanderer", table="cold_memories", states=("cold",)))
    check_index(hot, "memories")
    check_index(cold, "cold_memories")
    store.forget("alice", "cold")
    assert find(hot, "wanderer", states=hot_states) == []
    assert find(cold, "wanderer", table="cold_memories", states=("cold",)) == []
    check_index(hot, "memories")
    check_index(cold, "cold_memories")
    store.close()


def test_purging_and_compacting_keep_every_find(store: MemoryStore) -> None:
    """What forget and retention call after deleting rows: on SQLite an FTS5 rewrite, on
    PostgreSQL nothing (the keyword data are columns of the rows); finds are unchanged."""
    from memkeeper.storage.transaction import immediate_transaction

    kept = store.remember("alice", "tool", "pandas dataframe")
    gone = store.remember("alice", "other", "pandas series")
    hot = store.storage.hot
    with store.storage.lock:
        with immediate_transaction(hot):
            hot.execute("DELETE FROM memories WHERE id = ?", [gone.id])
            keywords.purge_deleted(hot, "memories")
        keywords.compact(hot, "memories")
    assert ids(find(hot, "pandas")) == [kept.id]
    check_index(hot, "memories")


def test_insert_or_replace_keeps_the_index_exact(store: MemoryStore) -> None:
    # Moves re-run after a crash write cold rows with INSERT OR REPLACE: no stale entry left.
    entry = store.remember("alice", "k", "replaced value")
    cold = store.storage.cold(create=True)
    assert cold is not None
    row = dict(store.storage.hot_images([entry.id])[entry.id])
    row.update(state="cold", cold_reason="test", retired_at=row["updated_at"])
    names = ", ".join(row)
    marks = ", ".join(f":{c}" for c in row)
    for value in ("replaced value", "second value"):
        row["value"] = value
        cold.conn.execute(f"INSERT OR REPLACE INTO cold_memories ({names}) VALUES ({marks})", row)
    check_index(cold, "cold_memories")
    assert ids(find(cold, "second", table="cold_memories", states=("cold",))) == [entry.id]
    assert find(cold, "replaced", table="cold_memories", states=("cold",)) == []


@pytest.mark.sqlite_only  # FTS5 and the SQLite files themselves
def test_migration_indexes_existing_rows(db_path: Path) -> None:
    stamp = to_db(T0)
    row = {
        "user_id": "alice", "namespace": "", "kind": "fact", "source": "chat",
        "confidence": 0.9, "pinned": 0, "ttl_days": None, "created_at": stamp,
        "updated_at": stamp, "last_accessed_at": None, "access_count": 0,
        "state_since": stamp, "last_used_at": stamp,
    }  # fmt: skip
    for path, kind, migrations, before, table, extra in (
        (db_path, HOT, hot_migrations, "0006_keywords", "memories", {"state": "active"}),
        (
            cold_path_for(db_path),
            COLD,
            cold_migrations,
            "0003_keywords",
            "cold_memories",
            {"state": "cold", "cold_reason": "expired", "retired_at": stamp},
        ),
    ):
        db = Database(sqlite3.connect(path, isolation_level=None))
        db.conn.execute("PRAGMA journal_mode = WAL")
        migrations.apply(db, stop_before=before)
        db.conn.execute(f"PRAGMA application_id = {kind.application_id}")
        db[table].insert({**row, **extra, "id": f"{table}-1", "key": "city", "value": "北京朝阳区"})
        db.conn.close()
    with MemoryStore(db_path) as store:
        cold = store.storage.cold(create=False)
        assert ids(find(store.storage.hot, "京朝阳")) == ["memories-1"]
        assert ids(find(cold, "京朝阳", table="cold_memories", states=("cold",))) == [
            "cold_memories-1"
        ]
        check_index(store.storage.hot, "memories")
        check_index(cold, "cold_memories")


@pytest.mark.sqlite_only  # FTS5 and the SQLite files themselves
def test_rebuilding_a_file_keeps_the_index_pointing_at_the_right_rows(store: MemoryStore) -> None:
    entries = [store.remember("alice", f"k{i}", f"value{i:03d}x") for i in range(40)]
    for entry in entries[::3]:
        store.forget_memory(entry.id)
    scrub([(store.storage.hot, store.path, store.storage.hot_raw)], None, timeout_s=1)  # VACUUM
    check_index(store.storage.hot, "memories")
    for i, entry in enumerate(entries):
        expected = [] if i % 3 == 0 else [entry.id]
        assert ids(find(store.storage.hot, f"value{i:03d}x")) == expected


# Letters outside hex and digits, so no id or timestamp holds these trigrams by chance.
SECRETS = {"hot": "zqxjvwkpy hot", "cold": "qyzxwvjkm cold", "moved": "jzkqvxwyp moved"}


def _trigrams(text: str) -> list[bytes]:
    word = text.split(maxsplit=1)[0]
    return [word[i : i + 3].encode() for i in range(len(word) - 2)]


def _store_with_indexed_secrets(db_path: Path) -> MemoryStore:
    now = [T0]
    store = MemoryStore(db_path, clock=lambda: now[0])
    for key, value in SECRETS.items():
        store.remember("alice", key, value)
    store.remember("bob", "city", "Lisbon")
    now[0] += timedelta(days=10)
    store.recall("alice", "hot")
    for days in (200, 30):  # "cold" and "moved" retire to cold
        now[0] += timedelta(days=days)
        run_once(store, ["expire"])
        store.recall("alice", "hot")
        store.recall("bob", "city")
    moved = [m.id for m in store.list_memories("alice") if m.key == "moved"]
    curation.restore(store, moved)  # back to hot: the cold index keeps its deleted trigrams
    states = {m.key: m.state for m in store.list_memories("alice")}
    assert states == {"hot": "active", "cold": "cold", "moved": "active"}
    return store


def _residue(db_path: Path) -> list[tuple[bytes, list[str]]]:
    needles = [n for value in SECRETS.values() for n in (value.encode(), *_trigrams(value))]
    return [(n, files) for n in needles if (files := files_containing(db_path, n))]


@pytest.mark.sqlite_only  # bytes of the two SQLite files (PostgreSQL: tests of forget)
@pytest.mark.parametrize("how", ["user", "keys"])
def test_forget_leaves_no_trigram_in_either_file(db_path: Path, how: str) -> None:
    store = _store_with_indexed_secrets(db_path)
    store.storage.checkpoint()
    assert _residue(db_path)  # the index does hold trigrams of the values
    if how == "user":
        store.forget_user("alice")
    else:
        for key in SECRETS:
            assert store.forget("alice", key) == 1
    # The rows and their bytes are gone at once; the trigrams wait for the next job run,
    # which rewrites each index once for every forget since (status says so meanwhile).
    assert any("trigrams of texts erased since" in w for w in store.status()["warnings"])
    run_once(store, ["settle"])
    assert _residue(db_path) == []
    assert not any("trigrams" in w for w in store.status()["warnings"])
    hot, cold = store.storage.hot, store.storage.cold(create=False)
    assert find(hot, "Lisbon", user="bob")
    check_index(hot, "memories")
    check_index(cold, "cold_memories")
    store.close()


def test_the_purge_command_depends_on_the_sqlite_version() -> None:
    from memkeeper.storage.sqlite.fts import purge_command

    assert purge_command((3, 40, 1)) == "rebuild"
    assert purge_command((3, 51, 1)) == "optimize"


@pytest.mark.sqlite_only  # FTS5 and the SQLite files themselves
def test_purging_beside_other_writing_connections_keeps_the_index_sound(db_path: Path) -> None:
    """Three connections write through the triggers, search and purge at once (what agents
    and a forget do). On SQLite 3.40.1 an FTS5 ``optimize`` here corrupted the index within
    a second or two ("database disk image is malformed"); the purge must not."""
    import random
    import threading
    import time

    from memkeeper.storage.keywords import purge_deleted

    MemoryStore(db_path).close()  # the schema, with the keyword index and its triggers
    errors: list[str] = []
    stop = time.monotonic() + 3.0

    def writer(n: int) -> None:
        rng = random.Random(n)
        db = Database(sqlite3.connect(db_path, isolation_level=None, timeout=10))
        conn = db.conn
        i = 0
        while time.monotonic() < stop and not errors:
            i += 1
            user, key = f"u{rng.randrange(4)}", f"k{rng.randrange(20)}"
            value = f"value {n} {i} 报告用PDF格式"
            try:
                conn.execute("BEGIN IMMEDIATE")
                if rng.random() < 0.6:
                    changed = conn.execute(
                        "UPDATE memories SET value = ? WHERE user_id = ? AND key = ?",
                        (value, user, key),
                    ).rowcount
                    if not changed:
                        now = to_db(T0)
                        conn.execute(
                            "INSERT INTO memories (id, user_id, kind, key, value, confidence,"
                            " created_at, updated_at, state_since, last_used_at, state)"
                            " VALUES (?, ?, 'fact', ?, ?, 0.9, ?, ?, ?, ?, 'active')",
                            (f"{n}-{i}", user, key, value, now, now, now, now),
                        )
                else:
                    conn.execute("DELETE FROM memories WHERE user_id = ? AND key = ?", (user, key))
                    purge_deleted(db, "memories")
                conn.execute("COMMIT")
                keyword_scores(
                    db,
                    table="memories",
                    user_id=user,
                    namespaces=("",),
                    query="PDF",
                    kinds=None,
                    states=("active",),
                )
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if "locked" not in str(exc):
                    errors.append(f"{type(exc).__name__}: {exc}")
        conn.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    check = sqlite3.connect(db_path)
    check.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    check.close()


def _insert_rows(db: Database, rows: list[tuple[str, str, str, str]]) -> None:
    """(id, user, key, value) rows written straight to the hot table (thousands, fast)."""
    now = to_db(T0)
    with db.atomic():
        db.conn.executemany(
            "INSERT INTO memories (id, user_id, kind, key, value, confidence, created_at,"
            " updated_at, state_since, last_used_at, state)"
            " VALUES (?, ?, 'fact', ?, ?, 0.9, ?, ?, ?, ?, 'active')",
            [(*row, now, now, now, now) for row in rows],
        )


def test_rare_words_weigh_more_than_common_ones(store: MemoryStore) -> None:
    """BM25: a word half the entries share counts for less than a rare one, and a stop word
    is no substring of other words ("the" never finds "others")."""
    for n in range(20):
        store.add_note("alice", f"Caroline said hello to others, turn {n}")
    pottery = store.add_note("alice", "the pottery class is on Tuesday")
    mention = store.add_note("alice", "Caroline took a pottery class")
    hot = store.storage.hot
    hits = find(hot, "when is the pottery class?", limit=50)
    assert ids(hits)[:2] in ([pottery.id, mention.id], [mention.id, pottery.id])
    assert len(hits) == 2  # "the", "is", "when" match nothing
    hits = find(hot, "Caroline pottery", limit=50)
    assert ids(hits)[0] == mention.id  # both words beat the common one alone
    assert hits[1].id == pottery.id  # the rare word alone beats the common one alone


def test_another_users_rows_never_change_a_users_scores(db_path: Path) -> None:
    """The statistics are the user's own, at every size: alice's scores are the same
    whatever bob writes — with a few entries and past the scan threshold (FTS5 path)."""
    with MemoryStore(db_path) as store:
        hot = store.storage.hot
        for size in (30, keywords.SCAN_BELOW_ROWS + 50):
            user = f"alice{size}"
            _insert_rows(
                hot,
                [
                    (f"{user}-{i}", user, f"k{i}", f"{'pdf ' * (i % 3)}report weekly {i % 7}")
                    for i in range(size)
                ],
            )
            before = find(hot, "weekly pdf report", user=user, limit=size)
            assert len(before) == size
            _insert_rows(
                hot,
                [
                    (f"bob{size}-{i}", "bob", f"k{size}-{i}", "pdf pdf pdf weekly")
                    for i in range(300)
                ],
            )
            assert find(hot, "weekly pdf report", user=user, limit=size) == before


def test_one_scorer_whatever_the_users_size(store: MemoryStore) -> None:
    """The scan (small users) and the index (large ones: FTS5 on SQLite, pg_trgm on
    PostgreSQL) give the same candidates."""
    hot = store.storage.hot
    store.remember("alice", "report_format", "PDF with the 公司logo")
    store.add_note("alice", "封面加公司logo")
    store.add_note("alice", "weekly reports on Fridays")
    args = dict(table="memories", user_id="alice", namespaces=("",), kinds=None)
    for patterns in (["report", "pdf"], ["公司", "logo"], ["封面"], ["fri", "xyz"]):
        small = keywords.candidate_rows(hot, **args, states=CURRENT, patterns=patterns, user_rows=1)
        large = keywords.candidate_rows(
            hot, **args, states=CURRENT, patterns=patterns, user_rows=10**6
        )
        assert sorted(small) == sorted(large) and small


def test_cjk_is_scored_by_characters_and_its_pairs_order_equal_scores() -> None:
    """A CJK run scores by its characters, as textbook BM25 does; its two-character pairs
    do not add to the score (they weighed a shared name three times), they order entries
    whose scores are equal: ``封面`` as a word before ``封`` and ``面`` apart."""
    rows = [("apart", None, "面对封锁"), ("word", None, "封面设计"), ("other", None, "会议纪要")]
    hits = score_all(rows, "封面")
    assert [h.id for h in hits] == ["word", "apart"]
    assert hits[0].score == pytest.approx(hits[1].score)
    assert hits[0].adjacency > 0 == hits[1].adjacency
