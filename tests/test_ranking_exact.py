"""The search's faster ranking steps give exactly what their plain forms give.

Search orders keyword matches by stable sorts keyed by one field each
(:func:`memkeeper.store.bm25_ties.order_ties`) and reads each candidate's last use as whole
microseconds parsed once per text (:func:`memkeeper.clock.stored_micros`). Both are checked
here against the straightforward forms they replaced: a sort keyed by a tuple per entry, and
``days_between`` of parsed datetimes. Equal is equal to the last bit: a tie broken another
way would be another search result.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from memkeeper.clock import MICROS_PER_DAY, days_between, from_db, micros, stored_micros, to_db
from memkeeper.store.bm25 import Scored
from memkeeper.store.bm25_ties import order_ties


def _specificity(counts: Counter[str], idf: dict[str, float]) -> float:
    """The mean idf, within the matches, of an entry's distinct terms (the former helper)."""
    return sum(map(idf.__getitem__, counts)) / len(counts) if counts else 0.0


def _plain_order_ties(scored: list[Scored], terms_of) -> list[Scored]:  # type: ignore[no-untyped-def]
    """The former form: tuple keys, one idf per term, NamedTuple calls."""
    scored = sorted(scored, key=lambda s: (-s.score, -s.adjacency, s.id))
    tied = {
        i
        for k in range(1, len(scored))
        for i in (k - 1, k)
        if abs(scored[k - 1].score - scored[k].score) <= 1e-12 * max(1.0, abs(scored[k].score))
        and abs(scored[k - 1].adjacency - scored[k].adjacency)
        <= 1e-12 * max(1.0, abs(scored[k].adjacency))
    }
    if not tied:
        return scored
    matches = [terms_of(s.id) for s in scored]
    held: Counter[str] = Counter()
    for counts in matches:
        held.update(counts.keys())
    n = len(scored)
    idf = {t: math.log(1 + (n - m + 0.5) / (m + 0.5)) for t, m in held.items()}
    out = [
        Scored(*s[:4], _specificity(matches[i], idf)) if i in tied else s
        for i, s in enumerate(scored)
    ]
    return sorted(out, key=lambda s: (-s.score, -s.adjacency, -s.specificity, s.id))


@pytest.mark.parametrize("seed", range(40))
def test_order_ties_is_the_plain_sort_to_the_last_bit(seed: int) -> None:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(rng.randint(3, 30))]
    terms = {
        f"id{rng.randrange(10**6):06d}": Counter(rng.choices(words, k=rng.randint(1, 12)))
        for _ in range(rng.randint(1, 120))
    }
    scores = [rng.choice([1.5, 2.25, 0.75, 3.0]) for _ in range(3)] + [rng.random() * 4]
    scored = [
        Scored(
            memory_id,
            rng.choice(scores) + rng.choice([0.0, 0.0, 1e-14, 1e-9]),
            rng.random(),
            rng.choice([0.0, 0.0, 0.5, 1.25]),
        )
        for memory_id in terms
    ]
    expected = _plain_order_ties(list(scored), terms.__getitem__)
    got = order_ties(list(scored), terms.__getitem__)
    assert got == expected
    assert [type(s) for s in got] == [Scored] * len(got)


@pytest.mark.parametrize(
    "earlier, later",
    [
        ("2026-03-29T00:59:59.999999+00:00", "2026-03-29T01:00:00.000001+00:00"),  # DST, UTC
        ("2024-02-28T23:00:00.000000+00:00", "2024-03-01T01:00:00.000000+00:00"),  # leap day
        ("2026-01-31T12:00:00.123456+00:00", "2027-01-31T11:59:59.654321+00:00"),
        ("2027-01-01T00:00:00.000000+00:00", "2026-12-31T00:00:00.000000+00:00"),  # backwards
        ("1970-01-01T00:00:00.000000+00:00", "2999-12-31T23:59:59.999999+00:00"),
    ],
)
def test_days_from_stored_microseconds_are_days_between(earlier: str, later: str) -> None:
    now = from_db(later)
    assert now is not None
    then = from_db(earlier)
    assert then is not None
    days = max(0.0, (micros(now) - stored_micros(earlier)) / MICROS_PER_DAY)
    assert days == days_between(then, now)


def test_microseconds_keep_the_order_of_times() -> None:
    rng = random.Random(7)
    base = datetime(2026, 12, 7, tzinfo=UTC)
    moments = [base + timedelta(microseconds=rng.randrange(10**12)) for _ in range(500)]
    moments += [m + timedelta(microseconds=1) for m in moments[:50]]
    by_timestamp = sorted(moments, key=lambda m: m.timestamp())
    assert sorted(moments, key=lambda m: stored_micros(to_db(m))) == by_timestamp
