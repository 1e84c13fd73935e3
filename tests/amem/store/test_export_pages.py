"""An export read page by page (how ``amem export`` reads a store a server holds) while notes
are written: every note stored before the first page is in exactly one page."""

from __future__ import annotations

import json

import pytest

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from amem.export import export_page, export_store
from tools.errors import ToolError
from tools.mcp_server import EXPORT_PAGE_MAX, export_params


def _ids(lines: list[str]) -> list[str]:
    return [json.loads(line)["note"]["id"] for line in lines]


def test_pages_written_between_keep_every_note_stored_before_once() -> None:
    with MemoryStore(":memory:", embedder=HashingEmbedder()) as store:
        before = {store.add(f"note {i} about the moth count of week {i}", enrich=False).id
                  for i in range(23)}
        store.delete(sorted(before)[0])  # a deleted note is exported too (it is in the store)
        seen: list[str] = []
        cursor: str | None = None
        written = 0
        while True:
            lines, cursor = export_page(store, cursor=cursor, limit=4, with_vectors=False)
            seen += _ids(lines)
            # a write between pages lands before or after the cursor: in the export or not
            store.add(f"added during the export {written}", enrich=False)
            written += 1
            if cursor is None:
                break
        assert written >= 6  # really paged
        assert len(seen) == len(set(seen))  # no note twice
        assert before <= set(seen)


def test_the_pages_are_the_whole_export_when_nothing_is_written() -> None:
    import io

    with MemoryStore(":memory:", embedder=HashingEmbedder()) as store:
        for i in range(9):
            store.add(f"fact {i} about rivers", enrich=False)
        store.add("another agent's fact", enrich=False, agent_id="other")
        whole = io.StringIO()
        export_store(store, whole)
        paged: list[str] = []
        cursor: str | None = None
        while True:
            lines, cursor = export_page(store, cursor=cursor, limit=3, with_vectors=True)
            paged += lines
            if cursor is None:
                break
        assert "".join(paged) == whole.getvalue()
        one, _ = export_page(store, cursor=None, limit=50, with_vectors=False, agent_id="other")
        assert [json.loads(line)["note"]["agent_id"] for line in one] == ["other"]


@pytest.mark.parametrize("query, field", [
    ("limit=0", "limit"), (f"limit={EXPORT_PAGE_MAX + 1}", "limit"), ("limit=ten", "limit"),
    ("vectors=yes", "vectors"), ("cursor=../../etc", "cursor"), ("agent=a%00b", "agent"),
    ("limit=1&limit=2", "limit"), ("secret=1", "secret"),
])
def test_a_bad_export_query_names_its_parameter(query: str, field: str) -> None:
    with pytest.raises(ToolError) as caught:
        export_params(query)
    assert caught.value.code == "invalid_argument" and caught.value.field == field, caught.value


def test_an_export_query_reads_as_written() -> None:
    page = export_params("cursor=0F8FAD5B-D9CB-469F-A165-70867728950E&limit=7&vectors=0&agent=bob")
    assert (page.cursor, page.limit, page.vectors, page.agent) == (
        "0f8fad5b-d9cb-469f-a165-70867728950e", 7, False, "bob")
    assert export_params("") == type(page)()
