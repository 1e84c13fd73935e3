"""An embedder for any exported sentence-embedding model, run by onnxruntime + tokenizers.

A model directory holds ``model.onnx`` and ``tokenizer.json`` (a Hugging Face fast tokenizer),
plus optional config files that say how to pool (see ``amem.embed.onnx_config``). That covers
MiniLM, multilingual-e5, bge-m3 and similar exports a user brings.

How a batch runs: the whole call is tokenised once (truncated to ``max_length`` tokens, special
tokens included), rows are sorted by length so each batch pads little, each batch is padded on
the right to its own longest row, the model runs once per batch, and token vectors are pooled
(mean over the attention mask, the CLS token, or the last real token) and L2-normalised.
Results go back in the caller's order. Only the inputs the graph declares are fed:
``input_ids``, ``attention_mask``, and ``token_type_ids`` / ``position_ids`` when present.

A graph that pools itself (a rank-2 output such as ``sentence_embedding``) is used as it is:
its ``model_id`` says ``graph`` instead of a pooling name, and a ``pooling`` argument is ignored
with a warning. Such a graph usually averages over padding too, so keep its batches small.

Output is always unit length, even for a model whose sentence-transformers export has no
``Normalize`` step: the ``Embedder`` contract promises it and the store ranks by cosine, which
normalising does not change.

Sessions and tokenizers load once per process into caches keyed by file paths and thread
count (length for a tokenizer), so two embedders over the same model share one session. The
tokenizer is a seam (``TextTokenizer``): ``tokenizers`` by default, or one the caller hands in.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from amem.embed._common import check_positive_int, check_texts, empty
from amem.embed.base import Kind, l2_normalise
from amem.embed.onnx_config import (
    OnnxModelConfig,
    Pooling,
    check_max_length,
    check_pooling,
    read_model_config,
)
from amem.errors import BackendError, ConfigError, MissingExtraError

__all__ = ["HFTokenizer", "OnnxEmbedder", "TextTokenizer", "load_hf_tokenizer", "pad_id_of",
           "pool"]

log = logging.getLogger(__name__)

ONNX_INSTALL = "pip install 'amem[onnx]'"
_FEEDABLE = {"input_ids", "attention_mask", "token_type_ids", "position_ids"}
_PAD_CANDIDATES = ("[PAD]", "<pad>", "<|pad|>", "<|endoftext|>")
_PREFERRED_OUTPUTS = ("last_hidden_state", "token_embeddings")
_FINGERPRINT_SPAN = 1 << 20
_CACHE_LOCK = threading.Lock()  # guards the session and tokenizer caches below


class TextTokenizer(Protocol):
    """The seam between text and the model: token ids per text, already cut to ``max_length``.

    ``OnnxEmbedder`` loads a ``tokenizers`` one from ``tokenizer.json`` unless it is handed
    another (the default e5 embedder passes its compact ``amem.embed.unigram`` tokenizer).
    """

    @property
    def max_length(self) -> int:
        """Tokens per text at most, special tokens included."""
        ...

    @property
    def pad_id(self) -> int:
        """The id that pads a batch's shorter rows."""
        ...

    def encode_batch(self, texts: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        """``(token ids, token type ids)`` per text, special tokens added, cut to fit."""
        ...


def _missing(exc: ImportError) -> MissingExtraError:
    return MissingExtraError(
        f"the ONNX embedder needs onnxruntime and tokenizers ({exc.name} is missing)",
        install=ONNX_INSTALL,
    )


def _import_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:
        raise _missing(exc) from exc
    return onnxruntime


class HFTokenizer:
    """A ``tokenizers.Tokenizer`` from a ``tokenizer.json``, as :class:`TextTokenizer`."""

    def __init__(self, tokenizer: Any, max_length: int) -> None:
        self._pad_id = pad_id_of(tokenizer.token_to_id, tokenizer.padding)
        # We pad per batch ourselves; a fixed-length padding in tokenizer.json (MiniLM's says
        # 128) would waste work and would cut nothing, so switch it off.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_length)
        self._tokenizer = tokenizer
        self._max_length = max_length

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def pad_id(self) -> int:
        return self._pad_id

    @property
    def tokenizer(self) -> Any:
        """The wrapped ``tokenizers.Tokenizer`` (truncation to ``max_length`` switched on)."""
        return self._tokenizer

    def encode_batch(self, texts: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        return [(enc.ids, enc.type_ids) for enc in self._tokenizer.encode_batch(list(texts))]


_TOKENIZERS: dict[tuple[str, int], HFTokenizer] = {}


def load_hf_tokenizer(tokenizer_file: Path, max_length: int) -> HFTokenizer:
    """The ``tokenizers`` tokenizer of ``tokenizer_file``, once per process for each length."""
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise _missing(exc) from exc
    key = (str(tokenizer_file), max_length)
    with _CACHE_LOCK:
        cached = _TOKENIZERS.get(key)
        if cached is not None:
            return cached
        try:
            loaded = Tokenizer.from_file(str(tokenizer_file))
        except Exception as exc:  # tokenizers raises a bare Exception on a bad file
            raise ConfigError(
                f"cannot load tokenizer {tokenizer_file}: {exc}", key="tokenizer"
            ) from exc
        wrapped = _TOKENIZERS[key] = HFTokenizer(loaded, max_length)
        return wrapped


def pool(hidden: np.ndarray, mask: np.ndarray, pooling: Pooling) -> np.ndarray:
    """Pool token vectors ``[batch, seq, dim]`` into ``[batch, dim]`` (rows right-padded)."""
    if pooling == "cls":
        return hidden[:, 0, :]
    lengths = mask.sum(axis=1)
    if pooling == "last":
        last = np.maximum(lengths - 1, 0)
        return hidden[np.arange(hidden.shape[0]), last, :]
    weights = mask[:, :, None].astype(hidden.dtype)
    summed: np.ndarray = (hidden * weights).sum(axis=1)
    mean: np.ndarray = summed / np.maximum(lengths, 1)[:, None].astype(hidden.dtype)
    return mean


def _fingerprint(model_file: Path, tokenizer_file: Path) -> str:
    """A short stable id of the two files: size and both ends of the model (hashing a 2 GB
    export whole would add seconds to every start), the whole tokenizer."""
    digest = hashlib.sha256()
    size = model_file.stat().st_size
    digest.update(str(size).encode())
    with model_file.open("rb") as handle:
        digest.update(handle.read(_FINGERPRINT_SPAN))
        if size > _FINGERPRINT_SPAN:
            handle.seek(max(size - _FINGERPRINT_SPAN, _FINGERPRINT_SPAN))
            digest.update(handle.read())
    digest.update(tokenizer_file.read_bytes())
    return digest.hexdigest()[:12]


@dataclass
class _Runtime:
    session: Any
    inputs: dict[str, np.dtype]
    output: str
    pooled_output: bool


_CACHE: dict[tuple[str, int, str | None], _Runtime] = {}


def pad_id_of(token_to_id: Callable[[str], int | None], padding: Any = None) -> int:
    """The padding id: the file's padding setting, else the first known pad token, else 0."""
    if padding and isinstance(padding.get("pad_id"), int):
        return int(padding["pad_id"])
    for token in _PAD_CANDIDATES:
        found = token_to_id(token)
        if found is not None:
            return int(found)
    return 0


def _load_runtime(model_file: Path, threads: int, output: str | None) -> _Runtime:
    # Imported before the cache lookup so a missing extra is reported on every construction.
    ort = _import_onnxruntime()
    key = (str(model_file), threads, output)
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(
                str(model_file), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped Fail/InvalidGraph errors
            raise BackendError(f"onnxruntime cannot load {model_file}: {exc}") from exc
        inputs: dict[str, np.dtype] = {}
        for spec in session.get_inputs():
            if spec.name not in _FEEDABLE:
                raise ConfigError(
                    f"{model_file} needs input {spec.name!r}, which amem cannot feed "
                    f"(it feeds {sorted(_FEEDABLE)})",
                    key="model_file",
                )
            inputs[spec.name] = np.dtype(np.int32 if spec.type == "tensor(int32)" else np.int64)
        if "input_ids" not in inputs:
            raise ConfigError(f"{model_file} has no 'input_ids' input", key="model_file")
        outputs = session.get_outputs()
        by_name = {spec.name: spec for spec in outputs}
        if output is not None:
            if output not in by_name:
                raise ConfigError(
                    f"output {output!r} not in {model_file}; it has {sorted(by_name)}",
                    key="output",
                )
            chosen = by_name[output]
        else:
            chosen = next((by_name[n] for n in _PREFERRED_OUTPUTS if n in by_name), outputs[0])
        rank = len(chosen.shape)
        if rank not in (2, 3):
            raise ConfigError(
                f"output {chosen.name!r} of {model_file} has rank {rank}; expected token "
                "vectors [batch, seq, dim] or sentence vectors [batch, dim]",
                key="output",
            )
        runtime = _Runtime(
            session=session,
            inputs=inputs,
            output=chosen.name,
            pooled_output=rank == 2,
        )
        _CACHE[key] = runtime
        log.info("loaded ONNX model %s (output %s, %d threads)", model_file, chosen.name, threads)
        return runtime


class OnnxEmbedder:
    """Sentence embeddings from an exported ONNX model directory.

    Args:
        model_dir: folder with ``tokenizer.json`` and (unless ``model_file`` is given)
            ``model.onnx``, plus optional pooling config files.
        model_file: the ONNX graph, when it lives elsewhere (a package's data file).
        pooling: ``"mean"``, ``"cls"`` or ``"last"``; overrides the directory's config.
        max_length: token limit per text including special tokens; longer texts are cut.
        threads: onnxruntime intra-op threads.
        batch_size: texts per model run.
        query_prefix / passage_prefix: prepended per ``kind`` (e5 exports want
            ``"query: "`` / ``"passage: "``); ``None`` keeps the directory's config.
        name: the model name in ``model_id``; defaults to the config's or the folder name.
        tokenizer: turns texts into ids instead of a ``tokenizers`` load of the folder's
            ``tokenizer.json`` (which then only enters the fingerprint); its ``max_length``
            must equal the one in force.
    """

    def __init__(
        self,
        model_dir: str | Path,
        *,
        model_file: str | Path | None = None,
        pooling: str | None = None,
        max_length: int | None = None,
        threads: int = 1,
        batch_size: int = 32,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        name: str | None = None,
        tokenizer: TextTokenizer | None = None,
    ) -> None:
        check_positive_int(threads, "threads")
        check_positive_int(batch_size, "batch_size")
        directory = Path(model_dir).expanduser()
        if not directory.is_dir():
            raise ConfigError(
                f"ONNX model directory {str(directory)!r} does not exist or is not a folder",
                key="model_dir",
            )
        onnx_file = Path(model_file).expanduser() if model_file else directory / "model.onnx"
        tokenizer_file = directory / "tokenizer.json"
        for path, key in ((onnx_file, "model_file"), (tokenizer_file, "tokenizer")):
            if not path.is_file():
                raise ConfigError(f"ONNX model file {str(path)!r} is missing", key=key)

        base = read_model_config(directory)
        self._config = OnnxModelConfig(
            pooling=check_pooling(pooling, "pooling argument") if pooling else base.pooling,
            max_length=(
                check_max_length(max_length, "max_length argument")
                if max_length is not None
                else base.max_length
            ),
            query_prefix=base.query_prefix if query_prefix is None else query_prefix,
            passage_prefix=base.passage_prefix if passage_prefix is None else passage_prefix,
            name=name or base.name or directory.resolve().name,
            output=base.output,
            sources=base.sources,
        )
        self._model_file = onnx_file.resolve()
        self._tokenizer_file = tokenizer_file.resolve()
        self._threads = threads
        self._batch_size = batch_size
        self._runtime = _load_runtime(self._model_file, threads, self._config.output)
        if tokenizer is None:
            tokenizer = load_hf_tokenizer(self._tokenizer_file, self._config.max_length)
        elif tokenizer.max_length != self._config.max_length:
            raise ConfigError(
                f"the tokenizer cuts at {tokenizer.max_length} tokens but max_length is "
                f"{self._config.max_length}",
                key="max_length",
            )
        self._tokenizer = tokenizer
        if self._runtime.pooled_output and pooling:
            # Visible, not silent: the graph already pools, so the asked-for pooling cannot apply.
            log.warning(
                "%s outputs sentence vectors (%s); pooling=%r is ignored",
                self._model_file,
                self._runtime.output,
                pooling,
            )
        self._dim = self._probe_dim()
        self._model_id = self._make_model_id()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def config(self) -> OnnxModelConfig:
        """The settings in force after merging config files and arguments."""
        return self._config

    @property
    def tokenizer(self) -> TextTokenizer:
        """The tokenizer in use (cuts to ``max_length``)."""
        return self._tokenizer

    def _make_model_id(self) -> str:
        config = self._config
        parts = [
            f"onnx/{config.name}@{_fingerprint(self._model_file, self._tokenizer_file)}",
            "graph" if self._runtime.pooled_output else config.pooling,
            f"len{config.max_length}",
        ]
        if config.query_prefix or config.passage_prefix:
            prefixes = f"{config.query_prefix}\x00{config.passage_prefix}".encode()
            parts.append("p" + hashlib.sha256(prefixes).hexdigest()[:8])
        return "/".join(parts)

    def _probe_dim(self) -> int:
        spec = next(s for s in self._runtime.session.get_outputs() if s.name == self._runtime.output)
        last = spec.shape[-1]
        if isinstance(last, int) and last > 0:
            return last
        return int(self._run(["probe"]).shape[1])

    def _run(self, texts: list[str]) -> np.ndarray:
        runtime = self._runtime
        encodings = self._tokenizer.encode_batch(texts)
        pad_id = self._tokenizer.pad_id
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i][0]))
        out: np.ndarray | None = None
        for start in range(0, len(order), self._batch_size):
            rows = order[start : start + self._batch_size]
            width = max(len(encodings[i][0]) for i in rows)
            ids = np.full((len(rows), width), pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            types = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                token_ids, type_ids = encodings[i]
                n = len(token_ids)
                ids[r, :n] = token_ids
                mask[r, :n] = 1  # no padding inside one encoding: every token is real
                types[r, :n] = type_ids
            available = {
                "input_ids": ids,
                "attention_mask": mask,
                "token_type_ids": types,
                "position_ids": np.broadcast_to(np.arange(width, dtype=np.int64), ids.shape),
            }
            feed = {name: available[name].astype(dtype) for name, dtype in runtime.inputs.items()}
            try:
                (result,) = runtime.session.run([runtime.output], feed)
            except Exception as exc:  # onnxruntime's errors are untyped
                raise BackendError(f"onnxruntime failed on {self._model_file}: {exc}") from exc
            vectors = result if runtime.pooled_output else pool(result, mask, self._config.pooling)
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
        assert out is not None
        return l2_normalise(out)

    def embed(self, texts: Sequence[str], kind: Kind = "passage") -> np.ndarray:
        """Return unit-length float32 rows; ``kind`` selects the configured prefix."""
        items = check_texts(texts, kind)
        if not items:
            return empty(self._dim)
        prefix = self._config.query_prefix if kind == "query" else self._config.passage_prefix
        if prefix:
            items = [prefix + text for text in items]
        return self._run(items)

    def __repr__(self) -> str:
        return f"OnnxEmbedder({str(self._model_file.parent)!r}, model_id={self._model_id!r})"
