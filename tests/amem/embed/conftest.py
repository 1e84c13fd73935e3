"""Shared embedders (loaded once per session) and a factory of tiny ONNX model folders."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from amem.embed import E5Embedder, E5OnnxEmbedder, OnnxEmbedder
from amem.embed.minilm import MINILM_DIR, minilm_embedder
from tests.amem.embed.tiny_onnx import write_lookup_model

#: Texts in many scripts; every embedder must give each a finite unit vector.
SCRIPTS = [
    "The cat sat on the mat.",
    "今天天气很好，我们去公园散步吧。",
    "東京は日本の首都です。ひらがなとカタカナ。",
    "서울은 한국의 수도입니다.",
    "Party time 🎉🎂😀",
    "🎉",
    "Привет, как дела?",
    "مرحبا بالعالم",
]

TINY_DIM = 4
VOCAB = 30522  # the MiniLM tokenizer's vocabulary, reused by the tiny models


@pytest.fixture(scope="session")
def e5() -> E5Embedder:
    return E5Embedder(threads=1)


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One converted e5-small per test session: conversion itself is under test (CI has no
    cache), and it takes a few seconds, so it runs once."""
    root = tmp_path_factory.mktemp("models")
    E5OnnxEmbedder(cache_dir=root)
    return root


@pytest.fixture(scope="session")
def e5_onnx(model_cache: Path) -> E5OnnxEmbedder:
    return E5OnnxEmbedder(threads=1, cache_dir=model_cache)


@pytest.fixture(scope="session")
def minilm() -> OnnxEmbedder:
    return minilm_embedder(threads=1)


@pytest.fixture(scope="session")
def tiny_table() -> np.ndarray:
    return np.random.default_rng(7).normal(size=(VOCAB, TINY_DIM)).astype(np.float32)


TinyDir = Callable[..., Path]


@pytest.fixture
def tiny_dir(tmp_path: Path, tiny_table: np.ndarray) -> TinyDir:
    """Make a model folder: the MiniLM tokenizer, a lookup-table ``model.onnx``, given configs."""
    counter = iter(range(1000))

    def make(files: dict[str, Any] | None = None, **model_options: Any) -> Path:
        folder = tmp_path / f"model{next(counter)}"
        folder.mkdir()
        shutil.copy(MINILM_DIR / "tokenizer.json", folder / "tokenizer.json")
        write_lookup_model(folder / "model.onnx", tiny_table, **model_options)
        for name, content in (files or {}).items():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        return folder

    return make


def assert_unit_rows(vectors: np.ndarray, n: int, dim: int) -> None:
    assert vectors.shape == (n, dim)
    assert vectors.dtype == np.float32
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
