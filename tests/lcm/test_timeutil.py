"""A time without an offset is refused with the offset to add, not guessed (a transcript's
local times read as UTC would misplace every message); the CLI's help says so too."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from lcm.errors import LcmValidationError
from lcm.timeutil import parse_time


def test_a_time_without_offset_is_refused_with_the_form_to_give() -> None:
    with pytest.raises(LcmValidationError) as refused:
        parse_time("2024-01-01", "before")
    assert "2024-01-01T00:00:00Z" in str(refused.value) and refused.value.field == "before"
    assert parse_time("2024-01-01T00:00:00Z", "before") == datetime(2024, 1, 1, tzinfo=timezone.utc)
