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
