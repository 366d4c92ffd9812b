"""The process keeps a few embedders (store/semantic.py, EMBEDDERS_KEPT); one pushed out by
newer ones may still be in another thread's hands, mid-search or mid-index: it must keep
working for whoever holds it, and its connections close once nobody does."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from fake_embeddings import FakeEmbeddings, embed_config

from memkeeper.store import semantic

KEY = "fake.key-for-tests"


@pytest.fixture(autouse=True)
def fresh_semantic() -> Iterator[None]:
    semantic.reset()
    yield
    semantic.reset()


def test_an_embedder_pushed_out_keeps_working_for_its_holder() -> None:
    with FakeEmbeddings() as fake:
        held = semantic.shared_embedder(embed_config(fake.url), KEY)
        for i in range(semantic.EMBEDDERS_KEPT):  # newer settings push the held one out
            semantic.shared_embedder(
                embed_config(fake.url, search={"embedding_model": f"model-{i}"}), KEY
            )
        assert held not in semantic._embedders.values()
        assert len(held.embed(["still in use"])) == 1


def test_an_embedder_pushed_out_closes_its_connections_once_dropped() -> None:
    with FakeEmbeddings() as fake:
        held = semantic.shared_embedder(embed_config(fake.url), KEY)
        http = held._http
        for i in range(semantic.EMBEDDERS_KEPT):
            semantic.shared_embedder(
                embed_config(fake.url, search={"embedding_model": f"model-{i}"}), KEY
            )
        assert not http.is_closed
        del held
        gc.collect()
        assert http.is_closed
