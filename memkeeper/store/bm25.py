"""Keyword relevance: Okapi BM25 over one user's own entries, for every user size.

Tokenization (:func:`terms`), the same for queries and entries:

* **English and other spaced scripts:** whole words — runs of letters and digits (``_``
  splits, so ``report_format`` is ``report`` and ``format``), case-folded and lightly
  stemmed (:func:`stem`: plural ``-s``/``-es``/``-ies``, ``-ing``, ``-ed``), so "reports"
  finds ``report_format`` and "deployed" finds "deploy", while "the" never matches
  "others". No stop-word list: BM25's idf already makes a word every entry has weigh next
  to nothing (measured on the recall evaluation, dropping Lucene's English stop words lost
  recall: keyword-only recall@10 expected over ties 0.74-0.80 against 0.81-0.86, seeds 1-10
  and 21). English clitics are no words of their own (:data:`_CLITIC`): "isn't" is
  ``isn``, and a possessive stays bound to its word, "Farid's" being ``farid`` and
  ``farid's`` — never the bare ``s`` that matched everyone's possessives.
  A query term that is no entry's word is taken as a prefix ("pd" finds "pdf"), its BM25
  scaled by the share of the word it is (:func:`_prefix`), so whole words lead.
* **Chinese, Japanese, Korean** (no spaces): each run of such characters is scored by its
  characters (as textbook BM25 over CJK does), so "公司logo" finds "封面加公司logo" through
  ``公`` ``司`` and ``logo``, and a shared character counts by its idf (little when common).
  The run's overlapping two-character pieces (``封面``, ``公司``) are its *pairs*: they do
  not add to the score (counted beside their characters they weighed each shared
  two-character name three times and lost to plain BM25 on the recall evaluation: 28
  against 35 of 80 Chinese questions first), they order entries whose scores are equal, by
  the same BM25 over pairs (:attr:`Scored.adjacency`): an entry holding ``封面`` as a word
  comes before one with ``封`` and ``面`` apart.

Scoring (:func:`score_rows`): an entry's terms are those of its key and value (a key term
weighs :data:`KEY_WEIGHT`), its length their number. With ``N`` the user's entries in the
namespaces, kinds and states searched, ``avgdl`` their mean length (exact for a small
user, whose rows are all read; for a large one their mean in characters, one SQL
aggregate, times the candidates' terms per character) and ``df`` how many of them contain
the term::

    idf(t)   = ln(1 + (N - df + 0.5) / (df + 0.5))
    bm25(d)  = Σ_t idf(t) · tf·(k1 + 1) / (tf + k1·(1 - b + b·len(d)/avgdl)),  k1 1.2, b 0.75

Every statistic is of that user's own rows: another user's entries never change a user's
ranking. The rows are the user's entries containing a query term as a substring (the
candidates of :mod:`memkeeper.storage.keywords`), so ``df`` is exact up to that module's
caps. Entries' term counts are cached per process by text (:data:`CACHE_SIZE`), and a small
user's postings by its rows (:mod:`memkeeper.store.bm25_index`). Equal scores go by their
pairs, then by *specificity* among the matches (:mod:`memkeeper.store.bm25_ties`).
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from memkeeper.store.bm25_ties import order_ties
from memkeeper.store.text_runs import runs

if TYPE_CHECKING:
    from memkeeper.store.bm25_index import RowsIndex

K1 = 1.2
B = 0.75
KEY_WEIGHT = 1
CACHE_SIZE = 50_000
"""Entries whose term counts are kept per process (keyed by their text)."""


def stem(word: str) -> str:
    """A light English stem: enough that plural and -ing/-ed forms meet their root."""
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("ing") and len(word) > 5:
        return _undouble(word[:-3])
    if word.endswith("ed") and len(word) > 4:
        return _undouble(word[:-2])
    if word.endswith(("ches", "shes", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _undouble(root: str) -> str:
    if len(root) >= 3 and root[-1] == root[-2] and root[-1] not in "lsz":
        return root[:-1]
    return root


_CLITIC = re.compile(r"(?<=[^\W\d_])['\u2019](s|t|re|ve|ll|d|m)(?![^\W_])", re.IGNORECASE)
"""An English clitic after an apostrophe: the possessive ``'s`` and the contractions
(``n't``'s ``t``, ``'re``, ``'ve``, ``'ll``, ``'d``, ``'m``). None is a word of its own
(:func:`_words`): as a term, ``s`` matched every entry with a possessive in it, whoever it
was about — "Dev's favourite dish is dumplings" for "what is Farid's profession?", ranked
above "Farid works as a radiologist at the hospital" on the recall evaluation."""

_POSSESSOR = re.compile(r"([^\W_]*[^\W\d_])['\u2019]s(?![^\W_])", re.IGNORECASE)
"""A possessive's word: where :data:`_CLITIC` drops an ``'s``."""


def _words(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The text's runs (:func:`memkeeper.store.text_runs.runs`) with English clitics
    dropped (:data:`_CLITIC`), and the words a possessive ``'s`` was attached to: the
    possessive stays bound to its word, one term ``farid's`` (:func:`_possessive`) beside
    ``farid``, so "Farid's celebration" finds "Farid's birthday party" and not "Dev's"."""
    if "'" not in text and "\u2019" not in text:
        return runs(text), []
    owners = [m.group(1) for m in _POSSESSOR.finditer(text)]
    return runs(_CLITIC.sub("", text)), owners


def _possessive(word: str) -> str:
    return stem(word.lower()) + "'s"


def terms(text: str) -> list[str]:
    """The text's scored terms (repeats kept): words and CJK characters in order, then a
    term for each possessive (:func:`_words`)."""
    out: list[str] = []
    found, owners = _words(text)
    for cjk, word in found:
        out += list(cjk) if cjk else [stem(word.lower())]
    return out + [_possessive(word) for word in owners]


def pairs(text: str) -> list[str]:
    """The text's CJK pairs: each CJK run's overlapping two-character pieces, in order."""
    return [run[i : i + 2] for run, _ in runs(text) for i in range(len(run) - 1)]


@dataclass(frozen=True)
class QueryTerms:
    """A query's distinct terms, for each the substring its entries must contain, and its
    distinct CJK pairs (the tie-break)."""

    terms: tuple[str, ...]
    patterns: tuple[str, ...]
    pairs: tuple[str, ...] = ()


def query_terms(query: str) -> QueryTerms:
    """The query's distinct terms and their candidate patterns.

    A stemmed term's pattern is the common prefix of the word and its stem ("replies" →
    ``repl``), so every entry whose stem is the term contains the pattern.
    """
    found: dict[str, str] = {}
    split, owners = _words(query)
    for cjk, word in split:
        if cjk:
            for char in cjk:
                found.setdefault(char, char)
            continue
        folded = word.lower()
        stemmed = stem(folded)
        found.setdefault(stemmed, _common_prefix(folded, stemmed))
    for word in owners:  # an entry holding the possessive holds its word
        folded = word.lower()
        found.setdefault(_possessive(word), _common_prefix(folded, stem(folded)))
    return QueryTerms(tuple(found), tuple(found.values()), tuple(dict.fromkeys(pairs(query))))


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n] or a


_cache_lock = threading.Lock()
_cache: OrderedDict[tuple[str, str], Counts] = OrderedDict()


class Counts(NamedTuple):
    """An entry's weighted term counts, its length (their total) and its pair counts."""

    terms: Counter[str]
    length: int
    pairs: Counter[str]


def entry_counts(key: str | None, value: str) -> Counts:
    """An entry's weighted term and pair counts (key ones count :data:`KEY_WEIGHT` times),
    cached."""
    cache_key = (key or "", value)
    counts = _cache.get(cache_key)  # a dict read is atomic; writes take the lock
    if counts is not None:
        return counts
    found, paired = Counter(terms(value)), Counter(pairs(value))
    for term in terms(key or ""):
        found[term] += KEY_WEIGHT
    for pair in pairs(key or ""):
        paired[pair] += KEY_WEIGHT
    counts = Counts(found, found.total(), paired)
    with _cache_lock:
        _cache[cache_key] = counts
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return counts


def score_rows(
    rows: Iterable[Sequence[Any]],
    query: QueryTerms,
    *,
    total: int,
    mean_length: float,
    index: RowsIndex | None = None,
    mean_terms: float | None = None,
) -> list[Scored]:
    """BM25 of each row ``(id, key, value)`` that contains a query term, best first (equal
    scores by their pairs' BM25, then specificity, then id), with its coverage; ``total`` and
    ``mean_length`` are the user's entry count and mean length in characters, ``mean_terms``
    (when every row of the user was read) the exact ``avgdl``; ``index``, the rows' postings
    (:mod:`memkeeper.store.bm25_index`), gives the matches and, on a tie, their terms."""
    rows = list(rows)

    def find(wanted: Sequence[str], exact: bool) -> tuple[list[Match], Counter[str]]:
        if index is not None:
            return index.matches(wanted, exact=exact)
        return _matches(rows, wanted, exact=exact)

    matched, df = find(query.terms, True)
    missing = [t for t in query.terms if not df[t]]
    if missing:  # a term no entry has as a word: taken as a prefix ("pd" finds "pdf")
        more, more_df = find(missing, False)
        df.update(more_df)
        merged = {m[0]: m for m in matched}
        for memory_id, chars, length, found in more:
            before = merged.get(memory_id, (memory_id, chars, length, []))[3]
            merged[memory_id] = (memory_id, chars, length, before + found)
        matched = list(merged.values())
    if not matched:
        return []
    n = max(total, len(matched))
    if mean_terms is not None:
        avgdl = mean_terms
    else:
        # Terms: the user's mean in characters (one SQL aggregate) x the candidates' terms/char.
        chars = sum(c for _, c, _, _ in matched) or 1
        avgdl = max(mean_length, 1.0) * sum(t for _, _, t, _ in matched) / chars
    avgdl = avgdl if avgdl > 0 else 1.0
    idf = {t: _idf(n, df[t]) for t in query.terms}
    whole = sum(idf.values()) or 1.0
    ids = {m[0] for m in matched}
    paired = _pairs_found([r for r in rows if r[0] in ids] if query.pairs else [], query.pairs)
    pair_df = Counter(p for found in paired.values() for p, _ in found)
    scored: list[Scored] = []
    new = tuple.__new__  # a NamedTuple's own call costs a Python frame per match
    pair_idf = {p: _idf(n, df) for p, df in pair_df.items()}
    for memory_id, _, length, found in matched:  # plain loops: the hot path of a search
        norm = K1 * (1 - B + B * length / avgdl)
        score = covered = adjacency = 0.0
        for t, tf, share in found:
            weight = share * idf[t]
            score += weight * tf * (K1 + 1) / (tf + norm)
            covered += weight
        for p, tf in paired.get(memory_id, ()):
            adjacency += pair_idf[p] * tf * (K1 + 1) / (tf + norm)
        scored.append(new(Scored, (memory_id, score, covered / whole, adjacency, 0.0)))
    if index is not None:  # a small user's whole set: its postings know every row's terms
        return order_ties(scored, index.terms_by_id().__getitem__)
    found_terms: dict[str, Counter[str]] = {}

    def terms_of(memory_id: str) -> Counter[str]:  # read only when two matches tie
        if not found_terms:
            found_terms.update((r[0], entry_counts(r[1], r[2]).terms) for r in rows if r[0] in ids)
        return found_terms[memory_id]

    return order_ties(scored, terms_of)


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _pairs_found(
    rows: Sequence[Sequence[Any]], wanted: Sequence[str]
) -> dict[str, list[tuple[str, int]]]:
    """The query pairs each of the matched rows holds, with their counts (a pair's row
    holds its characters, so it is among the matched)."""
    out: dict[str, list[tuple[str, int]]] = {}
    for memory_id, key, value in rows:
        counts = entry_counts(key, value).pairs
        if found := [(p, counts[p]) for p in wanted if p in counts]:
            out[memory_id] = found
    return out


class Scored(NamedTuple):
    """One keyword match: its BM25 score, its *coverage* — the share of the query's idf its
    matched terms carry (1: every term found; a name alone in a long question, little) —
    its *adjacency*, the BM25 of the query's CJK pairs it holds (orders equal scores), and,
    when it ties another match, its *specificity* (orders equal scores and adjacencies:
    :mod:`memkeeper.store.bm25_ties`)."""

    id: str
    score: float
    coverage: float
    adjacency: float = 0.0
    specificity: float = 0.0


Match = tuple[str, int, int, list[tuple[str, int, float]]]
"""(id, characters, terms, [(query term, tf, share)]) of a row that matched; ``share`` is 1
for a whole word, the prefix's share of its word for a prefix match (:func:`_prefix`)."""


def _matches(
    rows: Sequence[Sequence[Any]], wanted: Sequence[str], *, exact: bool
) -> tuple[list[Match], Counter[str]]:
    """Each row containing a wanted term (as a word, or a word's prefix): (id, characters,
    terms, [(term, tf, share)]), and each term's document frequency among them."""
    matched: list[Match] = []
    df: Counter[str] = Counter()
    cached = _cache.get  # a dict read is atomic; entry_counts fills what is missing
    for memory_id, key, value in rows:
        counts, length, _ = cached((key or "", value)) or entry_counts(key, value)
        if exact:
            found = [(t, counts[t], 1.0) for t in wanted if t in counts]
        else:
            found = [(t, *hit) for t in wanted if (hit := _prefix(counts, t))[0]]
        if found:
            matched.append((memory_id, len(key or "") + len(value), length, found))
            df.update(t for t, _, _ in found)
    return matched, df


def _prefix(counts: Counter[str], prefix: str) -> tuple[int, float]:
    """How often the entry holds a word starting with ``prefix``, and the largest share of
    such a word the prefix is ("pd" of "pdf": 2/3; "car" of "carla": 3/5; "in" of "ines":
    1/2). The share scales the term's BM25, so a partial match weighs less than a whole word
    of the same rarity: "car" no longer ties Carla's entries with Ann's for "what car does
    Ann drive?" (counted whole, it did, and lost to textbook BM25)."""
    tf, share = 0, 0.0
    for term, n in counts.items():
        if term.startswith(prefix):
            tf, share = tf + n, max(share, len(prefix) / len(term))
    return tf, share


def reset() -> None:
    """Forget the cached term counts (tests)."""
    with _cache_lock:
        _cache.clear()


def keyword_scores(
    db: Any,
    *,
    table: str,
    user_id: str,
    namespaces: Sequence[str],
    query: str,
    kinds: Sequence[str] | None,
    states: Sequence[str],
) -> list[Scored]:
    """Ids of ``user_id``'s entries in ``table`` matching ``query``, by BM25, best first.

    Only rows of ``user_id`` in ``namespaces`` with a state in ``states`` (and a kind in
    ``kinds`` unless None) are candidates and only they make the statistics.
    """
    from memkeeper.storage.keywords import candidate_rows, user_rows_stats

    wanted = query_terms(query)
    if not wanted.terms:
        return []
    filters: dict[str, Any] = dict(
        table=table, user_id=user_id, namespaces=namespaces, kinds=kinds, states=states
    )
    total, mean_length = user_rows_stats(db, **filters)
    if total == 0:
        return []
    rows = candidate_rows(db, patterns=wanted.patterns, user_rows=total, **filters)
    return score_rows(rows, wanted, total=total, mean_length=mean_length)


def score_all(rows: Sequence[Sequence[Any]], query: str) -> list[Scored]:
    """:func:`keyword_scores` over a small user's whole set ``(id, key, value)`` already
    read: the same statistics, with ``avgdl`` exact (every row's length in terms is
    known: the estimate from characters, which a large user's SQL aggregate needs, moved
    CJK entries, whose ASCII keys have many characters per term, by a rank against
    textbook BM25); every row is a candidate (its cached terms decide)."""
    from memkeeper.store.bm25_index import rows_index

    wanted = query_terms(query)
    if not wanted.terms or not rows:
        return []
    index = rows_index(rows)
    return score_rows(
        index.rows,
        wanted,
        total=len(rows),
        mean_length=index.total_chars / len(rows),
        index=index,
        mean_terms=index.total_terms / len(rows),
    )
