"""Translation of the backend-neutral filter tree (``Where``) into each engine's filter type.

Both translators share one validation pass and one normalisation of ``MatchAny``: the engines'
``MatchAny`` takes only all-string or all-integer lists, so booleans and mixed lists become a
``should`` of single matches. An empty ``MatchAny`` or ``HasId`` matches nothing, as it does in
Qdrant itself.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import qdrant_edge as qe

if TYPE_CHECKING:  # imported when first used: qdrant_client costs ~0.5 s at every CLI start
    from qdrant_client import models as qm

from amem.backends._common import check_id
from amem.backends.base import (Condition, HasId, IsEmpty, Match, MatchAny, Range, Scalar,
                                Where)
from amem.errors import ValidationError



def _check_field(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValidationError(f"filter field must be a non-empty string, got {name!r}", field="where")
    return name


def _check_scalar(value: Any) -> Scalar:
    # bool is an int subclass; both are fine. Floats are not keyword-matchable in Qdrant.
    if not isinstance(value, (str, int)):
        raise ValidationError(
            f"filter value must be str, int or bool, got {type(value).__name__} {value!r}", field="where"
        )
    return value


def validate(where: Any) -> Where | None:
    """Check a whole filter tree; returns it unchanged (None stays None)."""
    if where is None:
        return None
    if not isinstance(where, Where):
        raise ValidationError(f"where must be a Where, got {type(where).__name__}", field="where")
    _validate_node(where)
    return where


def _validate_node(node: Any) -> None:
    if isinstance(node, Match):
        _check_field(node.field)
        _check_scalar(node.value)
    elif isinstance(node, MatchAny):
        _check_field(node.field)
        if not isinstance(node.values, (tuple, list)):
            raise ValidationError("MatchAny.values must be a tuple", field="where")
        for v in node.values:
            _check_scalar(v)
    elif isinstance(node, IsEmpty):
        _check_field(node.field)
    elif isinstance(node, Range):
        _check_field(node.field)
        bounds = [node.gte, node.gt, node.lte, node.lt]
        if all(b is None for b in bounds):
            raise ValidationError(f"Range on {node.field!r} needs at least one bound", field="where")
        for b in bounds:
            if b is not None and (isinstance(b, bool) or not isinstance(b, (int, float))
                                  or not math.isfinite(b)):
                raise ValidationError(f"Range bounds must be finite numbers, got {b!r}",
                                      field="where")
    elif isinstance(node, HasId):
        if isinstance(node.ids, str) or not isinstance(node.ids, (tuple, list)):
            raise ValidationError("HasId.ids must be a tuple of UUID strings", field="where")
        for i in node.ids:
            check_id(i, "where")
    elif isinstance(node, Where):
        for group in (node.must, node.should, node.must_not):
            if not isinstance(group, (tuple, list)):
                raise ValidationError("Where.must/should/must_not must be tuples", field="where")
            for child in group:
                _validate_node(child)
    else:
        raise ValidationError(f"unknown filter node {type(node).__name__}", field="where")


def _any_groups(values: tuple[Scalar, ...]) -> tuple[list[str], list[int], list[bool]]:
    strs = [v for v in values if isinstance(v, str)]
    bools = [v for v in values if isinstance(v, bool)]
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return strs, ints, bools


class _Builder:
    """The engine-specific constructors one translation needs."""

    def __init__(
        self,
        filter_: Callable[[list[Any], list[Any], list[Any]], Any],
        value: Callable[[str, Scalar], Any],
        any_: Callable[[str, list[Any]], Any],
        empty: Callable[[str], Any],
        has_id: Callable[[list[str]], Any],
        range_: Callable[[str, dict[str, float]], Any],
    ) -> None:
        self.filter, self.value, self.any, self.empty, self.has_id = filter_, value, any_, empty, has_id
        self.range = range_

    def node(self, node: Condition) -> Any:
        if isinstance(node, Match):
            return self.value(node.field, node.value)
        if isinstance(node, MatchAny):
            strs, ints, bools = _any_groups(tuple(node.values))
            parts = [self.any(node.field, g) for g in (strs, ints) if g]
            parts += [self.value(node.field, b) for b in dict.fromkeys(bools)]
            if len(parts) == 1:
                return parts[0]
            if not parts:  # MatchAny of nothing matches nothing
                return self.any(node.field, [])
            return self.filter([], parts, [])
        if isinstance(node, IsEmpty):
            return self.empty(node.field)
        if isinstance(node, HasId):
            return self.has_id([check_id(i, "where") for i in node.ids])
        if isinstance(node, Range):
            bounds = {k: float(v) for k, v in (("gte", node.gte), ("gt", node.gt),
                                               ("lte", node.lte), ("lt", node.lt)) if v is not None}
            return self.range(node.field, bounds)
        return self.where(node)

    def where(self, where: Where) -> Any:
        return self.filter(
            [self.node(c) for c in where.must],
            [self.node(c) for c in where.should],
            [self.node(c) for c in where.must_not],
        )


def _edge_value(field: str, value: Scalar) -> Any:
    # qdrant-edge 0.9.0 reads a Python bool as the integer 1/0 (bool is an int subclass), so
    # `MatchValue(True)` would never match a stored `true`. numpy.bool_ is not an int and
    # reaches the engine as a real boolean.
    v: Any = np.bool_(value) if isinstance(value, bool) else value
    return qe.FieldCondition(field, match=qe.MatchValue(v))


_EDGE = _Builder(
    filter_=lambda must, should, must_not: qe.Filter(
        must=must or None, should=should or None, must_not=must_not or None
    ),
    value=_edge_value,
    any_=lambda field, values: qe.FieldCondition(field, match=qe.MatchAny(values)),
    empty=lambda field: qe.IsEmptyCondition(field),
    has_id=lambda ids: qe.HasIdCondition(set(ids)),
    range_=lambda field, bounds: qe.FieldCondition(field, range=qe.RangeFloat(**bounds)),
)

@functools.cache
def _client_builder() -> _Builder:
    """The qdrant-client translator, built on first use (only the server backend needs it)."""
    from qdrant_client import models as qm

    return _Builder(
        filter_=lambda must, should, must_not: qm.Filter(
            must=must or None, should=should or None, must_not=must_not or None
        ),
        value=lambda field, value: qm.FieldCondition(key=field, match=qm.MatchValue(value=value)),
        any_=lambda field, values: qm.FieldCondition(key=field, match=qm.MatchAny(any=values)),
        empty=lambda field: qm.IsEmptyCondition(is_empty=qm.PayloadField(key=field)),
        has_id=lambda ids: qm.HasIdCondition(has_id=list(ids)),
        range_=lambda field, bounds: qm.FieldCondition(key=field, range=qm.Range(**bounds)),
    )


def to_edge(where: Where | None) -> qe.Filter | None:
    """The qdrant-edge filter for ``where`` (validated first)."""
    where = validate(where)
    return None if where is None else _EDGE.where(where)


def to_client(where: Where | None) -> "qm.Filter | None":
    """The qdrant-client filter for ``where`` (validated first)."""
    where = validate(where)
    return None if where is None else _client_builder().where(where)
