"""Tiny embedding models the tests build: real files in the layouts a user's cache holds.

:func:`static_model` writes a model2vec-style static model (``tokenizer.json`` of a word-level
tokenizer, ``model.safetensors`` with one matrix) whose rows put synonyms on one direction:
"live", "lives", "city", "home" and "paris" share the *place* axis, so "where does the user
live?" is close to "city: Paris" with no word in common. :func:`bert_model` writes a random
two-layer BERT (``config.json``, weights of the names sentence-transformers' checkpoints use).
:func:`in_hub_cache` lays a model folder out as the Hugging Face cache does.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

CONCEPTS = {
    "place": ["live", "lives", "living", "city", "home", "paris", "moved", "address"],
    "drink": ["tea", "coffee", "drink", "drinks", "green"],
    "work": ["job", "work", "works", "analyst", "office", "career"],
    "pet": ["dog", "dogs", "puppy", "pets", "adopt", "adopted"],
}
FILLER = [
    *("where", "does", "the", "user", "what", "when", "did", "is", "a", "an", "of", "in"),
    *("to", "on", "at", "with", "about", "meeting", "bob", "friday", "budget", "hey", "how"),
    *("you", "i", "my", "new", "week", "it", "has", "been", "quite", "and"),
]


def _vocab() -> list[str]:
    words = ["[UNK]", "[CLS]", "[SEP]", "[PAD]"]
    for group in CONCEPTS.values():
        words += group
    return list(dict.fromkeys(words + FILLER))


def _tokenizer_json(vocab: list[str]) -> str:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel

    tokenizer = Tokenizer(WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return tokenizer.to_str()


def static_model(folder: Path, dims: int = 16) -> Path:
    """A static model in ``folder`` (created): concept words share their concept's row."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    vocab = _vocab()
    rng = np.random.default_rng(7)
    axes = {name: rng.standard_normal(dims) for name in CONCEPTS}
    matrix = np.zeros((len(vocab), dims), dtype=np.float32)
    for i, word in enumerate(vocab):
        concept = next((c for c, words in CONCEPTS.items() if word in words), None)
        noise = rng.standard_normal(dims) * (0.15 if concept else 0.5)
        matrix[i] = (axes[concept] * 3 if concept else 0) + noise
    matrix[vocab.index("[UNK]")] = 0
    (folder / "tokenizer.json").write_text(_tokenizer_json(vocab), encoding="utf-8")
    save_file({"embeddings": matrix}, str(folder / "model.safetensors"))
    return folder


def bert_model(folder: Path, hidden: int = 8, layers: int = 2) -> Path:
    """A random BERT encoder in ``folder`` (created), as a sentence-transformers checkpoint."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    vocab = _vocab()
    rng = np.random.default_rng(11)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    weights = {
        "embeddings.word_embeddings.weight": w(len(vocab), hidden),
        "embeddings.position_embeddings.weight": w(32, hidden),
        "embeddings.token_type_embeddings.weight": w(2, hidden),
        "embeddings.LayerNorm.weight": np.ones(hidden, np.float32),
        "embeddings.LayerNorm.bias": np.zeros(hidden, np.float32),
    }
    for n in range(layers):
        p = f"encoder.layer.{n}."
        for name in ("query", "key", "value"):
            weights[f"{p}attention.self.{name}.weight"] = w(hidden, hidden)
            weights[f"{p}attention.self.{name}.bias"] = w(hidden)
        weights[f"{p}attention.output.dense.weight"] = w(hidden, hidden)
        weights[f"{p}attention.output.dense.bias"] = w(hidden)
        weights[f"{p}attention.output.LayerNorm.weight"] = np.ones(hidden, np.float32)
        weights[f"{p}attention.output.LayerNorm.bias"] = np.zeros(hidden, np.float32)
        weights[f"{p}intermediate.dense.weight"] = w(4 * hidden, hidden)
        weights[f"{p}intermediate.dense.bias"] = w(4 * hidden)
        weights[f"{p}output.dense.weight"] = w(hidden, 4 * hidden)
        weights[f"{p}output.dense.bias"] = w(hidden)
        weights[f"{p}output.LayerNorm.weight"] = np.ones(hidden, np.float32)
        weights[f"{p}output.LayerNorm.bias"] = np.zeros(hidden, np.float32)
    config = {
        "model_type": "bert",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 2,
        "intermediate_size": 4 * hidden,
        "layer_norm_eps": 1e-12,
        "vocab_size": len(vocab),
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "tokenizer.json").write_text(_tokenizer_json(vocab), encoding="utf-8")
    save_file(weights, str(folder / "model.safetensors"))
    return folder


def in_hub_cache(cache: Path, name: str, build=static_model, revision: str = "0123abcd") -> Path:
    """Build a model as the Hugging Face cache holds ``name`` (org/name) in ``cache``:
    ``models--org--name/snapshots/<revision>/`` and ``refs/main``; its snapshot folder."""
    folder = cache / ("models--" + name.replace("/", "--"))
    snapshot = build(folder / "snapshots" / revision)
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(revision, encoding="utf-8")
    return snapshot
