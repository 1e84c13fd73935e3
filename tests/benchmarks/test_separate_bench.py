"""The separation benchmark runs end to end on the first LoCoMo turns (hashing embedder):
every join undone gives each turn its own note back, and nothing it separated joins again."""

from __future__ import annotations

import pytest

from benchmarks.datasets import DEFAULT_LOCOMO
from benchmarks.separate_bench import run

pytestmark = pytest.mark.skipif(not DEFAULT_LOCOMO.exists(),
                                reason=f"benchmark data not found at {DEFAULT_LOCOMO}")


@pytest.mark.parametrize("oldest_first", [False, True])
def test_every_join_undone_gives_every_turn_its_own_note(oldest_first: bool) -> None:
    result = run("hashing", DEFAULT_LOCOMO, retell=3, oldest_first=oldest_first, limit=300)
    assert result["add"].get("folded", 0) >= 10, result
    assert sum(result["separated"].values()) >= result["add"]["folded"]
    assert result["turns_not_their_own_note_after"] == 0, result
    assert set(result["added_again"]) == {"deduplicated"}
    assert result["merges_after_of_a_separated_pair"] == 0
    # a folded text made its own note is linked as an add links one
    assert result["parts_got"].get("fold_notes_linked", 0) > 0, result
