"""Writes tiny real ONNX models (embedding lookups) for the ONNX backend's tests.

The ``onnx`` package is not a dependency, so the protobuf wire format is written by hand: a
model is a few nested messages, and only varints and length-delimited fields are needed. The
models are real graphs that onnxruntime loads and runs; because they only look token ids up in
a table, the expected pooled vectors can be computed exactly in numpy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

_FLOAT, _INT32, _INT64 = 1, 6, 7


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _bytes(field: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint((field << 3) | 2) + _varint(len(data)) + data


def _value_info(name: str, elem_type: int, dims: list[int | str]) -> bytes:
    shape = b"".join(
        _bytes(1, _int(1, d) if isinstance(d, int) else _bytes(2, d)) for d in dims
    )
    tensor_type = _int(1, elem_type) + _bytes(2, shape)
    return _bytes(1, name) + _bytes(2, _bytes(1, tensor_type))


def _tensor(name: str, array: np.ndarray) -> bytes:
    array = np.ascontiguousarray(array, dtype=np.float32)
    dims = b"".join(_int(1, d) for d in array.shape)
    return dims + _int(2, _FLOAT) + _bytes(8, name) + _bytes(9, array.tobytes())


def _node(op: str, inputs: list[str], outputs: list[str], attrs: bytes = b"") -> bytes:
    body = b"".join(_bytes(1, i) for i in inputs) + b"".join(_bytes(2, o) for o in outputs)
    return body + _bytes(4, op) + attrs


def _ints_attr(name: str, values: list[int]) -> bytes:
    # AttributeProto: name=1, ints=8, type=20 (INTS = 7)
    body = _bytes(1, name) + b"".join(_int(8, v) for v in values) + _int(20, 7)
    return _bytes(5, body)


def write_lookup_model(
    path: Path,
    table: np.ndarray,
    *,
    type_table: np.ndarray | None = None,
    index_type: str = "int64",
    pooled_output: bool = False,
    with_attention_mask: bool = True,
    extra_input: str | None = None,
) -> None:
    """Write a model whose token vectors are ``table[input_ids]`` (+ ``type_table[token_type_ids]``).

    ``pooled_output`` adds a ReduceMean over the sequence (a model that pools inside the graph,
    over padding too). ``extra_input`` declares an input amem does not know how to feed.
    """
    elem = _INT32 if index_type == "int32" else _INT64
    inputs = [_value_info("input_ids", elem, ["batch", "seq"])]
    if with_attention_mask:
        inputs.append(_value_info("attention_mask", elem, ["batch", "seq"]))
    nodes = [_node("Gather", ["table", "input_ids"], ["tokens"])]
    initializers = [_tensor("table", table)]
    last = "tokens"
    if type_table is not None:
        inputs.append(_value_info("token_type_ids", elem, ["batch", "seq"]))
        initializers.append(_tensor("type_table", type_table))
        nodes.append(_node("Gather", ["type_table", "token_type_ids"], ["types"]))
        nodes.append(_node("Add", ["tokens", "types"], ["summed"]))
        last = "summed"
    if extra_input:
        inputs.append(_value_info(extra_input, elem, ["batch", "seq"]))
    dim = int(table.shape[1])
    if pooled_output:
        nodes.append(
            _node("ReduceMean", [last], ["sentence_embedding"],
                  _ints_attr("axes", [1]) + _bytes(5, _bytes(1, "keepdims") + _int(3, 0)
                                                   + _int(20, 2)))
        )
        outputs = [_value_info("sentence_embedding", _FLOAT, ["batch", dim])]
    else:
        nodes.append(_node("Identity", [last], ["last_hidden_state"]))
        outputs = [_value_info("last_hidden_state", _FLOAT, ["batch", "seq", dim])]
    graph = (
        b"".join(_bytes(1, n) for n in nodes)
        + _bytes(2, "tiny")
        + b"".join(_bytes(5, t) for t in initializers)
        + b"".join(_bytes(11, i) for i in inputs)
        + b"".join(_bytes(12, o) for o in outputs)
    )
    opset = _bytes(1, "") + _int(2, 13)
    model = _int(1, 8) + _bytes(2, "amem-tests") + _bytes(7, graph) + _bytes(8, opset)
    path.write_bytes(model)
