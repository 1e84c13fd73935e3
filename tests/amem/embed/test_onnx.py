"""OnnxEmbedder on tiny real lookup-table models, where every pooled vector is known exactly."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from amem.embed import Embedder, OnnxEmbedder
from amem.embed.minilm import MINILM_DIR
from amem.embed.onnx import pool
from amem.errors import BackendError, ConfigError, MissingExtraError
from tests.amem.embed.conftest import SCRIPTS, TINY_DIM, TinyDir, assert_unit_rows

TEXTS = ["the cat sat on the mat", "hi", "今天天气很好", "a somewhat longer sentence about memory"]
CLS, SEP = 101, 102


def token_ids(text: str, max_length: int = 512) -> list[int]:
    tokenizer = Tokenizer.from_file(str(MINILM_DIR / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return list(tokenizer.encode(text).ids)


def unit(vector: np.ndarray) -> np.ndarray:
    out: np.ndarray = (vector / np.linalg.norm(vector)).astype(np.float32)
    return out


def test_mean_pooling_is_exact_and_batch_independent(
    tiny_dir: TinyDir, tiny_table: np.ndarray
) -> None:
    embedder = OnnxEmbedder(tiny_dir(), batch_size=2)
    assert isinstance(embedder, Embedder)
    assert embedder.dim == TINY_DIM
    assert embedder.config.pooling == "mean"  # no config files: the default
    vectors = embedder.embed(TEXTS)
    assert_unit_rows(vectors, len(TEXTS), TINY_DIM)
    for text, vector in zip(TEXTS, vectors, strict=True):
        np.testing.assert_allclose(vector, unit(tiny_table[token_ids(text)].mean(0)), atol=1e-6)
    singles = np.vstack([embedder.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(vectors, singles, atol=1e-6)


def test_empty_list(tiny_dir: TinyDir) -> None:
    out = OnnxEmbedder(tiny_dir()).embed([])
    assert out.shape == (0, TINY_DIM) and out.dtype == np.float32


@pytest.mark.parametrize(("pooling", "token"), [("cls", CLS), ("last", SEP)])
def test_cls_and_last_pooling(
    tiny_dir: TinyDir, tiny_table: np.ndarray, pooling: str, token: int
) -> None:
    # Texts of different lengths in one batch: "last" must find each row's own last real token
    # ([SEP]), not the padding.
    vectors = OnnxEmbedder(tiny_dir(), pooling=pooling).embed(TEXTS)
    for vector in vectors:
        np.testing.assert_allclose(vector, unit(tiny_table[token]), atol=1e-6)


def test_pool_on_literal_arrays() -> None:
    hidden = np.array([[[1.0, 0.0], [3.0, 2.0], [9.0, 9.0]], [[2.0, 2.0], [0.0, 4.0], [5.0, 5.0]]])
    mask = np.array([[1, 1, 0], [1, 1, 1]])
    np.testing.assert_allclose(pool(hidden, mask, "mean"), [[2.0, 1.0], [7 / 3, 11 / 3]])
    np.testing.assert_allclose(pool(hidden, mask, "cls"), [[1.0, 0.0], [2.0, 2.0]])
    np.testing.assert_allclose(pool(hidden, mask, "last"), [[3.0, 2.0], [5.0, 5.0]])


def test_token_type_ids_fed_only_when_the_model_has_that_input(
    tiny_dir: TinyDir, tiny_table: np.ndarray
) -> None:
    types = np.array([[10.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 10.0]], dtype=np.float32)
    with_types = OnnxEmbedder(tiny_dir(type_table=types)).embed(TEXTS[:1])[0]
    ids = token_ids(TEXTS[0])
    np.testing.assert_allclose(with_types, unit(tiny_table[ids].mean(0) + types[0]), atol=1e-6)
    # Without that input onnxruntime would reject a token_type_ids feed; this one runs.
    without = OnnxEmbedder(tiny_dir(), pooling="mean").embed(TEXTS[:1])[0]
    np.testing.assert_allclose(without, unit(tiny_table[ids].mean(0)), atol=1e-6)


def test_int32_inputs_and_a_model_without_attention_mask(
    tiny_dir: TinyDir, tiny_table: np.ndarray
) -> None:
    for options in ({"index_type": "int32"}, {"with_attention_mask": False}):
        vector = OnnxEmbedder(tiny_dir(**options)).embed(["hi there"])[0]
        np.testing.assert_allclose(vector, unit(tiny_table[token_ids("hi there")].mean(0)),
                                   atol=1e-6)


def test_a_model_that_pools_inside_the_graph(
    tiny_dir: TinyDir, tiny_table: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tiny_dir(pooled_output=True)
    embedder = OnnxEmbedder(folder)
    vector = embedder.embed(["hi there"])[0]
    np.testing.assert_allclose(vector, unit(tiny_table[token_ids("hi there")].mean(0)), atol=1e-6)
    assert "/graph/" in embedder.model_id
    with caplog.at_level("WARNING", logger="amem.embed.onnx"):
        OnnxEmbedder(folder, pooling="cls")
    assert "pooling='cls' is ignored" in caplog.text


def test_an_input_amem_cannot_feed_is_named(tiny_dir: TinyDir) -> None:
    with pytest.raises(ConfigError, match="pixel_values"):
        OnnxEmbedder(tiny_dir(extra_input="pixel_values"))


def test_truncation_at_max_length(tiny_dir: TinyDir, tiny_table: np.ndarray) -> None:
    embedder = OnnxEmbedder(tiny_dir(), max_length=6)
    a, b = embedder.embed(["one two three four five six", "one two three four nine ten"])
    np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(a, unit(tiny_table[token_ids("one two three four", 6)].mean(0)),
                               atol=1e-6)
    assert len(token_ids("one two three four", 6)) == 6


def test_prefixes_apply_per_kind_and_enter_the_model_id(
    tiny_dir: TinyDir, tiny_table: np.ndarray
) -> None:
    folder = tiny_dir()
    plain = OnnxEmbedder(folder)
    prefixed = OnnxEmbedder(folder, query_prefix="query: ", passage_prefix="passage: ")
    assert plain.model_id != prefixed.model_id
    query = prefixed.embed(["hi"], kind="query")[0]
    np.testing.assert_allclose(query, unit(tiny_table[token_ids("query: hi")].mean(0)), atol=1e-6)
    passage = prefixed.embed(["hi"], kind="passage")[0]
    assert not np.allclose(query, passage)
    np.testing.assert_allclose(plain.embed(["hi"], kind="query"), plain.embed(["hi"]))


def test_model_id_names_the_settings(tiny_dir: TinyDir) -> None:
    folder = tiny_dir()
    mean = OnnxEmbedder(folder)
    assert mean.model_id.startswith(f"onnx/{folder.name}@")
    assert mean.model_id.endswith("/mean/len512")
    assert OnnxEmbedder(folder, pooling="cls").model_id.endswith("/cls/len512")
    assert OnnxEmbedder(folder, max_length=64, name="tiny").model_id.startswith("onnx/tiny@")
    other_weights = tiny_dir(type_table=np.zeros((2, TINY_DIM), dtype=np.float32))
    assert OnnxEmbedder(other_weights).model_id.split("@")[1] != mean.model_id.split("@")[1]


def test_missing_model_dir_and_files(tiny_dir: TinyDir, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist") as info:
        OnnxEmbedder(tmp_path / "nowhere")
    assert info.value.key == "model_dir"
    folder = tiny_dir()
    (folder / "model.onnx").unlink()
    with pytest.raises(ConfigError, match="model.onnx") as info:
        OnnxEmbedder(folder)
    assert info.value.key == "model_file"
    folder = tiny_dir()
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ConfigError, match="tokenizer.json"):
        OnnxEmbedder(folder)


def test_model_file_elsewhere(tiny_dir: TinyDir, tmp_path: Path) -> None:
    folder = tiny_dir()
    moved = tmp_path / "weights.onnx"
    (folder / "model.onnx").rename(moved)
    assert OnnxEmbedder(folder, model_file=moved).embed(["x"]).shape == (1, TINY_DIM)


def test_corrupt_files_are_clear_errors(tiny_dir: TinyDir) -> None:
    folder = tiny_dir()
    (folder / "model.onnx").write_bytes(b"not an onnx graph")
    with pytest.raises(BackendError, match="onnxruntime cannot load"):
        OnnxEmbedder(folder)
    folder = tiny_dir()
    (folder / "tokenizer.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ConfigError, match="tokenizer"):
        OnnxEmbedder(folder)


def test_missing_onnxruntime_names_the_extra(
    tiny_dir: TinyDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tiny_dir()
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # makes `import onnxruntime` fail
    with pytest.raises(MissingExtraError) as info:
        OnnxEmbedder(folder)
    assert info.value.install == "pip install 'amem[onnx]'"
    assert "amem[onnx]" in str(info.value)


def test_bad_settings(tiny_dir: TinyDir) -> None:
    folder = tiny_dir()
    with pytest.raises(ConfigError, match="pooling"):
        OnnxEmbedder(folder, pooling="max")
    with pytest.raises(ConfigError, match="max_length"):
        OnnxEmbedder(folder, max_length=1)
    with pytest.raises(ConfigError):
        OnnxEmbedder(folder, threads=0)


def test_minilm_embeds_every_script(minilm: OnnxEmbedder) -> None:
    vectors = minilm.embed(SCRIPTS, kind="query")
    assert_unit_rows(vectors, len(SCRIPTS), 384)
    np.testing.assert_allclose(vectors, minilm.embed(SCRIPTS, kind="passage"))  # symmetric
    singles = np.vstack([minilm.embed([t]) for t in SCRIPTS])
    np.testing.assert_allclose(vectors, singles, atol=1e-5)


def test_config_files_drive_pooling(tiny_dir: TinyDir, tiny_table: np.ndarray) -> None:
    st_cls = json.dumps({"word_embedding_dimension": 4, "pooling_mode_cls_token": True,
                         "pooling_mode_mean_tokens": False})
    embedder = OnnxEmbedder(tiny_dir({"1_Pooling/config.json": st_cls}))
    assert embedder.config.pooling == "cls"
    np.testing.assert_allclose(embedder.embed(["hello"])[0], unit(tiny_table[CLS]), atol=1e-6)
