"""lcm.upkeep: a payment of deferred work never fails its caller, and says what failed."""

from __future__ import annotations

from lcm import LcmStore
from lcm.upkeep import TrigramDebt, Upkeep

from .conftest import chat

KEY = "agent:main:chat"


def _full_disk(*, limit: int | None, deadline_s: float | None) -> int:
    """A trigram payer whose every write fails, as a full disk's would."""
    raise OSError("No space left on device")


def _upkeep(store: LcmStore, trigrams: TrigramDebt) -> Upkeep:
    # The store's own parts, with only the trigram payer replaced (the seam Upkeep takes).
    return Upkeep(store.db, store.config, store.clock, store.files, store.events, store.failures,
                  store.compaction, store.semantic, trigrams)  # fmt: skip


def test_a_failing_trigram_payment_is_recorded_not_raised(store: LcmStore) -> None:
    store.ingest(KEY, chat(4))
    upkeep = _upkeep(store, _full_disk)
    assert upkeep.after_turn(KEY) is None  # nothing else owed; the turn is not failed by the index
    night = upkeep.maintenance()
    assert "No space left on device" in night.failures["trigram"]
    last = store.status().last_failure
    assert last is not None and last.kind == "trigram" and "No space left on device" in last.reason


def test_the_stores_own_payer_indexes_the_debt(store: LcmStore) -> None:
    store.ingest(KEY, chat(4))
    before = store.status().debt
    assert before is not None and before.trigram == 4
    assert store.maintenance().failures == {}
    after = store.status().debt
    assert after is not None and after.trigram == 0
