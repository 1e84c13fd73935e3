"""Markdown rendering of a performance-suite run: one table per benchmark, ratios first."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ._util import fmt, fmt_ratio, ratio

Table = list[list[Any]]


def table(header: list[str], rows: Table) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c if isinstance(c, str) else fmt(c) for c in row) + " |"
              for row in rows]
    return "\n".join(lines)


def _search(r: dict[str, Any]) -> str:
    rows: Table = []
    for size, row in r["sizes"].items():
        for stage in ("before_optimize", "before_optimize_table", "after_optimize",
                      "after_optimize_table"):
            m = row.get(stage)
            if m is None:
                continue
            floor = m["engine"]["p50_ms"] + m["embed"]["p50_ms"]
            when = "after" if stage.startswith("after") else "before"
            rows.append([int(size), when + (", table" if stage.endswith("_table") else ""),
                         m["full"]["p50_ms"], m["full"]["p95_ms"], m["engine"]["p50_ms"],
                         m["embed"]["p50_ms"], floor, m["baseline"]["p50_ms"],
                         fmt_ratio(m["ratios"]["full_over_engine_plus_embed_p50"]),
                         fmt_ratio(m["ratios"]["baseline_over_full_p50"]),
                         m["full"]["n"], m["baseline"]["n"]])
    text = (f"Embedder `{r.get('embedder')}`. Times in ms. *full* = `MemoryStore.search`; "
            "*engine* = one raw hybrid RRF query of the engine; *embed* = the query embedding; "
            "*baseline* = openclaw-style (rank-bm25 rebuilt per query + dense + RRF). "
            "*table*: as `amem serve` searches, with every note's ranking fields kept in RAM "
            "(`amem.backends._edge_table`). Aims (issue 25): full/(engine+embed) <= 1.3x at 10k "
            "and 100k, baseline/full >= 10x at 10k and >= 100x at 100k.\n\n")
    text += table(["notes", "optimize()", "full p50", "full p95", "engine p50", "embed p50",
                   "engine+embed", "baseline p50", "full / (engine+embed)", "baseline / full",
                   "queries", "baseline queries"], rows)
    def kept(row: dict[str, Any], key: str) -> Any:
        last = row.get("after_optimize_table") or row.get("before_optimize_table") or {}
        return last.get("table", {}).get(key)

    fills = [[int(s), row["fill_s"], row["upserts_per_s"], row.get("optimize_s"),
              kept(row, "fill_wall_s"), kept(row, "rss_change_mb")]
             for s, row in r["sizes"].items()]
    text += "\n\n" + table(["notes", "fill s", "upserts/s", "optimize() s",
                             "ranking table fill s", "RSS change over the fill MiB"], fills)
    rss = r.get("rss", {})
    rss_rows = [[int(s), v["peak_mb_after"], v.get("rss_mb_now")]
                for s, v in rss.items() if isinstance(v, dict)]
    if rss_rows:
        text += ("\n\n**Memory** (process peak RSS via `getrusage`, which never falls: the row of "
                 f"the largest store is its peak; peak before the first store: "
                 f"{fmt(rss.get('peak_mb_before'))} MiB)\n\n")
        text += table(["after store of notes", "peak RSS MiB", "RSS now MiB"], rss_rows)
    return text


def _embed(r: dict[str, Any]) -> str:
    rows: Table = [[label, f"`{e['model_id']}`", e["notes_per_s"], e["best_notes_per_s"],
                    fmt_ratio(e.get("x_default")), fmt_ratio(e.get("x_fastest")),
                    e["query_p50_ms"], e["load_s"]]
                   for label, e in r["embedders"].items()]
    text = (f"{r['notes']} LoCoMo turns, `kind=\"passage\"` in the embedder's batches. Ratios to "
            f"the default (`e5-small/t1`) and to the fastest model of the run "
            f"(`{r.get('fastest')}`).\n\n")
    text += table(["config", "model", "notes/s", "best", "x default", "x fastest",
                   "query p50 ms", "load s"], rows)
    for label, why in r.get("skipped", {}).items():
        text += f"\n\n- `{label}` skipped: {why}"
    return text


def _import(r: dict[str, Any]) -> str:
    raw = r["raw"]["notes_per_s"]
    phases = [("raw embedder, note contents (the limit)", r["raw"]),
              ("import, `enrich=False`", r["import_no_enrich"]),
              ("import, offline enrichment", r["import_enrich"]),
              ("raw embedder, enriched note texts", r.get("raw_note_texts"))]
    rows: Table = [[name, p["notes"], p["seconds"], p["notes_per_s"],
                    fmt_ratio(ratio(p["notes_per_s"], raw)), p["loadavg"]]
                   for name, p in phases if p]
    ie = r["import_enrich"]
    text = (f"{r['notes']} notes (real LoCoMo turns; pairs of turns beyond the file's own), "
            f"embedder `{r['embedder']}`, batch "
            f"{r['embed_batch']}. Aim: enriched import >= {r['aim_enrich_over_raw']:.0%} of raw "
            f"— **{'met' if r['meets_aim'] else 'not met'}** "
            f"({fmt_ratio(r['ratios']['import_enrich_over_raw'])}).\n\n")
    text += table(["phase", "notes", "seconds", "notes/s", "x raw", "load avg"], rows)
    text += (f"\n\nEnriched import outcome: created {ie['created']}, pending_merge "
             f"{ie['pending_merge']}, folded {ie['folded']}, deduplicated {ie['deduplicated']}, "
             f"skipped {ie['skipped']}.")
    a = r.get("add_latency")
    text += ("\n\n*x raw* of the enriched import against the last row separates the two costs: "
             "longer inputs (the vector embeds content + keywords + tags + context) and the "
             "pipeline itself (dedup, enrichment, links, evolution, writes).")
    if a:
        text += (f"\n\nSingle `add` (offline enrichment) into the store of "
                 f"{a['store_notes_before']} notes:\n\n")
        text += table(["", "p50 ms", "p95 ms", "max ms", "n"],
                      [["`add`", a["add"]["p50_ms"], a["add"]["p95_ms"], a["add"]["max_ms"],
                        a["add"]["n"]],
                       ["embed one text alone", a["embed_one"]["p50_ms"],
                        a["embed_one"]["p95_ms"], a["embed_one"]["max_ms"], a["embed_one"]["n"]],
                       ["add / embed (p50)", fmt_ratio(a["add_over_embed_p50"]), "", "", ""]])
    prof = r.get("profile")
    if prof:
        text += (f"\n\nProfile of an enriched import of {prof['notes']} notes "
                 f"({prof['seconds']} s under cProfile), heaviest amem functions:\n\n")
        text += table(["function", "calls", "cumulative share", "self share"],
                      [[f"`{p['function']}`", p["calls"], f"{p['cum_share']:.1%}",
                        f"{p['self_share']:.1%}"] for p in prof["top_amem_cumulative"]])
    return text


def _lcm(r: dict[str, Any]) -> str:
    parts = []
    for s in r["sizes"]:
        parts.append(f"**{s['messages']} messages**: ingest {fmt(s['ingest_msgs_per_s'])} msgs/s "
                     f"({s['ingest_s']} s), database {fmt(s['db_bytes'] / 2**20)} MiB.\n")
        for key, title in (("grep", ""), ("grep_after_old_import",
                                          "\nAfter an import of 1,000 older messages (row ids "
                                          "no longer follow time):\n")):
            grep = s.get(key)
            if not grep:
                continue
            rows: Table = [[name, g["grep_ms"], g["like_scan_ms"], fmt_ratio(g["speedup_vs_like"]),
                            g["hits"]] for name, g in grep.items() if isinstance(g, dict)]
            parts.append(title + table(["grep case", "grep ms", "LIKE scan ms", "LIKE / grep",
                                        "hits"], rows))
            if "full_text_session_family_ms" in grep:
                parts.append(f"\nFull text within one session family: "
                             f"{grep['full_text_session_family_ms']} ms.")
    a = r.get("assembly")
    if a:
        parts.append(f"\n**Assembly** over {a['messages']} messages: compaction {a['compaction_s']} s "
                     f"({a['summaries']} summaries), `assemble` {a['assemble_ms']} ms, "
                     f"{fmt(a['raw_tokens'])} raw tokens -> {fmt(a['assembled_tokens'])} "
                     f"({a['compression_ratio']}x).")
    t = r.get("token_estimator")
    if t:
        parts.append(f"\nToken estimator: {fmt(t['chars_per_s'])} chars/s.")
    return "\n".join(parts)


def _consolidate(r: dict[str, Any]) -> str:
    rows: Table = [[x["notes"], x["planted_duplicates"], x["merges"], x["precision"], x["recall"],
                    x["consolidate_s"], x["second_run_s"], x["scroll_s"],
                    fmt_ratio(x["consolidate_over_scroll"]), fmt_ratio(x["second_run_over_scroll"]),
                    x["broken_links_after"]] for x in r["results"]]
    text = (f"{r['vectors']}, backend {r['backend']}. Baseline: one full scroll of the store "
            "with vectors in the same process.\n\n")
    return text + table(["notes", "planted dups", "merges", "precision", "recall",
                         "consolidate s", "second run s", "scroll s", "consolidate / scroll",
                         "second / scroll", "broken links"], rows)


def _no_table(result: dict[str, Any]) -> str:
    """A benchmark without a table of its own: its figures as JSON."""
    return f"```json\n{json.dumps(result, indent=1, ensure_ascii=False)[:6000]}\n```"


SECTIONS: dict[str, tuple[str, Callable[[dict[str, Any]], str]]] = {
    "search": ("Search latency (and RSS)", _search),
    "embed": ("Embedder throughput (the limit)", _embed),
    "import": ("Bulk import and `add`", _import),
    "lcm": ("LCM ingest, grep and assembly", _lcm),
    "consolidate": ("Consolidation", _consolidate),
}


def section(name: str, entry: dict[str, Any], command: str) -> str:
    title, render = SECTIONS.get(name, (name, _no_table))
    other = entry.get("command", command) != command  # kept from an earlier run by --merge
    origin = f" (from `{entry['command']}`, {entry.get('date')})" if other else ""
    head = f"## {title}\n\n_`{name}`: {entry['status']} in {entry['seconds']} s{origin}._\n\n"
    if entry["status"] != "ok":
        return head + f"```\n{entry['error']}\n```\n"
    try:
        body = render(entry["result"])
    except (KeyError, TypeError, ValueError) as exc:
        # a benchmark changed its output shape: show the figures raw rather than lose them
        body = (f"_The table could not be drawn ({type(exc).__name__}: {exc}); raw figures:_\n\n"
                f"```json\n{json.dumps(entry['result'], indent=1, ensure_ascii=False)[:6000]}\n```")
    return head + body + "\n"


def _earlier(suite: dict[str, Any], command: str) -> str:
    kept = sorted({e["command"] for e in suite["benchmarks"].values()
                   if e.get("command", command) != command})
    return "".join(f"; earlier figures kept from `{c}`" for c in kept)


def render(suite: dict[str, Any], command: str, retrieval: str,
           earlier: dict[str, str] | None = None) -> str:
    """The whole results file; ``earlier`` holds sections of benchmarks not in ``suite``, kept
    verbatim from the previous file (each names the run it came from)."""
    earlier = earlier or {}
    m = suite["machine"]
    pk = ", ".join(f"{k} {v}" for k, v in m["packages"].items())
    status = ", ".join([f"{n}: {e['status']}" for n, e in suite["benchmarks"].items()]
                       + [f"{n}: kept from the previous file" for n in earlier])
    head = [
        "# Benchmark results",
        "",
        "<!-- Rewritten by benchmarks/run_all.py; only the retrieval and manual sections below are kept. -->",
        "",
        f"- Command: `{command}`" + (" (quick sizes: a smoke run, not figures)" if suite["quick"]
                                     else "") + _earlier(suite, command)
        + ("; the other sections kept from the previous file" if earlier else ""),
        f"- Date: {suite['date']}; commit {suite.get('commit') or 'unknown'}",
        f"- Machine: {m['cpus']} cores, Python {m['python']}, {m['platform']}; load average "
        f"{m['loadavg']} at the start, {suite.get('loadavg_end')} at the end",
        f"- Packages: {pk}",
        f"- Benchmarks: {status}",
        "",
        "Absolute times move with the machine's load (a shared 2-core machine here): read the "
        "ratios, each against a baseline run in the same process on the same data.",
        "",
    ]
    blocks = {name: section(name, entry, command) for name, entry in suite["benchmarks"].items()}
    blocks.update(earlier)
    order = list(SECTIONS)
    body = [blocks[n] for n in sorted(blocks, key=lambda n: order.index(n) if n in order
                                      else len(order))]
    return "\n".join(head) + "\n" + "\n".join(body) + "\n" + retrieval + "\n"
