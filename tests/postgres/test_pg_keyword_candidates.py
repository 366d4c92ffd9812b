"""Why PostgreSQL's keyword candidates are pg_trgm's alone, with no full-text list beside them.

The keyword scorer (:mod:`memkeeper.store.bm25`) scores an entry by the query's terms it
holds as words or word prefixes, and every such entry contains the term's pattern as a
substring, which is what the trigram candidates are. A ``tsvector`` list
(``to_tsvector('english', …) @@ websearch_to_tsquery('english', query)``, or the OR of the
query's words) can only add entries that hold none of the patterns, which the scorer gives 0:
they would never be hits. This test checks it on the recall evaluation's set (the smoke size;
the full set and seed 7 gave the same, README "PostgreSQL"): the large-user path (trigrams)
finds what the small-user scan of every row finds, and the full-text lists add no entry the
scorer ranks.
"""

from __future__ import annotations

import re

from helpers.backends import empty_memory

from memkeeper import MemoryStore
from memkeeper.bench.eval_data import generate
from memkeeper.bench.recall_eval import SIZES, _write
from memkeeper.clock import fixed
from memkeeper.config import Config
from memkeeper.storage import keywords
from memkeeper.store.bm25 import query_terms, score_rows

STATES = ("active", "pending_review")
FULL_TEXT = {
    "websearch": "websearch_to_tsquery('english', %s)",
    "or": "to_tsquery('english', %s)",
}


def _full_text(db, user: str, query: str, how: str) -> list[tuple[str, str | None, str]]:
    words = [w for w in re.findall(r"\w+", query) if w.isascii()]
    argument = query if how == "websearch" else " | ".join(words) or "nothing"
    with db.lease:  # the pooled store's connection of this thread
        return _full_text_rows(db, user, argument, how)


def _full_text_rows(db, user: str, argument: str, how: str) -> list[tuple[str, str | None, str]]:
    rows = db.raw.execute(
        "SELECT id, key, value FROM memories WHERE user_id = %s AND state = ANY(%s)"
        f" AND to_tsvector('english', coalesce(key, '') || ' ' || value) @@ {FULL_TEXT[how]}",
        (user, list(STATES), argument),
    ).fetchall()
    return [tuple(row) for row in rows]


def test_full_text_candidates_add_nothing_the_scorer_ranks_over_trigrams(
    pg_suite_url: str,
) -> None:
    empty_memory(pg_suite_url)
    data = generate(seed=21, **SIZES["smoke"])  # type: ignore[arg-type]
    filters = dict(table="memories", namespaces=("",), kinds=None, states=STATES)
    added = found = asked = 0
    with MemoryStore(pg_suite_url, config=Config(), clock=fixed(data.now)) as store:
        refs = {m.ref: _write(store, m) for m in data.memories}
        db = store.storage.hot
        for question in data.questions:
            if question.expect is None:
                continue
            asked += 1
            terms = query_terms(question.query)
            user = question.user
            total, mean = keywords.user_rows_stats(db, user_id=user, **filters)
            every = keywords.small_user_rows(
                db, user_id=user, columns=("id", "key", "value"), **filters
            )
            trigrams = keywords.candidate_rows(
                db,
                user_id=user,
                patterns=terms.patterns,
                user_rows=keywords.SCAN_BELOW_ROWS,  # as for a large user: pg_trgm's index
                **filters,
            )
            assert every is not None

            def ranked(rows, terms=terms, total=total, mean=mean) -> list[str]:
                return [s.id for s in score_rows(rows, terms, total=total, mean_length=mean)]

            assert ranked(trigrams) == ranked(every)  # trigrams miss nothing the scorer ranks
            found += refs[question.expect] in ranked(trigrams)[:10]
            have = {row[0] for row in trigrams}
            for how in FULL_TEXT:
                more = [row for row in _full_text(db, user, question.query, how)]
                added += len(ranked([row for row in more if row[0] not in have]))
    assert asked >= 30 and found >= 0.6 * asked  # the set is answered at all
    assert added == 0
