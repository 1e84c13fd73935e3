"""The inspector's note pages: the paged table with filters, the search playground, one note.

Every read is one agent's (``agent`` comes from the session's key, ``tools.ui.app``) and one
page of the engine's scroll or one search: nothing reads the whole store, so a page costs the
same at 1k and at 100k notes. A note shown here is read through the index, not
``MemoryStore.get``, so looking at a note does not count as the agent using it (usage heat).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from amem.backends.base import Condition, IsEmpty, Match, Range, Where
from amem.errors import ValidationError
from amem.joins import find_join, joined, part_of, text_without
from amem.notefields import (SUBJECT_KEYS, not_expired, parse_meta_args, search_conditions,
                             subject_key)
from amem import bm25
from amem.notes import Note, check_text, point_id
from amem.text import tokenize

from .html import Html, esc, field, form, join, link, pretty, table, url
from .states import state_of

if TYPE_CHECKING:
    from amem import MemoryStore
    from amem.search.result import SearchResult

PAGE_SIZE = 50
MAX_SEARCH = 50
#: the longest full-text query (refused beyond, never cut silently)
MAX_QUERY = 1000
_STATES = (("current", "current only"), ("superseded", "superseded only"), ("all", "both"),
           ("deleted", "deleted or merged"))
_EXPIRY = (("live", "not expired"), ("expired", "expired only"), ("all", "both"))
_TYPES = (("", "any"), ("memory", "memory"), ("knowledge", "knowledge"))


@dataclass(frozen=True)
class NoteFilters:
    """The table's filters, as the query string gives them (checked by :meth:`where`)."""

    subject: str = ""
    topic: str = ""
    #: tags, comma separated: notes holding any of them, whatever their case (``tag_key``)
    tag: str = ""
    note_type: str = ""
    since: str = ""
    before: str = ""
    meta: str = ""
    state: str = "current"
    expiry: str = "live"
    q: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> "NoteFilters":
        return cls(**{name: query.get(key, default).strip()[:500] for name, key, default in (
            ("subject", "subject", ""), ("topic", "topic", ""), ("tag", "tag", ""),
            ("note_type", "type", ""),
            ("since", "since", ""), ("before", "before", ""), ("meta", "meta", ""),
            ("state", "state", "current"), ("expiry", "expiry", "live"))},
                   q=query.get("q", "").strip())

    def params(self) -> dict[str, str]:
        return {"subject": self.subject, "topic": self.topic, "tag": self.tag,
                "type": self.note_type,
                "since": self.since, "before": self.before, "meta": self.meta,
                "state": "" if self.state == "current" else self.state,
                "expiry": "" if self.expiry == "live" else self.expiry, "q": self.q}

    def conditions(self) -> list[Condition]:
        """The engine conditions besides the tenant (``ValidationError`` naming a bad filter)."""
        if self.state not in dict(_STATES):
            raise ValidationError(f"state must be one of {', '.join(dict(_STATES))}", field="state")
        if self.expiry not in dict(_EXPIRY):
            raise ValidationError(f"expiry must be one of {', '.join(dict(_EXPIRY))}", field="expiry")
        if self.note_type not in dict(_TYPES):
            raise ValidationError("type must be memory or knowledge", field="type")
        out: list[Condition] = []
        if self.subject:
            out.append(Match(SUBJECT_KEYS, subject_key(self.subject)))  # "alice" finds "Alice"
        if self.topic:
            out.append(Match("topics", self.topic))
        if self.note_type:
            out.append(Match("note_type", self.note_type))
        meta = parse_meta_args([p for p in self.meta.split(",") if p.strip()]) if self.meta else None
        # the tags filter of search itself: any of them, by key, on the tag_keys index
        out += search_conditions(self.since or None, self.before or None, meta, tag_list(self.tag))
        if self.state == "current":
            out.append(IsEmpty("superseded_by"))
        elif self.state == "superseded":
            out.append(Where(must_not=(IsEmpty("superseded_by"),)))
        return out

    @property
    def active(self) -> bool:
        """Whether the table lists live notes (else the deleted and merged ones)."""
        return self.state != "deleted"


def tag_list(text: str) -> list[str] | None:
    """The ``tag`` box's comma-separated tags (None when it names none)."""
    tags = [t.strip() for t in text.split(",") if t.strip()]
    return tags or None


def notes_where(store: MemoryStore, agent: str, filters: NoteFilters) -> Where:
    """``agent``'s active notes under ``filters`` (expired ones only when asked; deleted and
    merged ones instead when asked)."""
    index = store.index
    must: list[Condition] = [Match("agent_id", agent), *filters.conditions()]
    must.insert(1, Match("is_active", filters.active))
    now = index.clock.now()
    if filters.expiry == "live":
        must.append(not_expired(now))
    elif filters.expiry == "expired":
        must.append(Range("expires_ts", lte=now.timestamp()))
    return Where(must=tuple(must))


def no_notes_hint(store: MemoryStore, agent: str, *, owner: bool) -> Html:
    """A line saying that ``agent`` has no note at all, else nothing: ``?agent=`` naming an
    agent the store does not have showed an empty page with no hint. To an owner it says no
    agent of that name has notes; to an agent's key, that its own agent has none yet. It
    names no other agent: an agent's key may not learn who else the store holds (one
    indexed count, whatever the store's size)."""
    if store.index.backend.count(Where(must=(Match("agent_id", agent),))):
        return Html("")
    if owner:
        text = (f"No agent named {agent!r} has notes in this store. Agent ids are matched "
                "exactly (spelling and case): choose another agent in the Agent box above.")
    else:
        text = (f"This key's agent, {agent!r}, has no notes yet: they appear here once it "
                "adds some (memory_add).")
    return Html(f'<p id="no-such-agent" class="hint" role="status">{esc(text)}</p>')


def notes_page(store: MemoryStore, agent: str, filters: NoteFilters, cursor: str | None
               ) -> tuple[list[Note], str | None, int]:
    """One page of the table, the next page's cursor, and how many notes match."""
    where = notes_where(store, agent, filters)
    backend = store.index.backend
    hits, nxt = backend.scroll(where, limit=PAGE_SIZE, offset=cursor or None)
    return [Note.from_payload(h.payload) for h in hits], nxt, backend.count(where)


def render_notes(store: MemoryStore, agent: str, query: Mapping[str, str]) -> Html:
    rows: list[tuple[Any, ...]]
    filters = NoteFilters.from_query(query)
    controls = form(url("notes"), [
        Html(f'<input type="hidden" name="agent" value="{esc(agent)}">'),
        field("q", "Full text", filters.q, kind="search",
              hint="notes holding a word of it, ranked by BM25; the filters below apply too"),
        field("subject", "Subject", filters.subject),
        field("topic", "Topic", filters.topic),
        field("tag", "Tag", filters.tag,
              hint="any case, a leading # or not; comma separated: notes holding any of them"),
        field("type", "Type", filters.note_type, options=_TYPES),
        field("since", "Event since", filters.since, hint="ISO date or time"),
        field("before", "Event before", filters.before),
        field("meta", "Metadata", filters.meta, hint="key=value, comma separated"),
        field("state", "State", filters.state, options=_STATES),
        field("expiry", "Expired", filters.expiry, options=_EXPIRY),
    ], submit="Filter", label="Filter notes")
    if filters.q:
        found = word_matches(store, agent, filters)
        now = store.index.clock.now()
        rows = [(note_link(n.id, agent), n.content[:200], ", ".join(n.subjects), ", ".join(n.tags),
                 n.note_type, (n.event_time or n.timestamp)[:19], state_of(n, now).html(agent),
                 f"{score:.3f}") for n, score in found]
        summary = Html(f'<p id="count" data-total="{len(found)}">{len(found)} notes hold a word of '
                       f"the query (best {MAX_SEARCH} shown, best first)</p>" + _match_means(agent, filters.q))
        return join([controls, summary, table(
            ["id", "content", "subjects", "tags", "type", "event time", "state", "BM25 score"], rows, caption=f"Notes of {agent} matching {filters.q!r}",
            empty="no note holds a word of the query")])
    notes, nxt, total = notes_page(store, agent, filters, query.get("cursor"))
    now = store.index.clock.now()
    rows = [(note_link(n.id, agent), n.content[:200], ", ".join(n.subjects), ", ".join(n.tags),
             n.note_type, (n.event_time or n.timestamp)[:19], state_of(n, now).html(agent))
            for n in notes]
    pager = ""
    if nxt:
        pager = link(url("notes", agent=agent, cursor=nxt, **filters.params()), "Next page",
                     rel="next", id="next-page")
    first = link(url("notes", agent=agent, **filters.params()), "First page") if query.get("cursor") else ""
    summary = Html(f'<p id="count" data-total="{total}">{total} notes match; '
                   f"{len(notes)} on this page</p>")
    return join([controls, summary, table(
        ["id", "content", "subjects", "tags", "type", "event time", "state"], rows,
        caption=f"Notes of {agent}"), Html(f'<nav aria-label="Pages of notes" class="pager">{first} {pager}</nav>')])


def _match_means(agent: str, q: str) -> Html:
    """What a full-text "match" is, said on the page."""
    return Html(
        '<p class="hint" id="match-means">A note matches when it holds at least one word of the '
        "query (common words such as <em>the</em> do not count), ranked by BM25, the keyword "
        "half of search; every filter of the form applies. Notes close in meaning but sharing "
        f"no word are not listed: {link(url('search', agent=agent, q=q), 'the Search playground')} "
        "runs the whole search.</p>")


def word_matches(store: MemoryStore, agent: str, filters: NoteFilters) -> list[tuple[Note, float]]:
    """``agent``'s notes under ``filters`` that hold a word of ``filters.q``, best BM25 first.

    Not ``MemoryStore.search``: its dense leg ranks every note (a query of no known word would
    list the whole store), and it knows neither the type nor the expiry filter. The keyword leg
    over the table's own conditions lists exactly the notes that match, filters included."""
    check_text(filters.q, field="q", max_chars=MAX_QUERY)
    terms = tokenize(filters.q)
    if not terms:
        raise ValidationError("the full-text query holds no searchable word (only common words "
                              "or punctuation)", field="q")
    hits = store.index.backend.sparse_search(bm25.query_vector(terms),
                                             notes_where(store, agent, filters), MAX_SEARCH)
    return [(Note.from_payload(h.payload), h.score) for h in hits]


def note_link(note_id: str, agent: str) -> Html:
    return link(url(f"note/{note_id}", agent=agent), note_id)


# ------------------------------------------------------------------------------ the playground


def explain(results: list[SearchResult]) -> list[dict[str, Any]]:
    """Why each result is there: the leg that found it (or the match it was linked from),
    its similarity, the fused score before and after the heat boost, a usage boost, what it hid."""
    by_links: dict[str, list[str]] = {}
    for r in results:
        if r.via == "match":
            for target in r.links:
                by_links.setdefault(target, []).append(r.id)
    out = []
    for rank, r in enumerate(results, 1):
        if r.via == "link":
            sources = by_links.get(r.id)
            path = (f"linked from {', '.join(sources)}" if sources
                    else "linked two hops from a match")
        else:
            path = {"both": "BM25 and dense", "bm25": "BM25 only", "dense": "dense only",
                    "neighbour": "told next to a top match"}.get(r.found_by, r.found_by)
        heat = (r.score / r.rrf) if r.via == "match" and r.rrf else None
        out.append({"rank": rank, "id": r.id, "content": r.content, "found": path,
                    "similarity": r.similarity, "fused": r.rrf, "score": r.score,
                    "heat": heat, "usage": r.boosted_by or "", "hidden": list(r.hidden),
                    "state": _result_state(r)})
    return out


def _result_state(r: SearchResult) -> str:
    """A result's state in words: a search shows current notes, some changed in part."""
    if r.superseded_by:
        return f"superseded by {r.superseded_by}"
    if r.partly_superseded_by:
        return f"partly superseded by {r.partly_superseded_by} (still shown: its other facts hold)"
    return "current"


def render_search(store: MemoryStore, agent: str, query: Mapping[str, str]) -> Html:
    q = query.get("q", "").strip()[:1000]
    tag = query.get("tag", "").strip()[:500]
    links = query.get("links", "on") != "off"
    heat = query.get("heat", "on") != "off"
    onoff = (("on", "on"), ("off", "off"))
    controls = form(url("search"), [
        Html(f'<input type="hidden" name="agent" value="{esc(agent)}">'),
        field("q", "Query", q, kind="search"),
        field("tag", "Tag", tag, hint="any case; comma separated: results holding any of them"),
        field("links", "Link expansion", "on" if links else "off", options=onoff),
        field("heat", "Heat boost", "on" if heat else "off", options=onoff),
    ], submit="Search", label="Search playground")
    if not q:
        return join([controls, Html("<p>Type a query: each result says which ranking found it, "
                                    "its similarity, the fused score and the boosts.</p>")])
    results = store.search(q, limit=10, agent_id=agent, expand_links=links, heat=heat,
                           tags=tag_list(tag),
                           record_usage=False)  # a person looking, not the agent using it
    rows = []
    for e in explain(results):
        heat_text = "" if e["heat"] is None else f"x{e['heat']:.3f}"
        rows.append((e["rank"], note_link(e["id"], agent), e["content"][:160], e["found"],
                     f"{e['similarity']:.3f}", f"{e['fused']:.5f}", f"{e['score']:.5f}",
                     heat_text, e["usage"], Html(", ".join(note_link(h, agent) for h in e["hidden"])),
                     e["state"]))
    # the graph has no tag filter: said on the link, so its picture is not taken for these results
    graph = link(url("graph", agent=agent, q=q), "Show these results as a graph" if not tag
                 else "Show this query's results as a graph (without the tag filter)")
    return join([controls, table(
        ["rank", "id", "content", "found by", "similarity", "fused (RRF/z)", "score",
         "heat boost", "usage boost", "hid as superseded", "state"], rows,
        caption=f"Results for {q!r}", empty="no note matches"), graph])


# ------------------------------------------------------------------------------ one note


def links_in(store: MemoryStore, agent: str, note_id: str, limit: int = 100) -> list[Note]:
    """Notes of ``agent`` that link to ``note_id`` (one engine page)."""
    where = Where(must=(Match("agent_id", agent), Match("is_active", True), Match("links", note_id)))
    hits, _ = store.index.backend.scroll(where, limit=limit, offset=None)
    return [Note.from_payload(h.payload) for h in hits]


def render_note(store: MemoryStore, agent: str, note_id: str, can_write: bool) -> Html:
    note, _ = store.index.load(note_id, agent, include_inactive=True)
    fields = note.to_payload() if hasattr(note, "to_payload") else dict(vars(note))
    shown = {k: v for k, v in fields.items() if k not in ("evolution_history",)}
    rows = [(k, v if not isinstance(v, (list, dict)) else ", ".join(map(str, v))
             if isinstance(v, list) else pretty(v)) for k, v in sorted(shown.items())]
    now = store.index.clock.now()
    state = state_of(note, now)
    parts: list[Any] = [
        Html(f'<p id="note-state" class="state state-{esc(state.kind.replace(" ", "-"))}" '
             f'data-state="{esc(state.kind)}">This note is {state.html(agent)}.</p>'),
        table(["field", "value"], rows, caption="Every field")]
    chain = store.history(note_id, agent_id=agent)
    # the chain's items carry no expiry nor partial mark: their notes read once, for the state
    notes = {h.payload["id"]: Note.from_payload(h.payload) for h in store.index.backend.retrieve(
        [point_id(agent, item["id"]) for item in chain]) if h.payload.get("agent_id") == agent}
    chain_rows = []
    for item in chain:
        known = notes.get(item["id"])
        words = state_of(known, now).html(agent) if known else esc("unknown")
        chain_rows.append((note_link(item["id"], agent) if item["id"] != note_id
                           else Html(f"<strong>{esc(item['id'])} (this note)</strong>"),
                           item["content"][:160], (item["event_time"] or item["timestamp"])[:19],
                           words, item["superseded_by"] or "", ", ".join(item["supersedes"])))
    parts.append(Html("<h2>Supersession chain</h2>"))
    parts.append(table(["note", "content", "event time", "state", "replaced by", "replaced"],
                       chain_rows, caption="What it replaced and what replaced it, oldest first",
                       empty="no supersession: this fact stands alone"))
    if note.superseded_by:
        disabled = "" if can_write else " disabled aria-disabled=\"true\""
        why = "" if can_write else Html('<p class="hint">Your key is read-only: undo needs a key with write rights.</p>')
        parts.append(Html(
            f'<div class="action" data-action="unsupersede" data-id="{esc(note_id)}" '
            f'data-agent="{esc(agent)}"><button type="button" class="dry-run"{disabled}>'
            f"Undo supersession (dry run first)</button>{why}"
            '<div class="preview" role="status" aria-live="polite"></div></div>'))
    parts += joins_section(note, agent, can_write)
    parts.append(Html("<h2>Evolution history</h2>"))
    parts.append(table(["#", "part", "entry"],
                       [(i + 1, _part_cell(e), pretty(e))
                        for i, e in enumerate(note.evolution_history)],
                       caption="Every change to this note, oldest first; a fold's or a merge's "
                               "part is the id amem separate takes", empty="never changed"))
    out_rows = [(note_link(t, agent),) for t in note.links]
    in_rows = [(note_link(n.id, agent), n.content[:160]) for n in links_in(store, agent, note_id)]
    parts += [Html("<h2>Links</h2>"),
              table(["links to"], out_rows, caption="Notes this note links to", empty="no links out"),
              table(["linked from", "content"], in_rows, caption="Notes that link to this note",
                    empty="no links in"),
              link(url("graph", agent=agent, note=note_id), "Show its neighbourhood as a graph")]
    return join(parts)


def _part_cell(entry: Mapping[str, Any]) -> Html:
    """The part an entry of a note's history names: the id a fold or a merge joined in (what
    ``amem separate`` takes), or the one a separation took out; empty for other entries."""
    part = part_of(entry)
    return Html(f'<code class="part">{esc(part)}</code>' if part else "")


def joins_section(note: Note, agent: str, can_write: bool) -> list[Html]:
    """The texts a fold or a merge joined into the note and no separation took out, each
    with its part id and, on a live note, a Separate action (a dry run first): the same
    door as the page's other changes (``/ui/api/separate``, ``tools.ui.app``)."""
    rows = []
    for join in joined(note.evolution_history):
        when = str(join.entry.get("at") or "")[:19]
        how = "folded in when added" if join.kind == "fold" else "merged in at night"
        action: Any = ""
        if note.is_active:
            disabled = "" if can_write else ' disabled aria-disabled="true"'
            action = Html(
                f'<div class="action" data-action="separate" data-id="{esc(note.id)}" '
                f'data-part="{esc(join.part)}" data-agent="{esc(agent)}">'
                f'<button type="button" class="dry-run"{disabled}>Separate (dry run first)'
                '</button><div class="preview" role="status" aria-live="polite"></div></div>')
        rows.append((Html(f'<code class="part">{esc(join.part)}</code>'), how, when,
                     join.text[:160], action))
    out = [Html("<h2>Joined texts</h2>"),
           table(["part", "how", "when", "text", "separate"], rows,
                 caption="Texts a fold or a merge joined into this note: Separate makes one its "
                         "own note again, and the two are never joined again",
                 empty="nothing joined into this note")]
    if rows and not can_write:
        out.append(Html('<p class="hint">Your key is read-only: separating needs a key with '
                        "write rights.</p>"))
    return out


def separate_preview(store: MemoryStore, agent: str, note_id: str, part: str
                     ) -> dict[str, Any]:
    """What separating ``part`` out of ``note_id`` would do (nothing is changed): the
    effect in words and the diff of the note's text (``amem.joins``, the rules
    ``MemoryStore.separate`` follows)."""
    import difflib

    note, _ = store.index.load(note_id, agent)
    join = find_join(note.id, note.evolution_history, part)
    text, why = text_without(join, note.content, note.evolution_history)
    own = ("the merged note comes back as it was, with its heat and the links that pointed "
           "at it" if join.kind == "merge" else "a new note of that id, linked and judged "
           "against older facts as an add would be")
    left = (f"note {note.id} loses the sentences it took from it" if why is None and
            text != note.content else f"note {note.id} keeps its text"
            + (f" ({why})" if why else ""))
    # each text ends its last line, so the diff names the lines that go and nothing else
    diff = "".join(difflib.unified_diff(f"{note.content}\n".splitlines(keepends=True),
                                        f"{text}\n".splitlines(keepends=True),
                                        fromfile=f"{note.id} now", tofile=f"{note.id} after"))
    return {"id": note.id, "part": join.part, "joined_by": join.kind, "text": join.text,
            "effect": f"the text joined in as {join.part} becomes its own note again ({own}); "
                      f"{left}; the two are never joined again",
            "diff": diff}


def separated_words(result: dict[str, Any]) -> str:
    """What a confirmed separation did, in words (the page's "Done:" line)."""
    words = f"{result['note']} is its own note again, kept apart from note {result['id']}"
    if not result.get("text_restored"):
        words += f"; note {result['id']} kept its text"
    return words + "".join(f"; {w}" for w in result.get("warnings") or ())


def unsupersede_preview(store: MemoryStore, agent: str, note_id: str) -> dict[str, Any]:
    """What undoing ``note_id``'s supersession would do (nothing is changed)."""
    note, _ = store.index.load(note_id, agent, include_inactive=True)
    if not note.superseded_by:
        raise ValidationError(f"note {note_id!r} is not superseded; there is nothing to undo",
                              field="id")
    return {"id": note_id, "content": note.content, "superseded_by": note.superseded_by,
            "effect": f"note {note_id} becomes current again and is kept against "
                      f"{note.superseded_by} (no judge hides it behind that note again)"}


__all__ = ["NoteFilters", "explain", "joins_section", "word_matches", "links_in", "notes_page",
           "notes_where", "render_note", "render_notes", "render_search", "separate_preview",
           "separated_words", "unsupersede_preview"]
