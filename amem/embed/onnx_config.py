"""Reads how to run an exported sentence-embedding model from the files beside its ``model.onnx``.

Two sources, merged key by key (``amem_embed.json`` wins, explicit ``OnnxEmbedder`` arguments
win over both):

* a sentence-transformers export: ``modules.json`` points at the pooling module folder
  (``1_Pooling`` when there is no ``modules.json``), whose ``config.json`` names the pooling
  mode; ``sentence_bert_config.json`` gives ``max_seq_length``;
* ``amem_embed.json``, a small file of our own for exports that carry no such files::

      {"name": "bge-m3", "pooling": "cls", "max_length": 512,
       "query_prefix": "", "passage_prefix": "", "output": "last_hidden_state"}

With neither, pooling is mean over the attention mask and ``max_length`` comes from
``tokenizer_config.json`` (``model_max_length``, capped at 8192) or 512.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from amem.errors import ConfigError

__all__ = ["OnnxModelConfig", "POOLINGS", "read_model_config", "AMEM_CONFIG_FILE"]

Pooling = Literal["mean", "cls", "last"]
POOLINGS: tuple[Pooling, ...] = ("mean", "cls", "last")
AMEM_CONFIG_FILE = "amem_embed.json"
_AMEM_KEYS = {"name", "pooling", "max_length", "query_prefix", "passage_prefix", "output"}
_DEFAULT_MAX_LENGTH = 512
# Some tokenizer configs say model_max_length = 1e30 ("no limit"); never pad or allocate that.
_MAX_LENGTH_CAP = 8192
# sentence-transformers pooling flags -> our names; the others have no equivalent here.
_ST_MODES: dict[str, Pooling] = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_lasttoken": "last",
}
_ST_UNSUPPORTED = ("pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                   "pooling_mode_weightedmean_tokens")


@dataclass(frozen=True)
class OnnxModelConfig:
    """How to tokenise, run and pool one model; ``sources`` says where each value came from."""

    pooling: Pooling = "mean"
    max_length: int = _DEFAULT_MAX_LENGTH
    query_prefix: str = ""
    passage_prefix: str = ""
    name: str | None = None
    output: str | None = None
    sources: tuple[tuple[str, str], ...] = ()


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", key=str(path)) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object", key=str(path))
    return data


def check_pooling(value: object, where: str) -> Pooling:
    """Return ``value`` as a pooling name or raise ``ConfigError`` naming where it came from."""
    for pooling in POOLINGS:
        if value == pooling:
            return pooling
    raise ConfigError(
        f"unsupported pooling {value!r} in {where}; supported: {', '.join(POOLINGS)}",
        key="pooling",
    )


def check_max_length(value: object, where: str) -> int:
    """Return ``value`` as a token limit (2 or more) or raise ``ConfigError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise ConfigError(
            f"max_length must be an integer >= 2, got {value!r} in {where}", key="max_length"
        )
    return value


def _st_pooling_dir(model_dir: Path) -> Path:
    modules = model_dir / "modules.json"
    if modules.is_file():
        try:
            entries = json.loads(modules.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read {modules}: {exc}", key=str(modules)) from exc
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and str(entry.get("type", "")).endswith("Pooling"):
                return model_dir / str(entry.get("path", "1_Pooling"))
    return model_dir / "1_Pooling"


def _st_pooling(config_path: Path) -> Pooling:
    data = _read_json(config_path)
    chosen = [ours for flag, ours in _ST_MODES.items() if data.get(flag)]
    unsupported = [flag for flag in _ST_UNSUPPORTED if data.get(flag)]
    if unsupported:
        raise ConfigError(
            f"{config_path} asks for {', '.join(unsupported)}, which amem does not implement; "
            f"supported: {', '.join(POOLINGS)} (override with pooling=...)",
            key="pooling",
        )
    if len(chosen) != 1:
        raise ConfigError(
            f"{config_path} must switch on exactly one pooling mode, found {chosen or 'none'}",
            key="pooling",
        )
    return chosen[0]


def read_model_config(model_dir: Path) -> OnnxModelConfig:
    """Merge the sentence-transformers files and ``amem_embed.json`` found in ``model_dir``."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    tok_config = model_dir / "tokenizer_config.json"
    if tok_config.is_file():
        limit = _read_json(tok_config).get("model_max_length")
        if isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit >= 2:
            values["max_length"] = int(min(limit, _MAX_LENGTH_CAP))
            sources["max_length"] = tok_config.name

    pooling_config = _st_pooling_dir(model_dir) / "config.json"
    if pooling_config.is_file():
        values["pooling"] = _st_pooling(pooling_config)
        sources["pooling"] = str(pooling_config.relative_to(model_dir))
    sbert = model_dir / "sentence_bert_config.json"
    if sbert.is_file():
        seq = _read_json(sbert).get("max_seq_length")
        if seq is not None:
            values["max_length"] = check_max_length(seq, str(sbert))
            sources["max_length"] = sbert.name

    ours = model_dir / AMEM_CONFIG_FILE
    if ours.is_file():
        data = _read_json(ours)
        unknown = sorted(set(data) - _AMEM_KEYS)
        if unknown:
            raise ConfigError(
                f"unknown key(s) {unknown} in {ours}; allowed: {sorted(_AMEM_KEYS)}",
                key=unknown[0],
            )
        for key, value in data.items():
            if key == "pooling":
                value = check_pooling(value, str(ours))
            elif key == "max_length":
                value = check_max_length(value, str(ours))
            elif not isinstance(value, str):
                raise ConfigError(f"{key} in {ours} must be a string, got {value!r}", key=key)
            values[key] = value
            sources[key] = AMEM_CONFIG_FILE

    return OnnxModelConfig(**values, sources=tuple(sorted(sources.items())))
