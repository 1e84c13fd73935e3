"""What ``amem status`` and ``amem doctor`` report, built from open stores.

The CLI builds these from the stores it opened itself, and ``amem serve --http`` from the
stores it holds when the CLI asks it (``tools.remote``): one builder, so the two answers are
the same dict.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Callable

#: an lcm report by method name (``status``, ``doctor``, ``doctor_clean``)
LcmReport = Callable[[str], dict[str, Any]]


def status_report(store: Any, agent_id: str, lcm: LcmReport, nightly: dict[str, Any]) -> dict[str, Any]:
    """``amem status``: the note store's state with ``agent_id``'s count, lcm's, the nightly run's."""
    from amem.purge import unfinished_erasures

    memory = asdict(store.info())
    memory["agents"] = len(store.index.agents())
    # an erase killed half way: the agent's notes still shown are not its whole memory
    memory["delete_all_unfinished"] = unfinished_erasures(store.index)
    memory["notes_of_agent"] = store.count(agent_id=agent_id)
    memory["agent"] = agent_id
    return {"memory": memory, "lcm": lcm("status"), "nightly": nightly}


def doctor_report(store: Any, lcm: LcmReport, nightly: dict[str, Any], *, clean: bool,
                  fix: bool = False) -> dict[str, Any]:
    """``amem doctor``: problems of both stores; ``ok`` is false when lcm's checks fail or a
    supersession mark hides a fact for no live reason (``amem.supersede.audit``), which
    ``fix`` repairs (``amem doctor --fix``; the nightly job does too)."""
    problems: list[str] = []
    info = store.info()
    memory: dict[str, Any] = {"embedder": info.embedder, "points": info.points,
                              "active_notes": info.active_notes, "dangling_links": 0,
                              "pending_merge": 0, "stale_vectors": info.stale_vectors}
    from amem.backends.edge import EdgeBackend
    from amem.notefields import is_expired
    from amem.tagtidy import untidy

    now = store.clock.now()
    live_links: dict[tuple[str, str], list[str]] = {}
    known: set[tuple[str, str]] = set()
    expired: set[tuple[str, str]] = set()  # invisible already; the nightly sweep deletes them
    links: list[tuple[str, str, str]] = []
    untidy_notes: list[Any] = []  # tags an older amem wrote that this one refuses or keeps once
    for note, _ in store.iter_notes(all_agents=True, include_inactive=True):
        if not note.is_active:
            continue
        if note.tags and untidy(note.tags):
            untidy_notes.append(note)
        if is_expired(note.expires_at, now):
            expired.add((note.agent_id, note.id))
            continue
        known.add((note.agent_id, note.id))
        live_links[(note.agent_id, note.id)] = list(note.links)
        links.extend((note.agent_id, note.id, target) for target in note.links)
        memory["pending_merge"] += int(note.pending_merge)
    # A link to an expired note waiting for the sweep is not broken: readers never see it
    # (amem.search.visibility) and the sweep drops it. Counted apart, never as dangling.
    memory["links_to_expired"] = sum((a, dst) in expired for a, _, dst in links)
    dangling = [f"{a}/{src} -> {dst}" for a, src, dst in links
                if (a, dst) not in known and (a, dst) not in expired]
    memory["dangling_links"] = len(dangling)
    if dangling:
        problems.append(f"{len(dangling)} links point at deleted or missing notes")
        memory["examples"] = dangling[:10]
    _one_way_links(store, live_links, memory, problems, fix)
    _untidy_tags(store, untidy_notes, memory, problems, fix)
    if info.stale_vectors:  # search still finds them (BM25 and the previous vector)
        problems.append(f"{info.stale_vectors} notes have the vector of an earlier text (a "
                        f"write was interrupted, or an upgrade at open gave their subjects to "
                        f"ranking); the next add, import or nightly job re-embeds them")
    build = info.index_build or {}
    if build.get("state") == "failed":  # search works, by brute force over the new points
        problems.append(f"the last index build failed ({build.get('error')}); the "
                        f"{build.get('points_since')} points written and "
                        f"{build.get('points_moved', 0)} moved out of the index since the build "
                        f"before are searched by brute force until the next bulk write or "
                        f"nightly job")
    if isinstance(store.index.backend, EdgeBackend) and not info.filters_keyed:
        # searches still find the same notes: every condition said (docs/readpath.md)
        problems.append("some notes lack their live key (the disk had no room to write it "
                        "when the store was opened): a search of one agent among several says "
                        "the tenant beside the other conditions, which doubles the engine's "
                        "scan of its plain segment; the next open with free space writes the "
                        "keys")
    table = rank_table_problem(info.rank_table)
    if table:
        problems.append(table)
    problems.extend(f"the nightly record {nightly['record']} {problem}; the next run or "
                    f"`amem serve` replaces it" for problem in nightly.get("record_problems", []))
    if nightly.get("state") == "interrupted":  # its steps resume: owed work, not damage
        last = nightly.get("last_run") or {}
        problems.append(f"the last nightly run (started {last.get('started_at')}, pid "
                        f"{last.get('pid')}) was interrupted: its process died before it "
                        "finished; nothing is lost, its steps resume at the next run: run "
                        "`amem scheduler --once`, or let `amem serve` or `amem scheduler` run it")
    if nightly.get("state") == "failed":  # status showed it; a doctor that said nothing hid it
        last = nightly.get("last_run") or {}
        times = int(nightly.get("consecutive_failures") or 1)
        again = f", {times} nights in a row" if times > 1 else ""
        problems.append(f"the last nightly run (started {last.get('started_at')}) failed{again}: "
                        f"{nightly.get('last_error')}; it runs again at the next slot "
                        f"({nightly.get('next_run')}), or now with `amem scheduler --once`")
    if nightly.get("state") == "overdue":  # maintenance owed, not damage: a warning
        problems.append(f"the nightly job has not run since its {nightly.get('overdue_slot')} slot "
                        f"(last run {(nightly.get('last_run') or {}).get('started_at')}): nothing runs it; "
                        "start `amem serve` or `amem scheduler`, or run `amem scheduler --once`")
    refused = nightly.get("refused") or {}
    if nightly.get("state") == "running" and refused:  # a run past its next slot: hung?
        hours = (nightly.get("running_for_s") or 0) / 3600
        problems.append(f"the nightly run under way (pid {nightly.get('running_pid')}, since "
                        f"{nightly.get('running_since')}, {hours:.1f} h) was still going at the "
                        f"{refused.get('slot')} slot, which it refused: a store that large, or "
                        "a hung LLM? Stopping its process leaves nothing half done: the next "
                        "start of `amem serve` or `amem scheduler` runs it again")
    if nightly.get("schedule_changed"):
        problems.append(f"the schedule is {nightly.get('schedule')}, but "
                        f"{nightly['schedule_changed']}")
    erasures_ok = _erasures(store, memory, problems)
    _rebuild_leftovers(store, memory, problems, fix)
    marks_ok = _supersession(store, memory, problems, fix)
    lcm_data: dict[str, Any] = lcm("doctor")
    if clean:
        lcm_data = {"doctor": lcm_data, "clean": lcm("doctor_clean")}
    lcm_doctor = lcm_data.get("doctor", lcm_data) or {}
    _lcm_leftovers(lcm_doctor, problems)
    lcm_ok = lcm_doctor.get("ok", True)
    if lcm_doctor.get("too_new"):  # intact: restoring a backup would lose the newer writes
        lcm_ok = False
        problems.append(f"the conversation store could not be opened ({lcm_doctor.get('reason')}); "
                        "it is intact: run this amem's newer version on it, never restore it or "
                        "move it aside")
    elif lcm_doctor.get("failed"):  # it exists and would not open: ok: True beside "malformed"
        lcm_ok = False
        # The store's own advice when it has one: a damaged file and one this user may not
        # write need different things, and a server that is down needs neither.
        advice = f": {lcm_doctor['advice']}" if lcm_doctor.get("advice") else ""
        problems.append(f"the conversation store could not be opened ({lcm_doctor.get('reason')}); "
                        f"`amem serve` and the nightly job refuse to run on it{advice}")
    # Links to deleted notes are warnings: search skips inactive notes, nothing is broken.
    return {"ok": bool(lcm_ok) and marks_ok and erasures_ok, "memory": memory, "lcm": lcm_data,
            "warnings": problems}


def _lcm_leftovers(lcm_doctor: dict[str, Any], problems: list[str]) -> None:
    """The ``.tmp`` files large-file writes killed at their rename left (lcm's doctor finds
    them: old enough, no writer holds them). Named here as well: they sat in lcm's findings
    only, where nothing said that ``--fix`` deletes them. A warning: no row names them."""
    count = int((lcm_doctor.get("checks") or {}).get("leftover_temp_files", 0))
    if not count:
        return
    named = [str(i.get("id")) for i in lcm_doctor.get("issues", [])
             if i.get("check") == "leftover_temp_files"][:10]
    more = " ..." if count > len(named) else ""
    problems.append(f"{count} leftover .tmp files of large-file writes killed before their "
                    f"rename lie in the conversation store's file directory: "
                    f"{', '.join(named)}{more} (old, no writer holds them, no row names them: "
                    f"nothing was lost); `amem doctor --fix` deletes them")


def _erasures(store: Any, memory: dict[str, Any], problems: list[str]) -> bool:
    """A ``delete --all`` that did not finish (``amem.purge.unfinished_erasures``): not ok,
    since an erase is asked for privacy and the agent's memory is still partly there."""
    from amem.purge import unfinished_erasures

    unfinished = unfinished_erasures(store.index)
    memory["delete_all_unfinished"] = unfinished
    for part in unfinished:
        problems.append(f"a delete --all of agent {part['agent_id']!r} started at "
                        f"{part['started_at']} did not finish ({part['notes_left']} of its notes "
                        f"are still stored): run it again (`amem --agent {part['agent_id']} "
                        f"delete --all --yes`)")
    return not unfinished


def _rebuild_leftovers(store: Any, memory: dict[str, Any], problems: list[str],
                       fix: bool) -> None:
    """What a killed ``amem reembed`` left beside the store (``amem.storeswap``): the store in
    use is whole, but the spool is a copy of every note's text; deleted with ``fix``."""
    from pathlib import Path

    from amem.storeswap import abandoned_rebuild, remove_abandoned

    if store.backend_kind != "edge":
        return
    path = Path(store.location)
    found = abandoned_rebuild(path)
    memory["reembed_leftovers"] = [str(p) for p in found]
    if found and fix:
        memory["reembed_leftovers_removed"] = [str(p) for p in remove_abandoned(path)]
    elif found:
        problems.append(f"an interrupted `amem reembed` left {', '.join(p.name for p in found)} "
                        f"beside the store ({path.parent}; the store itself is intact, and the "
                        f"spool is a copy of every note's text): run the reembed again to "
                        f"finish it, or `amem doctor --fix` to delete them")


def _one_way_links(store: Any, live_links: dict[tuple[str, str], list[str]],
                   memory: dict[str, Any], problems: list[str], fix: bool) -> None:
    """One-way links (a note lists a live neighbour that does not list it back) and the notes
    still marked as owing back-links (``amem.backlinks``); written with ``fix``. A warning:
    nothing is lost, search reaches such a note from one side only."""
    from amem.backlinks import count_owed, mend_links, one_way

    halves = one_way(live_links)
    memory["one_way_links"] = len(halves)
    memory["links_owed"] = count_owed(store.index)
    if halves:
        memory["one_way_examples"] = [f"{a}/{src} -> {dst}" for a, src, dst in halves[:10]]
    if fix and (halves or memory["links_owed"]):
        settled, completed = mend_links(store.index)
        memory["links_mended"] = {"notes_settled": settled, "links_completed": completed}
    elif halves or memory["links_owed"]:
        problems.append(f"{len(halves)} links are one-way and {memory['links_owed']} notes owe "
                        f"back-links (an add or edit was killed between writing a note and "
                        f"writing its links back, so search reaches such a note from one side "
                        f"only); `amem doctor --fix` writes the missing halves (the nightly job "
                        f"does too, and the next add those marked owed)")


def _untidy_tags(store: Any, notes: list[Any], memory: dict[str, Any], problems: list[str],
                 fix: bool) -> None:
    """Notes holding tags an older amem wrote that this one refuses (a tag of only '#') or
    keeps once (one tag in two spellings), ``amem.tagtidy``; tidied with ``fix``. A warning:
    the tags filter still finds the note by its other spellings, nothing is lost."""
    from amem.tagtidy import tidy

    memory["untidy_tags"] = len(notes)
    memory["untidy_tags_examples"] = [f"{n.agent_id}/{n.id}: {', '.join(n.tags)}"
                                      for n in notes[:10]]
    if fix and notes:
        memory["tags_tidied"] = tidy(store.index, notes)
    elif notes:
        problems.append(
            f"{len(notes)} notes hold tags an older amem wrote that this one refuses or keeps "
            f"once (a tag of only '#', or one tag in two spellings such as 'morning' and "
            f"'#Morning'), e.g. {', '.join(n.id for n in notes[:3])}; `amem doctor --fix` "
            f"drops the empty ones and keeps each tag once, recorded in the note's history")


def rank_table_problem(table: dict[str, Any] | None) -> str | None:
    """The warning for a ranking table whose fill failed (``MemoryStore.keep_ranking_fields``):
    searches still work, reading the other notes' fields from disk, so it is a warning."""
    state = str((table or {}).get("state", ""))
    if not state.startswith("failed"):
        return None
    assert table is not None
    return (f"the ranking table stopped filling after {table.get('points')} notes "
            f"({state[len('failed: '):]}); searches read the other notes' ranking fields "
            f"from disk until the server restarts")


def _supersession(store: Any, memory: dict[str, Any], problems: list[str], fix: bool) -> bool:
    """The supersession audit into ``memory["supersession"]`` (healed with ``fix``); False
    when a fact stays hidden for no live reason."""
    found = store.superseder.audit()
    hiding = [p for p in found if p.kind != "unbacked_entry"]
    kinds: dict[str, int] = {}
    for p in found:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    part: dict[str, Any] = {"problems": len(found), "hiding_a_fact": len(hiding),
                            "by_kind": kinds, "examples": [p.to_dict() for p in found[:10]]}
    memory["supersession"] = part
    if fix and found:
        part["released"] = store.superseder.heal(found)
        part["fixed"] = len(found)
        return True
    if hiding:
        problems.append(f"{len(hiding)} facts are hidden by supersession marks that no live "
                        f"note backs (an interrupted write, or a store written before they "
                        f"healed); `amem doctor --fix` releases them (the nightly job does too)")
    elif found:
        problems.append(f"{len(found)} notes list older notes they do not hide (harmless); "
                        f"`amem doctor --fix` tidies them")
    return not hiding


def lcm_report(store: Any, method: str, /, **options: bool) -> dict[str, Any]:
    """One report of an open lcm store (``None``: the server runs without lcm), ``options``
    passed to its method (``doctor_clean(apply=True)``: ``amem doctor --fix``)."""
    if store is None:
        return {"available": False, "reason": "the server runs without the conversation store "
                                              "(amem serve --no-lcm)"}
    result = getattr(store, method)(**options)
    return result.to_dict() if hasattr(result, "to_dict") else dict(result)


#: ``(name, agent_id, clean) -> report``: what ``tools.mcp_server.OwnerAccess`` serves an owner
OwnerReports = Callable[[str, str, bool], dict[str, Any]]


def plain_owner_reports(store: Any, lcm: Any, nightly: dict[str, Any]) -> OwnerReports:
    """The owner's status and doctor reports of two open stores, with a fixed nightly state.

    ``amem serve`` builds its own from its runtime (the nightly record, the auth warning); a
    server built in-process (tests, benchmarks) has neither and uses this one.
    """
    def lcm_part(method: str) -> dict[str, Any]:
        return lcm_report(lcm, method)

    def report(name: str, agent_id: str, clean: bool) -> dict[str, Any]:
        if name == "status":
            return status_report(store, agent_id, lcm_part, nightly)
        return doctor_report(store, lcm_part, nightly, clean=clean)

    return report
