"""Embeddings computed in this process: no server, no key.

A model is a directory in the Hugging Face layout, found in the usual model cache
(:func:`find_model`: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
``~/.cache/huggingface/hub``; ``models--<org>--<name>/snapshots/<revision>/``) or named by
path. Two kinds of model load, told apart by their files:

* a **transformer** of the BERT family (``config.json`` of ``model_type`` ``bert``, a
  ``model.safetensors`` and a ``tokenizer.json``; sentence-transformers' all-MiniLM-L6-v2,
  paraphrase-multilingual-MiniLM-L12-v2, bge-small...): the encoder runs in numpy, its
  tokens mean-pooled (``1_Pooling/config.json``'s mode, mean by default);
* a **static** model (a ``tokenizer.json`` and a safetensors file holding one matrix, one
  row per token: model2vec's layout, or wordllama's weights): the mean of the text's token
  rows.

The runtime is Hugging Face's ``tokenizers`` (Rust) and ``safetensors`` with numpy, all
well kept and small (no torch, no ONNX Runtime): a short query through all-MiniLM-L6-v2
takes a few milliseconds on one core. Vectors come back float32 and L2-normalized, like the
endpoint's (:mod:`memkeeper.llm.embeddings`).

``numpy``, ``tokenizers`` and ``safetensors`` are imported when a model is loaded.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy

    from memkeeper.llm.embeddings import Embedded

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
"""The local model used when ``[search] local_model`` names none (README of the docs'
"Search by meaning": chosen by measurement on LoCoMo)."""

MAX_TOKENS = 256
"""Longest input a transformer reads, in tokens (the rest is cut, as sentence-transformers
does for all-MiniLM-L6-v2)."""

BATCH = 16
"""Texts run through a transformer together (sorted by length, so padding stays short)."""


_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")
"""A byte-fallback token: one byte of a character the vocabulary has no token for."""


class ModelMissing(LookupError):
    """No usable model at the place looked: the message says where and how to get one."""


def hub_cache(environ: dict[str, str] | None = None) -> Path:
    """Where Hugging Face keeps downloaded models (the hub cache)."""
    env = os.environ if environ is None else environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else None
    return (base or Path.home() / ".cache") / "huggingface" / "hub"


def cache_folder(cache: Path, name: str) -> Path:
    """The cache's folder of a model named ``org/name``."""
    return cache / ("models--" + name.replace("/", "--"))


def find_model(name: str, *, path: str = "", cache: Path | None = None) -> Path | None:
    """The directory of the model: ``path`` when given, else the snapshot of ``name`` in the
    cache (its ``refs/main`` revision, else the newest snapshot); None when absent."""
    if path:
        found = Path(path).expanduser()
        return found if _complete(found) else None
    folder = cache_folder(cache or hub_cache(), name)
    snapshots = folder / "snapshots"
    ref = folder / "refs" / "main"
    if ref.is_file():
        pinned = snapshots / ref.read_text("utf-8").strip()
        if _complete(pinned):
            return pinned
    if snapshots.is_dir():
        for candidate in sorted(snapshots.iterdir(), key=_mtime, reverse=True):
            if _complete(candidate):
                return candidate
    return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _complete(folder: Path) -> bool:
    """Whether ``folder`` holds a model this module can load."""
    return (folder / "tokenizer.json").is_file() and bool(_weights(folder))


def _weights(folder: Path) -> list[Path]:
    try:
        return sorted(folder.glob("*.safetensors"))
    except OSError:
        return []


class LocalModel:
    """A model loaded from its directory: ``embed(texts)`` gives unit float32 rows."""

    def __init__(self, folder: Path, name: str) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        if not _complete(folder):
            raise ModelMissing(f"{folder} holds no tokenizer.json and .safetensors weights")
        self.folder = folder
        self.name = name
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.no_padding()
        config = _json(folder / "config.json")
        weights: dict[str, Any] = {}
        for file in _weights(folder):
            weights.update(load_file(str(file)))
        if config.get("model_type") == "bert" or "encoder.layer.0.output.dense.weight" in {
            k.removeprefix("bert.") for k in weights
        }:
            self._encoder: _Bert | None = _Bert(config, weights)
            self._table = None
            self.dimensions = self._encoder.hidden
            self._tokenizer.enable_truncation(min(MAX_TOKENS, self._encoder.positions))
        else:
            matrices = [w for w in weights.values() if getattr(w, "ndim", 0) == 2]
            if len(matrices) != 1:
                raise ModelMissing(
                    f"{folder}: a static model holds one matrix, not {len(matrices)}"
                )
            self._encoder = None
            self._table = matrices[0].astype("float32")
            self.dimensions = int(self._table.shape[1])
        self._lock = threading.Lock()  # numpy releases the GIL; keep one text batch at a time
        unknown = getattr(self._tokenizer.model, "unk_token", None)
        self._unknown_id = self._tokenizer.token_to_id(unknown) if unknown else None

    def unknown_tokens(self, text: str) -> tuple[int, int]:
        """How many of ``text``'s tokens the model's vocabulary does not hold — its unknown
        token, or a byte of a character it has no token for (``<0xE5>``) — and how many
        tokens there are: a text mostly unknown is one the model cannot read (an English
        model's vocabulary and Chinese)."""
        encoding = self._tokenizer.encode(str(text), add_special_tokens=False)
        unknown = sum(
            1
            for token, token_id in zip(encoding.tokens, encoding.ids, strict=True)
            if token_id == self._unknown_id or _BYTE_TOKEN.fullmatch(token)
        )
        return unknown, len(encoding.ids)

    @property
    def kind(self) -> str:
        return "transformer" if self._encoder is not None else "static"

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        import numpy as np

        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch([str(t) for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        with self._lock, _one_blas_thread():
            if self._encoder is None:
                for i in order:
                    ids = [t for t in encodings[i].ids if t < len(self._table)]  # type: ignore[arg-type]
                    if ids:
                        out[i] = self._table[ids].mean(axis=0)  # type: ignore[index]
            else:
                for start in range(0, len(order), BATCH):
                    chunk = order[start : start + BATCH]
                    out[chunk] = self._encoder.pooled([encodings[i].ids for i in chunk])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)


def _one_blas_thread() -> Any:
    """BLAS on one thread while a text batch runs (threadpoolctl, when installed): the
    matrices of a few short texts are small, and OpenBLAS's threads spinning on a busy
    2-core machine made a batch up to ten times slower (200 turns of LoCoMo through
    all-MiniLM-L6-v2: 98 s, against 11 s on one thread)."""
    controller = _blas_controller()
    if controller is None:
        import contextlib

        return contextlib.nullcontext()
    return controller.limit(limits=1, user_api="blas")


@functools.cache
def _blas_controller() -> Any:
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController()


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}


class _Bert:
    """A BERT encoder's forward pass in numpy (inference only), mean-pooled."""

    def __init__(self, config: dict[str, Any], weights: dict[str, Any]) -> None:
        w = {k.removeprefix("bert."): v.astype("float32") for k, v in weights.items()}
        self.layers = int(config.get("num_hidden_layers") or _count_layers(w))
        self.hidden = int(w["embeddings.word_embeddings.weight"].shape[1])
        self.heads = int(config.get("num_attention_heads") or self.hidden // 32)
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.positions = int(w["embeddings.position_embeddings.weight"].shape[0])
        self.words = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.blocks = []
        for n in range(self.layers):
            p = f"encoder.layer.{n}."
            qkv = [w[f"{p}attention.self.{x}.weight"] for x in ("query", "key", "value")]
            qkv_b = [w[f"{p}attention.self.{x}.bias"] for x in ("query", "key", "value")]
            import numpy as np

            self.blocks.append(
                (
                    np.concatenate(qkv, axis=0).T.copy(),
                    np.concatenate(qkv_b),
                    w[f"{p}attention.output.dense.weight"].T.copy(),
                    w[f"{p}attention.output.dense.bias"],
                    (
                        w[f"{p}attention.output.LayerNorm.weight"],
                        w[f"{p}attention.output.LayerNorm.bias"],
                    ),
                    w[f"{p}intermediate.dense.weight"].T.copy(),
                    w[f"{p}intermediate.dense.bias"],
                    w[f"{p}output.dense.weight"].T.copy(),
                    w[f"{p}output.dense.bias"],
                    (w[f"{p}output.LayerNorm.weight"], w[f"{p}output.LayerNorm.bias"]),
                )
            )

    def _layer_norm(self, x: Any, norm: tuple[Any, Any]) -> Any:
        import numpy as np

        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * norm[0] + norm[1]

    def pooled(self, batch: list[list[int]]) -> Any:
        """The mean of each sequence's last hidden states (padding excluded)."""
        import numpy as np

        longest = max(1, *(len(ids) for ids in batch))
        ids = np.zeros((len(batch), longest), dtype=np.int64)
        mask = np.zeros((len(batch), longest), dtype=np.float32)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        x = self.words[ids] + self.position[:longest] + self.token_type
        x = self._layer_norm(x, self.norm)
        size, heads = self.hidden // self.heads, self.heads
        bias = (1.0 - mask)[:, None, None, :] * -1e4
        scale = 1.0 / math.sqrt(size)
        for qkv, qkv_b, out_w, out_b, norm1, in_w, in_b, down_w, down_b, norm2 in self.blocks:
            b, t, _ = x.shape
            q, k, v = np.split(x @ qkv + qkv_b, 3, axis=-1)
            q = q.reshape(b, t, heads, size).transpose(0, 2, 1, 3)
            k = k.reshape(b, t, heads, size).transpose(0, 2, 3, 1)
            v = v.reshape(b, t, heads, size).transpose(0, 2, 1, 3)
            scores = (q @ k) * scale + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            attended = (scores @ v).transpose(0, 2, 1, 3).reshape(b, t, self.hidden)
            x = self._layer_norm(attended @ out_w + out_b + x, norm1)
            inner = _gelu(x @ in_w + in_b)
            x = self._layer_norm(inner @ down_w + down_b + x, norm2)
        summed = (x * mask[:, :, None]).sum(axis=1)
        return summed / np.maximum(mask.sum(axis=1, keepdims=True), 1.0)


def _count_layers(weights: dict[str, Any]) -> int:
    return len({k.split(".")[2] for k in weights if k.startswith("encoder.layer.")})


def _gelu(x: Any) -> Any:
    """GELU with erf (BERT's ``gelu``), erf by Abramowitz and Stegun 7.1.26 (error < 2e-7)."""
    import numpy as np

    z = x * (1 / math.sqrt(2))
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = np.sign(z) * (1.0 - poly * np.exp(-a * a))
    return 0.5 * x * (1.0 + erf)


class LocalEmbedder:
    """:class:`memkeeper.llm.embeddings.Embedder`'s interface over a :class:`LocalModel`:
    the index job and search call it alike. Nothing is retried (nothing is transient)."""

    def __init__(self, model: LocalModel, *, model_id: str) -> None:
        self.local = model
        self.model = model_id
        self.dimensions = model.dimensions
        self.endpoint = f"local model {model.name}"

    def embed(self, texts: Sequence[str]) -> list[numpy.ndarray]:
        return self.embed_counted(texts).vectors

    def unknown_tokens(self, text: str) -> tuple[int, int]:
        """:meth:`LocalModel.unknown_tokens`."""
        return self.local.unknown_tokens(text)

    def embed_counted(
        self,
        texts: Sequence[str],
        *,
        timeout_s: float | None = None,
        max_retries: int | None = None,
    ) -> Embedded:
        from memkeeper.llm.embeddings import Embedded

        if not texts:
            return Embedded([], 0, 0)
        matrix = self.local.embed(list(texts))
        return Embedded(list(matrix), 1, 0)

    def close(self) -> None:
        """Nothing to close (the interface of the endpoint's embedder)."""

    def close_when_unused(self) -> None:
        """Nothing to close (the interface of the endpoint's embedder)."""
