"""memkeeper models pull / show: the local model into the cache from a copy (the tests never
reach the hub: offline, the download fails with a message that says what else to do)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from helpers.tiny_model import static_model

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.config import Config
from memkeeper.maintenance.runner import run_once
from memkeeper.store import semantic

DEFAULT = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(folder))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never the network
    semantic.reset()
    yield folder
    semantic.reset()


def _zip_of(folder: Path, path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for file in folder.rglob("*"):
            archive.write(file, Path("model") / file.relative_to(folder))
    return path


def test_show_says_why_search_is_keyword_only_then_pull_from_a_zip_fixes_it(
    cache: Path, tmp_path: Path, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["embedder"] == "local" and shown["keyword_only"].startswith("no model")
    archive = _zip_of(static_model(tmp_path / "built"), tmp_path / "model.zip")
    assert main(["models", "pull", "--from", str(archive)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{DEFAULT}: {cache}")
    semantic.reset()
    assert main(["models", "show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["keyword_only"] == "" and shown["dimensions"] == 16
    with MemoryStore(db_path, config=Config()) as store:
        store.remember("u", "city", "Paris")
        (result,) = run_once(store, ["index"]).results
        assert result.stats["entries_indexed"] == 1
        assert store.search("u", "where does the user live?").semantic


def test_pull_from_a_directory_under_another_name(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = static_model(tmp_path / "built")
    assert main(["models", "pull", "org/tiny", "--from", str(model), "--json"]) == 0
    folder = Path(json.loads(capsys.readouterr().out)["folder"])
    assert (folder / "tokenizer.json").is_file() and folder.is_relative_to(cache)
    assert (cache / "models--org--tiny" / "refs" / "main").read_text() == folder.name


def test_offline_the_download_fails_with_what_to_do(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "pull", "org/not-there"]) == 1
    err = capsys.readouterr().err
    assert "could not download org/not-there" in err and "--from PATH" in err


def test_a_copy_without_a_model_is_refused(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["models", "pull", "--from", str(tmp_path / "empty")]) == 1
    assert "holds no tokenizer.json" in capsys.readouterr().err


def test_a_copy_that_is_not_there_is_refused(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "pull", "--from", str(tmp_path / "nowhere")]) == 1
    assert "neither a model directory nor a zip" in capsys.readouterr().err
