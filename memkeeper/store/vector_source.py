"""Where search's and the index job's vectors come from: ``[search] embedder``.

* ``local`` — a model run in this process (:mod:`memkeeper.llm.local_embeddings`), found in
  the Hugging Face model cache by ``[search] local_model`` or at ``local_model_path``: no
  server, no key. Its vectors are stored under the model id ``local:<name>`` with the
  model's own dimension.
* ``zhipu`` / ``openai`` — the embeddings endpoint (:mod:`memkeeper.llm.embeddings`):
  ``[llm]``'s key and base URL, or ``embedding_base_url`` / ``embedding_api_key_env``; the
  vectors' model and dimension are ``embedding_model`` and ``embedding_dimensions``.
* ``auto`` (the default) — the endpoint where one is configured (its key is set, or
  ``embedding_base_url``, ``embedding_api_key_env``, ``[llm] base_url`` or
  ``ZHIPUAI_BASE_URL`` names one), so existing set-ups keep what they embed with; else the
  local model.

:func:`source` resolves it without loading anything heavy (a few file checks, repeated at
most every :data:`LOOK_SECONDS`): search calls it at every query. The vectors of one model
are never compared with another's (the stored ``model`` and ``dims`` select them), so a
change of model is a change of source: the index job re-embeds every entry.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from memkeeper.config import Config
    from memkeeper.llm.local_embeddings import LocalEmbedder

LOCAL_PREFIX = "local:"

LOOK_SECONDS = 30.0
"""How long a look in the model cache holds (a model pulled meanwhile is seen after it)."""


class Source(NamedTuple):
    """The resolved embedder: ``kind`` (``local`` or ``endpoint``), the stored vectors'
    ``model`` and ``dims``, and ``missing``: why no vector can be had ("" when one can)."""

    kind: str
    model: str
    dims: int
    missing: str = ""
    folder: str = ""

    @property
    def available(self) -> bool:
        return not self.missing


_lock = threading.Lock()
_looked: dict[tuple[str, ...], tuple[float, Source]] = {}
_local: dict[str, LocalEmbedder] = {}


def reset() -> None:
    """Forget the looks and the loaded models (tests)."""
    with _lock:
        _looked.clear()
        _local.clear()


def wants_endpoint(config: Config) -> bool:
    """Whether ``config`` embeds through the endpoint (else the local model)."""
    choice = config.search.embedder
    if choice != "auto":
        return choice != "local"
    search = config.search
    return bool(
        search.embedding_base_url
        or search.embedding_api_key_env
        or config.llm.base_url
        or _base_url_env()
        or _key_set(config)
    )


def _base_url_env() -> bool:
    """Whether an endpoint is named in the environment (``ZHIPUAI_BASE_URL``...)."""
    from memkeeper.llm.endpoint import BASE_URL_ENVS

    return any((os.environ.get(name) or "").strip() for name in BASE_URL_ENVS)


def _key_set(config: Config) -> bool:
    from memkeeper.llm.endpoint import read_api_key
    from memkeeper.llm.errors import LlmNotConfigured
    from memkeeper.store.semantic import embeddings_llm

    try:
        read_api_key(embeddings_llm(config))
    except LlmNotConfigured:
        return False
    return True


def source(config: Config) -> Source:
    """The embedder ``config`` names, resolved (see the module docstring)."""
    settings = config.search
    if wants_endpoint(config):
        from memkeeper.store.semantic import embeddings_llm

        missing = "" if _key_set(config) else f"no API key ({embeddings_llm(config).api_key_env})"
        return Source("endpoint", settings.embedding_model, settings.embedding_dimensions, missing)
    from memkeeper.llm.local_embeddings import hub_cache

    ident = (settings.local_model, settings.local_model_path, str(hub_cache()))
    now = time.monotonic()
    with _lock:
        seen = _looked.get(ident)
        if seen is not None and now - seen[0] < LOOK_SECONDS:
            return seen[1]
    found = _look(settings.local_model, settings.local_model_path)
    with _lock:
        _looked[ident] = (now, found)
    return found


def local_model_id(name: str, path: str) -> str:
    """The model id a local model's vectors are stored under."""
    return LOCAL_PREFIX + (Path(path).expanduser().name if path else name)


def _look(name: str, path: str) -> Source:
    from memkeeper.llm.local_embeddings import find_model, hub_cache

    model = local_model_id(name, path)
    folder = find_model(name, path=path)
    if folder is None:
        where = (
            f"at [search] local_model_path {path}"
            if path
            else f"in the model cache ({hub_cache()})"
        )
        return Source(
            "local",
            model,
            0,
            f"no model: the local embedding model {path or name} is not {where}; "
            "run `memkeeper models pull`, or set [search] local_model_path to a directory "
            "holding it",
        )
    dims = model_dimensions(folder)
    if dims <= 0:
        return Source("local", model, 0, f"no model: {folder} holds no readable weights")
    return Source("local", model, dims, "", str(folder))


def model_dimensions(folder: Path) -> int:
    """A model's vector size, read from its files without loading it: ``config.json``'s
    ``hidden_size`` for a transformer, else the safetensors header's one matrix."""
    try:
        config = json.loads((folder / "config.json").read_text("utf-8"))
    except (OSError, ValueError):
        config = {}
    if isinstance(config, dict) and isinstance(config.get("hidden_size"), int):
        return int(config["hidden_size"])
    for weights in sorted(folder.glob("*.safetensors")):
        try:
            with weights.open("rb") as f:
                size = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(min(size, 10_000_000)))
        except (OSError, ValueError):
            continue
        shapes = [v.get("shape") for k, v in header.items() if k != "__metadata__"]
        matrices = [s for s in shapes if isinstance(s, list) and len(s) == 2]
        if len(matrices) == 1:
            return int(matrices[0][1])
    return 0


def local_embedder(found: Source) -> LocalEmbedder:
    """The process's embedder of the local model ``found`` (loaded on first use: about a
    second for all-MiniLM-L6-v2), shared by search and the index job."""
    from memkeeper.llm.local_embeddings import LocalEmbedder, LocalModel

    with _lock:
        kept = _local.get(found.folder)
        if kept is not None:
            return kept
    loaded = LocalEmbedder(
        LocalModel(Path(found.folder), found.model.removeprefix(LOCAL_PREFIX)),
        model_id=found.model,
    )
    if loaded.dimensions != found.dims:
        raise ValueError(f"{found.folder}: vectors of {loaded.dimensions}, not {found.dims}")
    with _lock:
        return _local.setdefault(found.folder, loaded)


def search_state(config: Config, db: Any, entries: int) -> dict[str, Any]:
    """What ``status`` says of search: the embedder, its model, how many of the ``entries``
    (active and pending review) have its vectors, and ``keyword_only``: why search is
    keyword-only ("" when it is by meaning). The caller holds the storage lock."""
    from memkeeper.storage.vectors import vector_count
    from memkeeper.store import semantic

    found = source(config)
    embedded = vector_count(db, model=found.model, dims=found.dims) if found.dims else 0
    why = found.missing or semantic.failing(found.model)
    if not why and entries and not embedded:
        why = f"vectors not built yet: 0 of {entries} entries embedded (the index job embeds them)"
    if not config.search.enabled:
        why = "retrieval is off ([search] enabled = false)"
    return {
        "embedder": found.kind,
        "model": found.model,
        "dimensions": found.dims,
        "embedded": min(embedded, entries),
        "entries": entries,
        "keyword_only": why,
    }
