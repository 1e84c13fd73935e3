"""``amem lcm ingest`` of transcripts as hosts leave them, through the installed script: a
byte-order mark, UTF-16."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_lcm_host import KEY, amem, env_for, stored_messages

pytestmark = pytest.mark.slow


def test_a_byte_order_mark_or_utf16_is_read(tmp_path: Path) -> None:
    env = env_for(tmp_path / "home")
    line = json.dumps({"role": "user", "content": "the invoice 1042 is paid"}) + "\r\n"
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + line.encode())  # was: line 1 is not valid JSON
    assert "stored 1" in amem(env, "lcm", "ingest", str(bom), "--session-key", KEY).stdout
    wide = tmp_path / "powershell.jsonl"
    wide.write_bytes(line.replace("1042", "1043").encode("utf-16"))  # was: byte 0xff
    assert "stored 1" in amem(env, "lcm", "ingest", str(wide), "--session-key", KEY).stdout
    assert stored_messages(env) == 2


def test_a_last_line_still_being_written_is_left_for_the_next_feed(tmp_path: Path) -> None:
    # a host's session file read while the host writes it: the whole file was refused (exit 2)
    env = env_for(tmp_path / "home")
    src = tmp_path / "session.jsonl"
    whole = [json.dumps({"role": "user", "content": f"turn {i}: the invoice {1000 + i} is paid"})
             for i in range(3)]
    src.write_text(whole[0] + "\n" + whole[1] + "\n" + whole[2][:30], encoding="utf-8")
    done = amem(env, "lcm", "ingest", str(src), "--session-key", KEY)
    assert "stored 2" in done.stdout
    assert f"amem: warning: {src}:3: the last line has no line end and is not JSON" in done.stderr
    src.write_text("\n".join(whole) + "\n", encoding="utf-8")  # the writer finished it
    done = amem(env, "lcm", "ingest", str(src), "--session-key", KEY)
    assert "stored 1, already there 2" in done.stdout and "warning" not in done.stderr
    assert stored_messages(env) == 3
    # a bad line that is not cut short, or one with its line end, still refuses the file
    for bad in (whole[0] + "\n" + '{"role": "user", "content": "x" trailing',
                whole[0] + "\n" + whole[2][:30] + "\n"):
        src.write_text(bad, encoding="utf-8")
        err = amem(env, "lcm", "ingest", str(src), "--session-key", "agent:host:other",
                   code=2).stderr
        assert f"{src}:2: line 2 is not valid JSON" in err
