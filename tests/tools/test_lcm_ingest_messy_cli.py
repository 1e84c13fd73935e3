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


def test_an_image_part_is_a_placeholder_not_its_base64(tmp_path: Path) -> None:
    # an OpenAI message with a pasted screenshot: the part's JSON was the text, so the
    # question became a "large file" of ~50k tokens of base64, out of search and context
    env = env_for(tmp_path / "home")
    shot = "data:image/png;base64," + "iVBORw0KGgo" * 20000
    src = tmp_path / "openai.jsonl"
    src.write_text(json.dumps({"role": "user", "content": [
        {"type": "text", "text": "What is in this image?"},
        {"type": "image_url", "image_url": {"url": shot, "detail": "auto"}}]}) + "\n"
        + json.dumps({"role": "assistant", "content": "A barn owl."}) + "\n", encoding="utf-8")
    amem(env, "lcm", "ingest", str(src), "--session-key", KEY)
    # Claude Code: a pasted image was dropped without a word (an image alone: no message)
    code = tmp_path / "claude.jsonl"
    code.write_text(json.dumps({"type": "user", "uuid": "u-1", "message": {"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                     "data": "/9j/" * 3000}}]}}) + "\n", encoding="utf-8")
    amem(env, "lcm", "ingest", str(code), "--session-key", KEY)
    items = json.loads(amem(env, "lcm", "assemble", "--session-key", KEY, "--budget", "5000",
                            "--json").stdout)["items"]
    assert [it["content"] for it in items] == [
        "What is in this image?\n[image: image/png, 161 KB inline, not stored]", "A barn owl.",
        "[image: image/jpeg, 8 KB inline, not stored]"]
    hits = amem(env, "lcm", "grep", "What is in this image", "--session-key", KEY).stdout
    assert "message" in hits and "1 hits" in hits


def test_a_json_array_of_messages_is_read_and_an_export_is_named(tmp_path: Path) -> None:
    # an OpenAI messages list saved whole ("line 1: expected an object", or a JSON error on
    # line 1 when pretty-printed); compact or pretty, the same messages are the same keys
    env = env_for(tmp_path / "home")
    messages = [{"role": "user", "content": "the invoice 1042 is paid"},
                {"role": "assistant", "content": [{"type": "text", "text": "noted"}]}]
    compact, pretty = tmp_path / "compact.json", tmp_path / "pretty.json"
    compact.write_text(json.dumps(messages), encoding="utf-8")
    pretty.write_text(json.dumps(messages, indent=2), encoding="utf-8")
    assert "stored 2" in amem(env, "lcm", "ingest", str(compact), "--session-key", KEY).stdout
    assert "stored 0, already there 2" in amem(env, "lcm", "ingest", str(pretty),
                                               "--session-key", KEY).stdout
    # a JSON array of something else: refused naming what it is, nothing stored (a ChatGPT or
    # Claude export loads: test_lcm_chat_export_cli.py)
    other = tmp_path / "rows.json"
    other.write_text(json.dumps([{"date": "2024-05-01", "amount": 12}], indent=2), encoding="utf-8")
    err = amem(env, "lcm", "ingest", str(other), "--session-key", "agent:host:rows", code=2).stderr
    assert f"{other} is a JSON array that is not a list of {{role, content}} messages" in err
    assert "JSON lines of {role, content}" in err
    assert stored_messages(env) == 2
