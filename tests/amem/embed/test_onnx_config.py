"""read_model_config: pooling and length from sentence-transformers files and amem_embed.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amem.embed.onnx_config import read_model_config
from amem.errors import ConfigError


def write(folder: Path, files: dict[str, object]) -> Path:
    for name, content in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content if isinstance(content, str) else json.dumps(content), "utf-8")
    return folder


def st_pooling(**flags: bool) -> dict[str, object]:
    base: dict[str, object] = {"word_embedding_dimension": 384}
    base.update({f"pooling_mode_{k}": v for k, v in flags.items()})
    return base


def test_defaults_without_any_config(tmp_path: Path) -> None:
    config = read_model_config(tmp_path)
    assert (config.pooling, config.max_length, config.name) == ("mean", 512, None)
    assert config.sources == ()


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"mean_tokens": True, "cls_token": False}, "mean"),
        ({"cls_token": True, "mean_tokens": False}, "cls"),
        ({"lasttoken": True}, "last"),
    ],
)
def test_sentence_transformers_pooling(tmp_path: Path, flags: dict[str, bool], expected: str) -> None:
    write(tmp_path, {"1_Pooling/config.json": st_pooling(**flags),
                     "sentence_bert_config.json": {"max_seq_length": 256, "do_lower_case": False}})
    config = read_model_config(tmp_path)
    assert config.pooling == expected
    assert config.max_length == 256
    assert dict(config.sources) == {"pooling": "1_Pooling/config.json",
                                    "max_length": "sentence_bert_config.json"}


def test_modules_json_points_at_the_pooling_folder(tmp_path: Path) -> None:
    write(tmp_path, {
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "2_Pool", "type": "sentence_transformers.models.Pooling"},
        ],
        "2_Pool/config.json": st_pooling(cls_token=True),
        "1_Pooling/config.json": st_pooling(mean_tokens=True),  # stale, not referenced
    })
    assert read_model_config(tmp_path).pooling == "cls"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"max_tokens": True}, "pooling_mode_max_tokens"),
        ({"mean_sqrt_len_tokens": True, "mean_tokens": False}, "mean_sqrt_len"),
        ({"mean_tokens": True, "cls_token": True}, "exactly one"),
        ({"mean_tokens": False}, "exactly one"),
    ],
)
def test_unsupported_or_ambiguous_pooling(tmp_path: Path, flags: dict[str, bool], message: str) -> None:
    write(tmp_path, {"1_Pooling/config.json": st_pooling(**flags)})
    with pytest.raises(ConfigError, match=message):
        read_model_config(tmp_path)


def test_amem_file_wins_over_sentence_transformers(tmp_path: Path) -> None:
    write(tmp_path, {
        "1_Pooling/config.json": st_pooling(mean_tokens=True),
        "sentence_bert_config.json": {"max_seq_length": 256},
        "amem_embed.json": {"pooling": "cls", "max_length": 128, "name": "e5-export",
                            "query_prefix": "query: ", "passage_prefix": "passage: ",
                            "output": "last_hidden_state"},
    })
    config = read_model_config(tmp_path)
    assert (config.pooling, config.max_length, config.name) == ("cls", 128, "e5-export")
    assert (config.query_prefix, config.passage_prefix) == ("query: ", "passage: ")
    assert config.output == "last_hidden_state"
    assert dict(config.sources)["pooling"] == "amem_embed.json"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"poolling": "mean"}, "unknown key"),
        ({"pooling": "max"}, "unsupported pooling 'max'"),
        ({"max_length": "long"}, "max_length"),
        ({"max_length": 1}, "max_length"),
        ({"query_prefix": 3}, "query_prefix"),
        ([1, 2], "JSON object"),
        ("{not json", "cannot read"),
    ],
)
def test_bad_amem_file(tmp_path: Path, content: object, message: str) -> None:
    write(tmp_path, {"amem_embed.json": content})
    with pytest.raises(ConfigError, match=message):
        read_model_config(tmp_path)


def test_tokenizer_config_length_is_used_and_capped(tmp_path: Path) -> None:
    write(tmp_path, {"tokenizer_config.json": {"model_max_length": 1000000000000000019884624838656}})
    assert read_model_config(tmp_path).max_length == 8192
    write(tmp_path, {"tokenizer_config.json": {"model_max_length": 384}})
    assert read_model_config(tmp_path).max_length == 384
    # sentence_bert_config.json is the model's own limit and wins over the tokenizer's.
    write(tmp_path, {"sentence_bert_config.json": {"max_seq_length": 128}})
    assert read_model_config(tmp_path).max_length == 128


def test_shipped_minilm_config() -> None:
    from amem.embed.minilm import MINILM_DIR

    config = read_model_config(MINILM_DIR)
    assert (config.pooling, config.max_length, config.name) == ("mean", 256, "all-MiniLM-L6-v2-int8")
    assert (MINILM_DIR / "NOTICE.txt").is_file()
