"""Search by meaning with no key and no server: the local model, loaded from the model cache
(a tiny model the test builds, laid out as the Hugging Face cache holds a download), and
what search says when it is not there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers.logs import capture_logs
from helpers.tiny_model import bert_model, in_hub_cache, static_model

from memkeeper import MemoryStore
from memkeeper.config import Config
from memkeeper.llm.local_embeddings import LocalModel, find_model
from memkeeper.maintenance.runner import run_once
from memkeeper.store import semantic, vector_source

pytestmark = pytest.mark.both_backends

DEFAULT = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    semantic.reset()
    yield
    semantic.reset()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty model cache of the process (HF_HUB_CACHE)."""
    folder = tmp_path / "hub"
    folder.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(folder))
    return folder


def _fill(store: MemoryStore) -> None:
    store.remember("u", "city", "Paris")
    store.remember("u", "drink", "green tea", kind="preference")
    store.add_note("u", "Meeting with Bob on Friday about the budget")
    store.add_note("u", "I started a new job as an analyst")


def _index(store: MemoryStore) -> dict:
    (result,) = run_once(store, ["index"]).results
    assert result.status == "ok", result.error
    return result.stats


def test_a_fresh_install_with_the_model_cached_finds_by_meaning(db_path: Path, cache: Path) -> None:
    in_hub_cache(cache, DEFAULT)
    with MemoryStore(db_path, config=Config()) as store:
        _fill(store)
        before = store.search("u", "where does the user live?")
        assert not before.semantic and before.keyword_only.startswith("vectors not built yet")
        stats = _index(store)
        assert stats["entries_indexed"] == 4 and stats["model"] == f"local:{DEFAULT}"
        assert stats["dimensions"] == 16
        hits = store.search("u", "where does the user live?")
    assert hits.semantic and hits.keyword_only == ""
    assert hits[0].memory.key == "city" and hits[0].similarity > 0.5


def test_without_the_model_search_is_keyword_only_and_says_why_once(
    db_path: Path, cache: Path
) -> None:
    with MemoryStore(db_path, config=Config()) as store:
        _fill(store)
        with capture_logs() as lines:
            first = store.search("u", "budget")
            second = store.search("u", "where does the user live?")
        (result,) = run_once(store, ["index"]).results
    assert [h.memory.value for h in first] == ["Meeting with Bob on Friday about the budget"]
    assert not first.semantic and not second.semantic
    assert "city" not in [h.memory.key for h in second]  # no word in common: not found
    assert first.keyword_only.startswith("no model") and "memkeeper models pull" in (
        first.keyword_only
    )
    assert str(cache) in first.keyword_only
    said = [line["event"] for line in lines if line["log_level"] in ("info", "warning")]
    assert said == [f"keyword-only search: {first.keyword_only}"]  # once, at info
    assert result.status == "skipped" and "memkeeper models pull" in (result.error or "")


def test_a_model_change_re_embeds_and_never_mixes_models(db_path: Path, cache: Path) -> None:
    in_hub_cache(cache, DEFAULT)
    in_hub_cache(cache, "someone/other-model", build=lambda f: bert_model(f, hidden=8))
    with MemoryStore(db_path, config=Config()) as store:
        _fill(store)
        assert _index(store)["entries_indexed"] == 4
        other = store.config.search.model_copy(update={"local_model": "someone/other-model"})
        store.config = store.config.model_copy(update={"search": other})
        semantic.reset()
        searched = store.search("u", "budget")
        assert not searched.semantic  # the other model's vectors are not built yet
        stats = _index(store)
        assert stats["entries_indexed"] == 4 and stats["model"] == "local:someone/other-model"
        assert stats["dimensions"] == 8
        assert store.search("u", "budget").semantic


def test_a_configured_key_keeps_the_endpoint_unless_the_config_names_the_local_model(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_hub_cache(cache, DEFAULT)
    assert vector_source.source(Config()).kind == "local"
    monkeypatch.setenv("ZHIPUAI_API_KEY", "a-key")
    vector_source.reset()
    found = vector_source.source(Config())
    assert (found.kind, found.model, found.dims) == ("endpoint", "embedding-3", 512)
    local = Config.model_validate({"search": {"embedder": "local"}})
    assert vector_source.source(local).kind == "local"


def test_the_model_is_found_by_the_cache_refs_or_by_path(tmp_path: Path, cache: Path) -> None:
    snapshot = in_hub_cache(cache, "org/name")
    assert find_model("org/name") == snapshot
    assert find_model("org/missing") is None
    assert find_model("ignored", path=str(snapshot)) == snapshot
    assert find_model("ignored", path=str(tmp_path / "nowhere")) is None


def test_a_transformer_model_runs_in_numpy(tmp_path: Path) -> None:
    model = LocalModel(bert_model(tmp_path / "bert"), "tiny-bert")
    assert model.kind == "transformer" and model.dimensions == 8
    texts = ["where does the user live", "city paris", "where does the user live"]
    vectors = model.embed(texts)
    assert vectors.shape == (3, 8) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[0], vectors[2], atol=1e-6)  # padding in a batch changes nothing
    alone = model.embed(["where does the user live"])[0]
    assert np.allclose(alone, vectors[0], atol=1e-5)


def test_a_static_model_averages_its_rows(tmp_path: Path) -> None:
    model = LocalModel(static_model(tmp_path / "static"), "tiny")
    assert model.kind == "static" and model.dimensions == 16
    near, far = model.embed(["city paris", "green tea"]) @ model.embed(["where do you live"])[0]
    assert near > 0.5 > far
    assert not model.embed(["zzz unknown"]).any()  # no known token: no direction


def test_status_and_the_mcp_tool_say_why_search_is_keyword_only(
    db_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memkeeper.cli import main
    from memkeeper.mcp.calls import HANDLERS

    with MemoryStore(db_path, config=Config()) as store:
        _fill(store)
        state = store.status()["search"]
        assert state["keyword_only"].startswith("no model") and state["entries"] == 4
        answer = HANDLERS["search"](store, None, "u", {"query": "budget"})
        assert answer["keyword_only"].startswith("no model") and len(answer["hits"]) == 1
        in_hub_cache(cache, DEFAULT)
        semantic.reset()
        state = store.status()["search"]
        assert (
            state["keyword_only"]
            == "vectors not built yet: 0 of 4 entries embedded (the index job embeds them)"
        )
        _index(store)
        state = store.status()["search"]
        assert (state["keyword_only"], state["embedded"], state["dimensions"]) == ("", 4, 16)
        assert HANDLERS["search"](store, None, "u", {"query": "budget"})["keyword_only"] == ""
    assert main(["--db", str(db_path), "status"]) == 0
    assert f"search:    by meaning and keywords (local:{DEFAULT}, 4 of 4 entries embedded)" in (
        capsys.readouterr().out
    )


def test_the_cli_search_says_why_on_stderr_without_a_log_line(
    db_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memkeeper.cli import main

    with MemoryStore(db_path, config=Config()) as store:
        _fill(store)
    semantic.reset()
    assert main(["--db", str(db_path), "search", "u", "budget"]) == 0
    err = capsys.readouterr().err
    assert "1 hit, keyword-only" in err
    assert "keyword-only: no model: the local embedding model" in err
    assert "keyword-only search:" not in err  # the log line: the command says it already


def test_a_query_the_model_cannot_read_is_searched_by_keywords_and_says_why(
    db_path: Path, cache: Path
) -> None:
    """An English model and a Chinese question: its tokens unknown to the vocabulary, the
    vector would be noise, so the search is keyword-only, says why, and finds the Chinese
    entry by its characters; an English question of the same store is searched by meaning."""
    in_hub_cache(cache, DEFAULT)
    with MemoryStore(db_path, config=Config()) as store:
        _fill(store)
        store.remember("u", "城市", "用户住在北京")
        _index(store)
        with capture_logs() as lines:
            chinese = store.search("u", "用户住在哪里")
            again = store.search("u", "北京")
        english = store.search("u", "where does the user live?")
    assert not chinese.semantic and "cannot read this query (1 of its 1 tokens" in (
        chinese.keyword_only
    )
    assert [h.memory.key for h in chinese] == ["城市"]
    assert not again.semantic
    said = [line for line in lines if "cannot read" in line["event"]]
    assert len(said) == 1 and said[0]["log_level"] == "info"
    assert english.semantic and english[0].memory.key == "city"


def test_unknown_tokens_counts_the_unknown_token_and_byte_fallback_pieces(tmp_path: Path) -> None:
    """A word-level vocabulary's [UNK], and the byte pieces a byte-fallback BPE vocabulary
    (wordllama's, Llama's) writes for a character it has no token for."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer
    from tokenizers.models import BPE

    words = LocalModel(static_model(tmp_path / "static"), "tiny")
    assert words.unknown_tokens("where does the user live") == (0, 5)
    assert words.unknown_tokens("用户 住在 哪里") == (3, 3)
    vocab = {"<unk>": 0, "a": 1, "b": 2} | {f"<0x{b:02X}>": 3 + b for b in range(256)}
    tokenizer = Tokenizer(BPE(vocab, [], unk_token="<unk>", byte_fallback=True))
    folder = tmp_path / "bytes"
    folder.mkdir()
    (folder / "tokenizer.json").write_text(tokenizer.to_str(), encoding="utf-8")
    save_file({"embeddings": np.ones((len(vocab), 4), np.float32)}, str(folder / "m.safetensors"))
    pieces = LocalModel(folder, "bytes")
    assert pieces.unknown_tokens("ab") == (0, 2)
    assert pieces.unknown_tokens("a中") == (3, 4)  # 中: three bytes of UTF-8
