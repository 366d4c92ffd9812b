"""Search fusion (issue 21): relative score fusion, the outlier admission under the
similarity floor, a no-match query staying silent, and prefix matches weighing less.

The entries' vectors are chosen (stored as the index job stores them) against the fake
embeddings server's vector of the query, so each test sets the similarities it needs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_embeddings import DIMS, FakeEmbeddings, embed_config, fake_vector
from helpers.backends import empty_memory
from helpers.databases import is_postgres

from memkeeper import MemoryStore
from memkeeper.records import Memory
from memkeeper.storage.vectors import embedding_text, store_vectors, text_hash
from memkeeper.store import fusion, semantic
from memkeeper.store.bm25 import entry_counts, query_terms, score_all, score_rows

pytestmark = pytest.mark.both_backends

KEY_ENV = "ZHIPUAI_API_KEY"
QUERY = "which food makes Ann sick"
FILLERS = 40  # enough entries for a distribution (fusion.OUTLIER_MIN_ENTRIES)


@pytest.fixture(autouse=True)
def fresh_semantic(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("MEMKEEPER_RETRIEVAL", raising=False)
    monkeypatch.setenv(KEY_ENV, "fake.key-for-tests")
    semantic.reset()
    yield
    semantic.reset()


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector]


def _at_similarity(query: list[float], cosine: float, rng: random.Random) -> list[float]:
    """A unit vector whose cosine with the unit ``query`` is ``cosine``."""
    noise = [rng.gauss(0, 1) for _ in query]
    along = sum(n * q for n, q in zip(noise, query, strict=True))
    orthogonal = _unit([n - along * q for n, q in zip(noise, query, strict=True)])
    rest = math.sqrt(1 - cosine * cosine)
    return [cosine * q + rest * o for q, o in zip(query, orthogonal, strict=True)]


def _give_vectors(store: MemoryStore, cosines: dict[str, float], seed: int = 5) -> None:
    """Store each entry's vector at its cosine with the query (unlisted entries: ~0)."""
    rng = random.Random(seed)
    query = _unit(fake_vector(QUERY, DIMS))
    rows = []
    for m in store.list_memories():
        text = embedding_text(m.kind, m.key, m.value)
        cosine = cosines.get(m.id, rng.gauss(0, 0.04))
        vector = _at_similarity(query, cosine, rng)
        rows.append((m.id, store.config.search.embedding_model, DIMS, text_hash(text), vector))
    with store.storage.lock:
        store_vectors(store.storage.hot, rows)


def _fillers(store: MemoryStore) -> list[Memory]:
    places = ["garden", "museum", "bakery", "harbour", "station", "library", "market"]
    return [
        store.add_note("u", f"talked to Ben about the {places[i % 7]} for an hour, #{i}")
        for i in range(FILLERS)
    ]


def _store(db_path: Path, url: str, **search: Any) -> MemoryStore:
    return MemoryStore(db_path, config=embed_config(url, search=search))


def test_an_outlier_under_the_floor_is_found(db_path: Path) -> None:
    """A cosine of 0.25 (under min_similarity 0.3) far above every other entry's: in the
    vector list by the outlier rule, so a paraphrase sharing no word with it finds it."""
    with FakeEmbeddings() as fake, _store(db_path, fake.url) as store:
        _fillers(store)
        answer = store.add_note("u", "she is allergic to peanuts")
        _give_vectors(store, {answer.id: 0.25})
        hits = store.search("u", QUERY, limit=3)
    assert [h.memory.id for h in hits] == [answer.id]
    assert hits[0].similarity == pytest.approx(0.25, abs=1e-3)


def test_without_the_outlier_rule_the_floor_alone_decides(db_path: Path) -> None:
    with FakeEmbeddings() as fake, _store(db_path, fake.url, outlier_p=0) as store:
        _fillers(store)
        answer = store.add_note("u", "she is allergic to peanuts")
        _give_vectors(store, {answer.id: 0.25})
        assert store.search("u", QUERY, limit=3) == []


def test_a_query_that_matches_nothing_returns_nothing(db_path: Path) -> None:
    """No shared word and no entry standing out of the user's similarities: no hit, even
    though one entry is the closest (the outlier rule is a test, not a top-1)."""
    with FakeEmbeddings() as fake, _store(db_path, fake.url) as store:
        fillers = _fillers(store)
        _give_vectors(store, {fillers[3].id: 0.12})
        hits = store.search("u", QUERY, limit=10)
    assert hits == [] and hits.semantic


def test_entries_all_alike_have_no_outlier(db_path: Path) -> None:
    """Every entry at the same cosine (0.1) but one at 0.1 + 1e-4: a spread of float noise,
    no distribution, so no outlier and nothing returned."""
    with FakeEmbeddings() as fake, _store(db_path, fake.url) as store:
        fillers = _fillers(store)
        cosines = {m.id: 0.1 for m in fillers} | {fillers[0].id: 0.1 + 1e-4}
        _give_vectors(store, cosines)
        assert store.search("u", QUERY, limit=3) == []


def test_outlier_threshold_grows_with_the_entries() -> None:
    """The Bonferroni quantile: what any of n unrelated entries reaches with outlier_p."""
    settings = embed_config("http://127.0.0.1:9").search
    assert fusion.outlier_z(settings, fusion.OUTLIER_MIN_ENTRIES - 1) == math.inf
    assert fusion.outlier_z(settings, 260) == pytest.approx(3.96, abs=0.01)
    assert fusion.outlier_z(settings, 500) > fusion.outlier_z(settings, 260)
    off = settings.model_copy(update={"outlier_p": 0.0})
    assert fusion.outlier_z(off, 500) == math.inf


@pytest.mark.parametrize(("mode", "first"), [("relative", "answer"), ("rrf", "named")])
def test_a_clear_vector_hit_beats_a_weak_keyword_list(db_path: Path, mode: str, first: str) -> None:
    """The keyword list of a paraphrase is every entry sharing the name; its best (a short
    entry about Ann) is also the vector list's second. By rank (rrf) the two ranks 1 and 2
    beat the vector list's clear best; by relative scores the clear best leads (its
    cosine 0.6 against 0.35, the rest about 0)."""
    with FakeEmbeddings() as fake, _store(db_path, fake.url, fusion=mode) as store:
        _fillers(store)
        named = store.remember("u", "ann", "Ann")
        for i in range(5):
            store.add_note("u", f"Ann called about the weekend plans, number {i}")
        answer = store.add_note("u", "she is allergic to peanuts")
        _give_vectors(store, {answer.id: 0.6, named.id: 0.35})
        hits = store.search("u", QUERY, limit=3)
    expected = {"answer": answer.id, "named": named.id}[first]
    assert hits[0].memory.id == expected
    assert {answer.id, named.id} <= {h.memory.id for h in hits}


def _another_memory(db_path: Path | str, name: str) -> Path | str:
    """A new, empty memory: another file on SQLite; on PostgreSQL the test database, emptied."""
    if is_postgres(db_path):
        empty_memory(str(db_path))
        return db_path
    return Path(db_path).with_name(name)


def test_a_small_user_is_fused_by_rank(db_path: Path) -> None:
    """Under OUTLIER_MIN_ENTRIES vectors there is no distribution to scale by: the
    relative setting fuses by rank, as rrf does (the same scores)."""
    scores = {}
    for mode in ("relative", "rrf"):
        path = _another_memory(db_path, f"{mode}.db")
        with FakeEmbeddings() as fake, _store(path, fake.url, fusion=mode) as store:
            store.remember("u", "ann", "Ann")
            store.add_note("u", "Ann called about the weekend plans")
            store.add_note("u", "she is allergic to peanuts")
            entries = sorted(store.list_memories(), key=lambda m: m.value)
            _give_vectors(store, {m.id: 0.6 - 0.1 * i for i, m in enumerate(entries)})
            scores[mode] = [round(h.score, 9) for h in store.search("u", QUERY, limit=3)]
        semantic.reset()
    assert scores["relative"] == scores["rrf"] and len(scores["rrf"]) == 3


def test_a_prefix_match_weighs_less_than_the_whole_word() -> None:
    """'car' is no entry's word, so it is taken as a prefix — of 'carla'. Counted whole it
    put Carla's entry (her name twice) before Ann's for a question about Ann; scaled by the
    share of the word (3/5) it comes after, and a prefix alone still finds ('pd': 'pdf')."""
    rows = [
        ("ann", None, "Ann drives a Subaru to the office"),
        ("carla", "pet_carla", "Carla adopted a ferret"),
        *((f"f{i}", None, f"lunch near the station, note {i}") for i in range(6)),
        ("pdf", "report_format", "pdf please"),
    ]
    found = [s.id for s in score_all(rows, "what car does Ann commute in?")]
    assert found[:2] == ["ann", "carla"]
    (carla,) = [s for s in score_all(rows, "car") if s.id == "carla"]
    assert 0 < carla.coverage < 1
    assert [s.id for s in score_all(rows, "pd")] == ["pdf"]


def test_kept_postings_score_as_the_row_by_row_scan() -> None:
    """score_all reads matches from the rows' kept postings; the scores are exactly those
    of the scan over every row, for whole words, prefixes and CJK pairs."""
    rng = random.Random(3)
    words = ["report", "reports", "format", "pdf", "carla", "car", "ines", "封面", "公司", "logo"]
    rows = [
        (f"m{i}", rng.choice([None, f"k_{rng.choice(words)}"]), " ".join(rng.sample(words, 3)))
        for i in range(60)
    ]
    chars = sum(len(k or "") + len(v) for _, k, v in rows)
    for query in ("report format", "pd", "ca", "封面公司", "what car does Ines use", "zzz"):
        wanted = query_terms(query)
        mean_terms = sum(entry_counts(k, v).length for _, k, v in rows) / len(rows)
        scan = score_rows(
            rows, wanted, total=len(rows), mean_length=chars / len(rows), mean_terms=mean_terms
        )
        assert score_all(rows, query) == scan
        assert score_all(rows, query) == scan  # the kept postings, a second time


def test_a_large_users_vector_list_holds_only_the_kinds_asked_for(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the small-user scan (forced here by a low SCAN_BELOW_ROWS), the vector list is read
    from the vectors table: with ``kinds`` it must hold those kinds only, or entries of other
    kinds more similar to the query fill its ``vector_candidates`` and push the asked-for
    entry out, as the small-user path (which reads the kinds asked for) never does."""
    from memkeeper.storage import keywords

    monkeypatch.setattr(keywords, "SCAN_BELOW_ROWS", 10)  # 12 facts: past the scan
    with FakeEmbeddings() as fake, _store(db_path, fake.url, vector_candidates=20) as store:
        notes = _fillers(store)
        for i in range(11):
            store.remember("u", f"hobby_{i}", f"collects stamps of year {1900 + i}")
        answer = store.remember("u", "diet", "no shellfish at all")
        _give_vectors(store, {**{m.id: 0.7 for m in notes}, answer.id: 0.5})
        hits = store.search("u", QUERY, kinds=["fact"], limit=3)
    assert [h.memory.id for h in hits] == [answer.id]


def _ann_and_a_long_answer(store: MemoryStore, answer_cosine: float) -> Memory:
    """45 entries at cosines ±0.04 (mean ~0, spread 0.04), five short notes about Ann among
    them, and a long note about Ann that answers the query at ``answer_cosine``: BM25
    puts it last of Ann's six (its only shared word, the name, in the longest entry)."""
    others = [*_fillers(store)]
    others += [
        store.add_note("u", f"Ann called about the weekend plans, number {i}") for i in range(5)
    ]
    answer = store.add_note(
        "u", "Ann told me that she is allergic to peanuts and must avoid them at dinner"
    )
    cosines = {m.id: 0.04 if i % 2 == 0 else -0.04 for i, m in enumerate(others)}
    _give_vectors(store, cosines | {answer.id: answer_cosine})
    return answer


def test_a_keyword_match_whose_similarity_stands_out_counts(db_path: Path) -> None:
    """The answer shares only the name with the query; its cosine 0.15 is 3.2 standard
    deviations up — under the floor (0.3) and under the bar of 46 entries (3.52), so not
    in the vector list: as a keyword match its similarity counts all the same, and it
    leads the matches that share the name and nothing else (relative fusion)."""
    with FakeEmbeddings() as fake, _store(db_path, fake.url, fusion="relative") as store:
        answer = _ann_and_a_long_answer(store, 0.15)
        assert fusion.outlier_z(store.config.search, 46) > 3.3
        hits = store.search("u", QUERY, limit=3)
    assert hits[0].memory.id == answer.id
    assert hits[0].similarity == pytest.approx(0.15, abs=2e-3)


def test_a_keyword_match_closer_than_average_counts_its_similarity(db_path: Path) -> None:
    """The same answer at cosine 0.11 (2.5 standard deviations up: no outlier of the
    user's entries nor of the keyword list's 6 matches, 2.94): a keyword match, so what
    its vector says counts (fusion.keyword_similar) and it leads — BM25 alone puts it last
    of Ann's six, the longest. The other matches count their similarity when above the
    mean (0.04) and none when below (-0.04), and no entry that shares no word with the
    query is returned (relative fusion)."""
    with FakeEmbeddings() as fake, _store(db_path, fake.url, fusion="relative") as store:
        answer = _ann_and_a_long_answer(store, 0.11)
        hits = store.search("u", QUERY, limit=10)
        by_words = [k.id for k in score_all(_rows(store), QUERY)]
    assert by_words[-1] == answer.id  # the keyword list alone: last
    assert hits[0].memory.id == answer.id
    assert hits[0].similarity == pytest.approx(0.11, abs=2e-3)
    assert len(hits) == 6 and all(h.memory.value.startswith("Ann") for h in hits)
    assert {round(h.similarity, 2) for h in hits[1:]} <= {0.04, 0.0}


def _rows(store: MemoryStore) -> list[tuple[str, str | None, str]]:
    return [(m.id, m.key, m.value) for m in store.list_memories()]


def test_keyword_similar_takes_the_matches_closer_than_the_mean() -> None:
    """The rule itself: keyword matches among the most similar entries with a share of
    the vector list's scale above 0 (closer than the user's mean), in the keyword order."""
    share = {"a": 0.4, "b": -0.1, "c": 0.0, "d": 0.9}
    assert fusion.keyword_similar(["a", "b", "c", "e", "d"], share) == ["a", "d"]


def test_anchored_an_unsure_vector_list_changes_nothing_of_the_keyword_ranking(
    db_path: Path,
) -> None:
    """The answer at cosine 0.11 (2.5 standard deviations up, under sure_z_low 3 here): the
    anchored fusion keeps the keyword ranking whole, as keyword-only search has it."""
    from datetime import UTC, datetime

    from memkeeper.clock import fixed

    with FakeEmbeddings() as fake, _store(db_path, fake.url, sure_z_low=3.0) as store:
        store.clock = fixed(datetime(2026, 1, 1, tzinfo=UTC))  # uses tie alike in both
        _ann_and_a_long_answer(store, 0.11)
        hits = store.search("u", QUERY, limit=10)
        semantic.reset()
        store.config = store.config.model_copy(
            update={"search": store.config.search.model_copy(update={"embedder": "local"})}
        )
        keyword_only = store.search("u", QUERY, limit=10)
    assert hits.semantic and not keyword_only.semantic
    assert [h.memory.id for h in hits] == [h.memory.id for h in keyword_only]


def test_anchored_a_sure_vector_list_reorders_within_a_margin_and_adds() -> None:
    settings = embed_config("http://127.0.0.1:9").search
    assert fusion.sureness(settings, 1.0) == 0.0 and fusion.sureness(settings, 99.0) == 1.0
    assert 0 < fusion.sureness(settings, 4.0) < 1
    keyword = [("strong", 10.0, 0.0, 0.0), ("weak", 5.0, 0.0, 0.0), ("weaker", 4.5, 0.0, 0.0)]
    share = {"weaker": 1.0, "new": 0.9, "strong": 0.0}
    unsure = fusion.anchored(settings, keyword, [("new", 0.5)], share, 1.0, 0.0)
    assert unsure == {"strong": 1.0, "weak": 0.5, "weaker": 0.45}
    sure = fusion.anchored(settings, keyword, [("new", 0.5)], share, 1.0, 1.0)
    order = sorted(sure, key=lambda i: -sure[i])
    assert order[0] == "strong"  # a strong keyword match is never displaced
    assert sure["weaker"] > sure["weak"]  # reordered within its margin
    assert "new" in sure and sure["new"] < sure["strong"]  # a vector hit joins the list
    alone = fusion.anchored(settings, [], [("new", 0.5)], share, 0.0, 0.2)
    assert alone == {"new": 0.9}  # no keyword match: the vector list alone ranks


def test_anchored_a_weak_keyword_list_lets_a_standing_out_entry_pass() -> None:
    """ "where does the user live?" matching only "the" (coverage 0.07): the entry 2.1
    standard deviations up joins though not admitted, and passes the stopword matches."""
    settings = embed_config("http://127.0.0.1:9").search
    keyword = [("the-1", 3.0, 0.0, 0.0), ("the-2", 2.0, 0.0, 0.0)]
    share = {"city": 1.0, "the-1": 0.9, "the-2": 0.1}
    zscore = {"city": 2.1, "the-1": 1.8, "the-2": 0.2}
    fused = fusion.anchored(settings, keyword, [], share, 0.07, 0.02, zscore)
    assert max(fused, key=fused.__getitem__) == "city"
    strong = fusion.anchored(settings, keyword, [], share, 1.0, 0.02, zscore)
    assert "city" not in strong  # a strong keyword list: only admitted entries join


def test_anchored_a_strong_keyword_lists_best_match_stays_first_unless_the_vectors_are_sure() -> (
    None
):
    """A second keyword match close behind the first, which the vector list favours and the
    first it does not: added and lifted, it would pass the first. With the list less than
    half sure it stays second, the first raised to stay ahead by more than the prior can
    move (its 1 %); sure, or under a weak keyword list, it passes. Unless a vector raised
    another entry, the keyword relevances are left as they are."""
    settings = embed_config("http://127.0.0.1:9").search
    keyword = [("first", 10.0, 0.0, 0.0), ("close", 9.5, 0.0, 0.0), ("far", 2.0, 0.0, 0.0)]
    share = {"close": 1.0, "first": 0.0, "far": 0.0}
    unsure = fusion.PASS_FIRST_SURE - 0.1
    fused = fusion.anchored(settings, keyword, [("close", 0.6)], share, 0.8, unsure)
    assert fused["close"] > 0.8  # the vectors raised it above the first's 0.8 ...
    assert fused["first"] >= fused["close"] * (1 + settings.prior_weight)  # ... it stays ahead
    assert fused["far"] == pytest.approx(0.8 * 0.2)
    untouched = fusion.anchored(settings, keyword, [], {"first": 1.0}, 0.8, unsure)
    assert untouched["close"] == pytest.approx(0.8 * 0.95)  # nothing raised: keyword-only's
    assert untouched["first"] == pytest.approx(0.8 * (1 + settings.weight_vector_reorder * unsure))
    sure = fusion.anchored(settings, keyword, [("close", 0.6)], share, 0.8, fusion.PASS_FIRST_SURE)
    assert sure["close"] > sure["first"]
    weak = fusion.anchored(settings, keyword, [("close", 0.6)], share, 0.1, unsure)
    assert weak["close"] > weak["first"]


def test_anchored_a_partial_match_of_a_long_question_counts_as_strong() -> None:
    """A best keyword relevance of 0.2 (a long question's real but partial match, as on
    LoCoMo's coverage 0.25) is at or above weak_keyword_relevance (0.15): kept first while
    the vectors are unsure. Under 0.15 (a stopword's 0.07) the vectors may pass it."""
    settings = embed_config("http://127.0.0.1:9").search
    assert settings.weak_keyword_relevance == 0.15
    keyword = [("first", 10.0, 0.0, 0.0), ("close", 9.5, 0.0, 0.0)]
    share = {"close": 1.0, "first": 0.0}
    unsure = fusion.PASS_FIRST_SURE - 0.1
    partial = fusion.anchored(settings, keyword, [("close", 0.6)], share, 0.2, unsure)
    assert partial["first"] > partial["close"]
    stopword = fusion.anchored(settings, keyword, [("close", 0.6)], share, 0.07, unsure)
    assert stopword["close"] > stopword["first"]
