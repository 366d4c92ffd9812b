"""A small user's keyword postings, kept between searches.

Search reads a small user's whole set of entries (``(id, key, value)``) on every query and
scores it with BM25 (:func:`memkeeper.store.bm25.score_all`). Finding the rows that hold a
query term row by row cost about a third of a search of 500 entries; :class:`RowsIndex`
keeps, for one exact set of rows, each term's rows (the postings) and the set's length in
characters and in terms, so a query reads the postings of its own terms only. The index is
the rows' own: it is kept per process by the rows themselves (:data:`KEPT` sets, least
recently used first out), so any change of an entry — a new value, a new entry, one gone —
is another set and another index, never a stale one. The matches it gives are exactly those of the
row-by-row scan (a test compares them).
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import Any

KEPT = 64
"""Row sets whose postings are kept per process (users searched recently)."""

_lock = threading.Lock()
_kept: OrderedDict[tuple[tuple[Any, ...], ...], RowsIndex] = OrderedDict()


class RowsIndex:
    """The postings of one set of rows ``(id, key, value)``."""

    def __init__(self, rows: tuple[tuple[Any, ...], ...]) -> None:
        from memkeeper.store.bm25 import entry_counts

        self.rows = rows
        self.counts = [entry_counts(key, value) for _, key, value in rows]
        self.chars = [len(key or "") + len(value) for _, key, value in rows]
        self.total_chars = sum(self.chars)
        self.total_terms = sum(counts.length for counts in self.counts)
        postings: dict[str, list[int]] = {}
        for position, counts in enumerate(self.counts):
            for term in counts.terms:
                postings.setdefault(term, []).append(position)
        self.postings = postings
        # A whole word's match of each row as score_rows takes it, made once per set: a
        # query's exact matches are these, in the order of its terms.
        self.posted = {
            term: [(p, (term, self.counts[p].terms[term], 1.0)) for p in positions]
            for term, positions in postings.items()
        }
        self.heads = [
            (row[0], chars, counts.length)
            for row, chars, counts in zip(rows, self.chars, self.counts, strict=True)
        ]
        self._terms_by_id: dict[str, Counter[str]] | None = None

    def terms_by_id(self) -> dict[str, Counter[str]]:
        """Each row's term counts by its id (made on first use: only a search whose
        matches tie needs them, :mod:`memkeeper.store.bm25_ties`)."""
        if self._terms_by_id is None:  # two threads at once make the same dict
            pairs = zip(self.rows, self.counts, strict=True)
            self._terms_by_id = {row[0]: counts.terms for row, counts in pairs}
        return self._terms_by_id

    def matches(
        self, wanted: Sequence[str], *, exact: bool
    ) -> tuple[list[tuple[str, int, int, list[tuple[str, int, float]]]], Counter[str]]:
        """What :func:`memkeeper.store.bm25._matches` gives for these rows: each row
        holding a wanted term as a word (``exact``) or a word's prefix, with (term, tf,
        share) in the order of ``wanted``, and each term's document frequency."""
        found: dict[int, list[tuple[str, int, float]]] = {}
        df: Counter[str] = Counter()
        for term in wanted:
            if exact:
                posted = self.posted.get(term, ())
                for position, match in posted:
                    found.setdefault(position, []).append(match)
                df[term] += len(posted)
                continue
            hits: dict[int, tuple[int, float]] = {}
            for word, positions in self.postings.items():
                if word.startswith(term):
                    share = len(term) / len(word)
                    for position in positions:
                        tf, best = hits.get(position, (0, 0.0))
                        hits[position] = (tf + self.counts[position].terms[word], max(best, share))
            for position, (tf, share) in hits.items():
                found.setdefault(position, []).append((term, tf, share))
            df[term] += len(hits)
        heads = self.heads
        return [(*heads[p], found[p]) for p in sorted(found)], df


def rows_index(rows: Sequence[Sequence[Any]]) -> RowsIndex:
    """The postings of exactly these rows, made once and kept (:data:`KEPT`)."""
    key = tuple(map(tuple, rows))
    with _lock:
        index = _kept.get(key)
        if index is not None:
            _kept.move_to_end(key)
            return index
    index = RowsIndex(key)
    with _lock:
        _kept[key] = index
        while len(_kept) > KEPT:
            _kept.popitem(last=False)
    return index


def reset() -> None:
    """Forget the kept postings: after every erasure (no erased value stays kept), in tests."""
    with _lock:
        _kept.clear()
