"""A small JSON object file replaced atomically: the embedded store's ``meta.json``.

A reader sees the old file or the new one, never half of either (``amem.atomicfile``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from amem.atomicfile import write_text_atomic
from amem.errors import BackendError, ValidationError


def read_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; {} when the file does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise BackendError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise BackendError(f"{path} does not hold a JSON object")
    return value


def write_object(path: Path, value: dict[str, Any]) -> None:
    """Replace ``path`` with ``value`` as JSON, atomically and durably."""
    if not isinstance(value, dict):
        raise ValidationError("meta must be a dict", field="meta")
    try:
        text = json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"meta is not JSON-serialisable: {exc}", field="meta") from exc
    write_text_atomic(path, text)
