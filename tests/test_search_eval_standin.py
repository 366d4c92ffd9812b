"""The recall evaluation's embeddings stand-in keeps its own tokenization (issue 21).

Search's terms (:func:`memkeeper.store.bm25.terms`) are what ranking changes tune; the
stand-in's vectors are what the dense baseline and memkeeper's hybrid are measured with.
Were they the same function, a change of search's terms would change the query's vectors
but not the stored entries' (embedded before) and move the baseline with them.
"""

from __future__ import annotations

import re

import pytest

from memkeeper.bench import embed_standin
from memkeeper.store import bm25

TEXT = "Ann's reports: report_format 封面公司"


def test_the_standins_terms_are_searchs_but_for_clitics() -> None:
    """The stand-in keeps the possessive's bare ``s`` (its vectors were measured so);
    search binds it to its word (memkeeper.store.bm25._CLITIC) and is otherwise the same."""
    standin = embed_standin.standin_terms(TEXT)
    assert bm25.terms(TEXT) == [t for i, t in enumerate(standin) if i != 1] + ["ann's"]
    assert embed_standin.standin_terms(TEXT) == [
        "ann", "s", "report", "report", "format", "封", "面", "公", "司"
    ]  # fmt: skip


def test_the_standins_terms_do_not_follow_a_change_of_searchs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = embed_standin.standin_terms(TEXT)
    monkeypatch.setattr(bm25, "runs", lambda text: re.findall(r"(\d+)|(x)", text))
    assert bm25.terms(TEXT) != before
    assert embed_standin.standin_terms(TEXT) == before
