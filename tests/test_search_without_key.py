"""search without an embeddings key (start-up, issue 20 item 13): keyword-only without
reading the stored vectors, so numpy stays unloaded, and still one warning when there are
vectors the search cannot use."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_embeddings import DIMS, embed_config, fake_vector
from helpers.logs import capture_logs

from memkeeper import MemoryStore
from memkeeper.storage.vectors import embedding_text, store_vectors, text_hash
from memkeeper.store import semantic

pytestmark = pytest.mark.both_backends

KEY_ENV = "ZHIPUAI_API_KEY"
NO_KEY = "search is keyword-only: no API key for embeddings"


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv("ZAI_API_KEY", raising=False)
    semantic.reset()
    yield
    semantic.reset()


def _index(store: MemoryStore) -> None:
    rows = []
    for m in store.list_memories():
        text = embedding_text(m.kind, m.key, m.value)
        rows.append(
            (m.id, store.config.search.embedding_model, DIMS, text_hash(text), fake_vector(text))
        )
    with store.storage.lock:
        store_vectors(store.storage.hot, rows)


def test_stored_vectors_without_a_key_give_one_warning_and_keyword_hits(db_path: Path) -> None:
    with MemoryStore(db_path, config=embed_config("http://127.0.0.1:9")) as store:
        store.remember("alice", "report_format", "PDF files with a logo")
        _index(store)
        with capture_logs() as lines:
            first = store.search("alice", "PDF")
            second = store.search("alice", "logo")
    assert [hit.memory.key for hit in first] == ["report_format"] and len(second) == 1
    assert not first.semantic and first.embed_ms == 0
    assert [line["event"] for line in lines].count(NO_KEY) == 1


def test_no_vectors_and_no_key_is_quiet(db_path: Path) -> None:
    with MemoryStore(db_path) as store:
        store.remember("alice", "report_format", "PDF files with a logo")
        with capture_logs() as lines:
            assert len(store.search("alice", "PDF")) == 1
    assert NO_KEY not in [line["event"] for line in lines]


def test_a_search_without_a_key_loads_no_numpy_even_with_vectors(db_path: Path) -> None:
    with MemoryStore(db_path, config=embed_config("http://127.0.0.1:9")) as store:
        store.remember("alice", "report_format", "PDF files with a logo")
        _index(store)
    script = (
        "import sys\n"
        "from memkeeper import MemoryStore\n"
        "with MemoryStore(sys.argv[1]) as store:\n"
        "    print(len(store.search('alice', 'PDF')), 'numpy' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in (KEY_ENV, "ZAI_API_KEY")}
    done = subprocess.run(
        [sys.executable, "-c", script, str(db_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=env,
    )
    assert done.stdout.split() == ["1", "False"]
