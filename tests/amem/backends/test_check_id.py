"""``check_id``: every spelling of a UUID comes back canonical, anything else is refused."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, strategies as st

from amem.backends._common import check_id, check_ids
from amem.errors import ValidationError

CANON = "496e16cb-9690-5249-a1cd-f6f85c4fde96"


@pytest.mark.parametrize("spelling", [
    CANON, CANON.upper(), "{" + CANON + "}", CANON.replace("-", ""), "urn:uuid:" + CANON,
    "496E16CB-9690-5249-A1CD-f6f85c4fde96",
])
def test_every_spelling_of_a_uuid_comes_back_canonical(spelling: str) -> None:
    assert check_id(spelling) == CANON


@pytest.mark.parametrize("bad", [
    "", "n8425", CANON + "\n", " " + CANON, CANON[:-1], CANON + "0", CANON.replace("-", "_"),
    "496e16cb-9690-5249-a1cd-f6f85c4fde9g",
])
def test_what_is_not_a_uuid_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="not a UUID"):
        check_id(bad)


def test_a_non_string_is_refused() -> None:
    with pytest.raises(ValidationError, match="must be a UUID string"):
        check_id(uuid.UUID(CANON))


@given(st.uuids(), st.sampled_from([str, lambda u: str(u).upper(), lambda u: u.hex,
                                    lambda u: "{%s}" % u]))
def test_the_canonical_form_is_the_uuid_module_s(value: uuid.UUID, spell: object) -> None:
    text = spell(value)  # type: ignore[operator]
    assert check_id(text) == str(value)
    assert check_ids([text, str(value)]) == [str(value)]  # one id, however spelled
