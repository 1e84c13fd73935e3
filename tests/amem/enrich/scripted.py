"""A scripted LLM for enrichment tests: a real, small implementation of the amem.llm.LLM seam."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Union

from amem.llm import check_shape, parse_json_object

Step = Union[dict[str, Any], str, Exception]


@dataclass
class ScriptedLLM:
    """Answers ``complete_json`` with the next scripted step: a dict (checked against the schema,
    as the real client does), a raw string (parsed the same way), or an exception to raise."""

    steps: list[Step] = field(default_factory=list)
    model: str = "scripted"
    calls: list[dict[str, Any]] = field(default_factory=list)

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        step = self._next(system, user, None)
        return step if isinstance(step, str) else json.dumps(step)

    def complete_json(self, system: str, user: str, *, schema: dict[str, Any], name: str) -> dict[str, Any]:
        step = self._next(system, user, name)
        value = parse_json_object(step) if isinstance(step, str) else step
        check_shape(value, schema, raw=json.dumps(value))
        return value

    def _next(self, system: str, user: str, name: str | None) -> Any:
        self.calls.append({"system": system, "user": user, "name": name})
        if not self.steps:
            raise AssertionError("ScriptedLLM: no step left for this call")
        step = self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        return step
