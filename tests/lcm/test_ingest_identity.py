"""When is an ingested message one already stored (lcm.ingest's rules): replays are stored once,
genuine repeats are stored, whatever their text; out of order and from two hosts.

Run on SQLite here and on PostgreSQL by tests/lcm/postgres/shared (the same functions)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lcm import LcmStore, ManualClock
from lcm.errors import LcmValidationError

from .conftest import chat

KEY = "agent:main:chat"
T0 = "2026-03-01T10:00:00Z"


def count(store: LcmStore) -> int:
    return int(store.db.scalar("SELECT count(*) FROM messages"))


def said(role: str, text: str, at: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": text, **({"created_at": at} if at else {}), **extra}


def test_the_same_exchange_again_with_its_own_times_is_stored(store: LcmStore, clock: ManualClock) -> None:
    # issue 24: "yes" / "ok" again five minutes later, each with its own created_at, was stored 0
    # and skipped 2 (the tail alignment ignored the times)
    first = [said("user", "yes", "2026-03-01T10:00:00Z"), said("assistant", "ok", "2026-03-01T10:00:01Z")]
    later = [said("user", "yes", "2026-03-01T10:05:00Z"), said("assistant", "ok", "2026-03-01T10:05:01Z")]
    assert store.ingest(KEY, first).stored == 2
    clock.advance(300)
    res = store.ingest(KEY, later)
    assert (res.stored, res.skipped_duplicates) == (2, 0)
    # each one replayed, in either order: nothing new
    assert store.ingest(KEY, [*later, *first]).skipped_duplicates == 4
    assert count(store) == 4


def test_a_later_repeat_without_times_is_stored(store: LcmStore, clock: ManualClock) -> None:
    # an earlier exchange said again later, with other messages between: the old window
    # alignment found it among the recent rows and dropped it
    store.ingest(KEY, [said("user", "deploy?"), said("assistant", "yes"), said("user", "ok")])
    store.ingest(KEY, chat(4))
    clock.advance(300)
    assert store.ingest(KEY, [said("assistant", "yes"), said("user", "ok")]).stored == 2
    # and the same exchange twice in a row, in separate calls minutes apart: a repeat, stored
    clock.advance(300)
    assert store.ingest(KEY, [said("assistant", "yes"), said("user", "ok")]).stored == 2
    assert count(store) == 11


def test_a_replayed_batch_is_stored_once_and_each_retry_restarts_the_window(
        store: LcmStore, clock: ManualClock) -> None:
    batch = chat(5)
    assert store.ingest(KEY, batch).stored == 5
    for _ in range(3):  # retries 100 s apart: 300 s after the first call, still a retry
        clock.advance(100)
        res = store.ingest(KEY, batch)
        assert (res.stored, res.skipped_duplicates) == (0, 5)
    # a new call after the window that repeats the stored tail whole: the exchange said again
    clock.advance(121)
    assert store.ingest(KEY, batch).stored == 5
    assert count(store) == 10


def test_a_batch_resent_after_300_messages_from_another_host_is_stored_once(
        make_store: Callable[..., LcmStore], open_again: Callable[[LcmStore], LcmStore], tmp_path: Path) -> None:
    host_a = make_store(str(tmp_path / "lcm.db"))
    host_b = open_again(host_a)
    batch = chat(4, prefix="from a")
    assert host_a.ingest(KEY, batch).stored == 4
    for start in range(0, 300, 100):
        assert host_b.ingest(KEY, chat(100, start=start, prefix="from b")).stored == 100
    # host a's call timed out on its side: it sends the same batch again (the old code, whose
    # window was 2n + 64 rows, stored it twice)
    res = host_a.ingest(KEY, batch)
    assert (res.stored, res.skipped_duplicates) == (0, 4)
    # and host b, sending the same words as a batch of its own shape, is not a replay
    assert host_b.ingest(KEY, [*batch, said("user", "and one more")]).stored == 5
    assert count(host_a) == 309


def test_out_of_order_arrivals_are_stored_and_their_replays_are_not(store: LcmStore) -> None:
    late = [said("user", f"step {i}", f"2026-03-01T10:0{i}:00Z") for i in range(4)]
    assert store.ingest(KEY, late[2:]).stored == 2
    assert store.ingest(KEY, late[:2]).stored == 2  # older messages arriving after newer ones
    res = store.ingest(KEY, [late[3], late[0], late[2], late[1]])
    assert (res.stored, res.skipped_duplicates) == (0, 4)
    # anonymous: a retry of batch x arriving after the host's next batch y
    x, y = chat(3, prefix="x"), chat(3, prefix="y")
    store.ingest(KEY, x)
    store.ingest(KEY, y)
    assert store.ingest(KEY, x).stored == 0
    assert count(store) == 10


def test_a_host_id_decides_alone(store: LcmStore) -> None:
    # two tool results of parallel calls, the same output stamped the same second: two events
    # (the old rule let the time and text match drop the second of them)
    store.ingest(KEY, [said("tool", "exit 0", T0, tool_call_id="c1")])
    assert store.ingest(KEY, [said("tool", "exit 0", T0, tool_call_id="c2")]).stored == 1
    # a host message id, re-sent with other text (redacted): the same message
    store.ingest(KEY, [said("user", "my token is abc", message_id="m-1")])
    res = store.ingest(KEY, [said("user", "my token is [redacted]", messageId="m-1"), said("user", "next", eventId="m-2")])
    assert (res.stored, res.skipped_duplicates) == (1, 1)
    assert count(store) == 4


def test_the_same_timed_message_twice_in_one_batch_is_stored_once(store: LcmStore) -> None:
    res = store.ingest(KEY, [said("user", "hi", T0), said("user", "hi", "2026-03-01T10:00:00.000+00:00")])
    assert (res.stored, res.skipped_duplicates) == (1, 1)


def test_positions_identify_messages_within_a_session(store: LcmStore) -> None:
    first = [said("user" if i % 2 == 0 else "assistant", "ok", position=i) for i in range(4)]
    assert store.ingest(KEY, first, session_id="s-1").stored == 4
    # the same positions again (the text changed: redacted), in another order: the same messages
    again = [said("assistant", "[redacted]", position=3), said("user", "ok", position=0), said("user", "new", position=4)]
    res = store.ingest(KEY, again, session_id="s-1")
    assert (res.stored, res.skipped_duplicates) == (1, 2)
    # a new session of the host counts from 0 again: new messages
    assert store.ingest(KEY, first[:2], session_id="s-2").stored == 2
    assert count(store) == 7


@pytest.mark.parametrize("bad", [-1, True, "3", 1.5])
def test_a_bad_position_is_a_clear_error(store: LcmStore, bad: Any) -> None:
    with pytest.raises(LcmValidationError, match="position") as err:
        store.ingest(KEY, [said("user", "a"), said("user", "b", position=bad)])
    assert err.value.field == "messages[1].position"
    assert count(store) == 0


def test_the_resend_window_is_configurable(make_store: Callable[..., LcmStore]) -> None:
    off = make_store(resend_window_seconds=0)
    off.ingest(KEY, chat(3))
    assert off.ingest(KEY, chat(3)).stored == 3  # without the window only a grown window is a re-send
    assert off.ingest(KEY, chat(5)).stored == 2  # a grown window: its first three are the tail
    assert off.ingest(KEY, [*chat(2, start=3), *chat(1, start=9)]).stored == 1
