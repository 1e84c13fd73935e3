"""The inspector's message pages go on from the boundary message's id: a page read before
``amem restore --merge`` renumbered the conversation leads, after it, to the messages that
follow the last one shown, none shown twice and none left out; a page number named another
place once the merge had put the backup's older messages in."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

from starlette.testclient import TestClient

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from lcm import LcmConfig, LcmStore
from lcm.operator.merge import merge_backup
from tools import ToolFacade
from tools.http_guard import GuardConfig
from tools.keys import KeyStore
from tools.mcp_server import http_app

from ..http_server import OWNER_SECRET

OWNER = {"Authorization": f"Bearer {OWNER_SECRET}"}
KEY = "agent:alice:main"
START = datetime(2026, 1, 5, 10, 0, tzinfo=timezone.utc)


def _said(n: int, word: str) -> dict[str, str]:
    at = (START + timedelta(seconds=n)).isoformat().replace("+00:00", "Z")
    return {"role": "user", "content": f"{word}-{n:03d}", "created_at": at}


def _shown(html: str) -> list[str]:
    """The messages of the page's message table (the context view below shows some again)."""
    table = html[html.index('id="messages"'):html.index('class="pager"')]
    return re.findall(r"\b(?:new|old)-\d{3}\b", table)


def test_the_next_page_read_before_a_merge_goes_on_from_its_last_message(tmp_path: Path) -> None:
    with LcmStore(str(tmp_path / "a" / "lcm.db"), LcmConfig(log_file_enabled=False)) as backup:
        backup.ingest(KEY, [_said(n, "old") for n in range(1, 120, 2)])  # the odd seconds
    config = LcmConfig(log_file_enabled=False)
    with MemoryStore(":memory:", embedder=HashingEmbedder(), agent_id="alice") as memory, \
            LcmStore(str(tmp_path / "b" / "lcm.db"), config) as lcm:
        conv = lcm.ingest(KEY, [_said(n, "new") for n in range(0, 120, 2)]).conversation_id  # the even
        app = http_app(ToolFacade(memory, lcm, agent_id="alice"),
                       guard=GuardConfig(keys=KeyStore(tmp_path / "keys.json"), record_secret=OWNER_SECRET))
        with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
            first = client.get(f"/ui/conversation/{conv}", headers=OWNER)
            assert first.status_code == 200
            seen = _shown(first.text)
            assert seen == [f"new-{n:03d}" for n in range(0, 100, 2)]
            (later,) = re.findall(r'<a href="([^"]+)" rel="next"', first.text)
            assert "after=" in later
            assert merge_backup(lcm, tmp_path / "a" / "lcm.db", None, "2026-02-01T00:00:00.000Z").conversations_reordered
            second = client.get(later.replace("&amp;", "&"), headers=OWNER)
            assert second.status_code == 200
            # what follows new-098 in time order: old-099 (merged in), new-100, ... (50 a page)
            assert _shown(second.text) == [f"{'new' if n % 2 == 0 else 'old'}-{n:03d}" for n in range(99, 120)]
            by_number = client.get(f"/ui/conversation/{conv}?page=1", headers=OWNER)
            assert _shown(by_number.text)[0] == "new-050"  # a page number now names another place
            gone = client.get(f"/ui/conversation/{conv}?after=999999", headers=OWNER)
            assert gone.status_code == 404 and "msg_999999" in gone.text
