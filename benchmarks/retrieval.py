"""Retrieval quality on real data: the store's own add + search against BM25, dense and RRF.

    python -m benchmarks.retrieval locomo --data ../shared/benchdata/locomo_dev.json --out r.json
    python -m benchmarks.retrieval cmrc --data ../shared/benchdata/cmrc2018_dev_part.json --out c.json

The protocols are those of ``../shared/benchdata/README.md``. Every conversation is its own
tenant of one store (agent id = sample id). The result maps method -> group -> metric, e.g.
``{"store": {"cat1-4": {"R@10": ...}}}``, plus timings and the settings used.

Methods: ``store`` (the ``limit`` matches of ``search``), with ``--links`` the lists the tool
returns, matches then linked notes, as an agent sees them: ``tool@5`` (limit 5: five matches,
then up to 8 linked notes; its R@10 counts 5 matches + 5 links against ``store``'s 10
matches) and ``tool@10`` (limit 10; ``R@list`` compares its whole list with as many matches),
and the baselines run in the same process: ``bm25`` (rank_bm25.BM25Okapi on lowercase
``\\w+`` tokens; jieba tokens for Chinese), ``dense`` (the store's embedder, brute-force
cosine) and ``rrf`` (plain RRF, k=60). ``graph`` reports the links after the import: notes
with a link, links per note, and the share of tool searches that returned a linked note.

``--cache DIR`` keeps the embeddings on disk between runs (``benchmarks.embcache``; each text
embedded alone, so a figure does not depend on what filled the cache). ``--realization K``
(1-3) embeds each passage beside a fixed companion text instead: vectors as valid as the
first, which say how far the embedder's batch noise alone moves a figure; ``--realizations
0,1,2,3`` runs once per realization and prints each headline figure's spread.

``--crowd N`` is the crowded store (``benchmarks.crowd``): each LoCoMo conversation among the
other conversations' turns under fresh speaker names until its store holds N notes; every
method, baselines included, ranks the same crowd. Standard sizes: 1500 and 10000 (50000 where
time allows). Results come per conversation and on two held-apart halves beside the means.

``--source-title MODE`` (CMRC) gives each sentence its article's title, as an import of a
document knows it: ``keyword`` or ``tag`` (BM25 counts the title's terms the sentence lacks
once; the vector embeds a "Keywords: ..." / "Tags: ..." line), ``subject`` (as ``amem import``
gives it: the same on both legs with a "Subjects: ..." line), ``text`` (the title opens the
sentence). ``off``, the default, is
the plain protocol of ``../shared/benchdata/README.md``; the baselines get the same title
where fair (``baseline_views``). CMRC results are also read on the questions of the first and
second half of the articles.

``--out`` also keeps each question's scores for the store and the tool lists
(``per_question``): ``python -m benchmarks.compare before.json after.json`` pairs two runs
question by question and counts the questions a change moves up and down (with a sign test),
so a mean carried by a few questions is seen as such.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from amem import MemoryStore, load_config
from amem.embed import make_embedder
from amem.backends.base import Where
from amem.kernel.fusion import rrf
from amem.notes import compose_embed_text

from .crowd import crowd
from .datasets import DEFAULT_CMRC, DEFAULT_LOCOMO, Corpus, Doc, Query, load_cmrc, load_locomo
from .embcache import REALIZATIONS, CachedEmbedder
from .metrics import dedup_order, mean, recall_at, score

DEPTH = 50  # ranked-list depth scored (MRR past 50 adds < 0.02)


def _bm25_tokens(text: str, chinese: bool) -> list[str]:
    if chinese:
        import jieba

        return [t for t in jieba.lcut(text.lower()) if t.strip() and re.match(r"\w", t)]
    return re.findall(r"\w+", text.lower())


def source_fields(doc: Doc, mode: str) -> dict[str, Any]:
    """The fields of a store item that carry the note's source title (``--source-title``).

    ``tag`` / ``keyword``: the title as the note's one tag or keyword, as a caller importing a
    document would give it; BM25 then counts each title term the sentence lacks once
    (``amem.bm25.note_terms``) and the vector embeds ``compose_embed_text``'s
    "Tags: ..." / "Keywords: ..." line after the content. ``subject``: the title in
    ``subjects``, as ``amem import`` gives a document's title to its chunks: it reaches both
    legs as a keyword does (a "Subjects: ..." line), and it does not switch enrichment off.
    ``text``: no field; the title opens the content itself (see :func:`titled_text`).
    """
    if mode == "off" or not doc.source:
        return {}
    if mode in ("tag", "keyword", "subject"):
        return {{"tag": "tags", "keyword": "keywords", "subject": "subjects"}[mode]: [doc.source]}
    return {}


def titled_text(doc: Doc, text: str, mode: str) -> str:
    """The note's content: ``text``, opened by its source title in ``--source-title text``."""
    return f"{doc.source}：{text}" if mode == "text" and doc.source else text


def baseline_views(corpus: Corpus, note_text: dict[str, str], mode: str, chinese: bool
                   ) -> tuple[list[list[str]], list[str]]:
    """What the baselines index of each note: BM25 tokens and the text dense embeds.

    Given the same information as the store, where fair: with a tag or keyword title, BM25
    gets the title's tokens the note lacks once (as ``note_terms`` does) and dense embeds the
    text the store's vector embeds (``compose_embed_text``); a subject title likewise.
    """
    tokens, dense = [], []
    for doc in corpus.docs:
        text = note_text[doc.id]
        toks = _bm25_tokens(text, chinese)
        fields = source_fields(doc, mode)
        if fields:
            have = set(toks)
            for t in _bm25_tokens(doc.source or "", chinese):
                if t not in have:
                    have.add(t)
                    toks.append(t)
            text = compose_embed_text(text, fields.get("keywords", []), fields.get("tags", []), "",
                                      fields.get("subjects", []))
        tokens.append(toks)
        dense.append(text)
    return tokens, dense


def baselines(corpus: Corpus, embedder: Any, chinese: bool, note_text: dict[str, str],
              source_title: str = "off") -> tuple[dict[str, list[list[str]]], dict[str, float]]:
    """Full rankings per query for bm25, dense and plain rrf, and their timings."""
    from rank_bm25 import BM25Okapi

    ids = [d.id for d in corpus.docs]
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    doc_tokens, texts = baseline_views(corpus, note_text, source_title, chinese)
    bm = BM25Okapi(doc_tokens)
    t1 = time.perf_counter()
    doc_vecs = embedder.embed(texts, kind="passage")
    t2 = time.perf_counter()
    q_vecs = embedder.embed([q.text for q in corpus.queries], kind="query")
    t3 = time.perf_counter()
    out: dict[str, list[list[str]]] = {"bm25": [], "dense": [], "rrf": []}
    for qi, query in enumerate(corpus.queries):
        s = np.asarray(bm.get_scores(_bm25_tokens(query.text, chinese)))
        # Only documents sharing a term are ranked by BM25 (as in the store).
        order = [i for i in np.argsort(-s, kind="stable") if s[i] > 0][:DEPTH]
        out["bm25"].append([ids[i] for i in order])
        sims = doc_vecs @ q_vecs[qi]
        out["dense"].append([ids[i] for i in np.argsort(-sims, kind="stable")[:DEPTH]])
        out["rrf"].append([i for i, _ in rrf([out["bm25"][-1], out["dense"][-1]], k=60)][:DEPTH])
    timings.update(bm25_index_s=t1 - t0, dense_embed_docs_s=t2 - t1, dense_embed_queries_s=t3 - t2)
    return out, timings


def turn_time(session_time: str, told: dict[str, int]) -> str:
    """The session's time plus one second per turn already told in it (``told`` counts them).

    LoCoMo dates a session, not its turns; a chat imported message by message has each
    message's own time, and the store's neighbour step (``amem.search.adjacent``) reads that
    order. A second apart keeps every turn on its session's day and minute.
    """
    k = told.get(session_time, 0)
    told[session_time] = k + 1
    return (datetime.fromisoformat(session_time) + timedelta(seconds=k)).isoformat()


def store_rankings(store: MemoryStore, corpus: Corpus, args: argparse.Namespace,
                   note_text: dict[str, str]) -> tuple[dict[str, list[list[str]]], dict[str, Any]]:
    """Add the corpus through ``add_many`` and run every query through ``search``."""
    agent = corpus.name
    items = []
    told: dict[str, int] = {}
    for doc in corpus.docs:
        item: dict[str, Any] = {"text": note_text[doc.id], "id": doc.id,
                                **source_fields(doc, args.source_title)}
        if doc.timestamp:
            item["timestamp"] = turn_time(doc.timestamp, told) if args.turn_times \
                else doc.timestamp
        items.append(item)
    t0 = time.perf_counter()
    results = store.add_many(items, enrich=args.enrich != "off", agent_id=agent,
                             supersede=getattr(args, "supersede", True))
    t1 = time.perf_counter()
    # A folded turn lives inside another note: map stored note ids back to every turn they hold.
    holds: dict[str, list[str]] = {}
    statuses: dict[str, int] = {}
    for doc, res in zip(corpus.docs, results):
        holds.setdefault(res.id, []).append(doc.id)
        statuses[res.status] = statuses.get(res.status, 0) + 1
    for nid in list(holds):
        if nid not in holds[nid]:
            holds[nid].insert(0, nid)

    def expand(ids: Sequence[str]) -> list[str]:
        return dedup_order(t for nid in ids for t in holds.get(nid, [nid]))

    out: dict[str, list[list[str]]] = {"store": []}
    latencies = []
    with_links = {5: 0, 10: 0}
    for query in corpus.queries:
        s0 = time.perf_counter()
        hits = store.search(query.text, limit=DEPTH, agent_id=agent, expand_links=False)
        latencies.append(time.perf_counter() - s0)
        out["store"].append(expand([h.id for h in hits]))
        if args.links:
            for limit in (5, 10):
                tool = store.search(query.text, limit=limit, agent_id=agent, heat=False)
                out.setdefault(f"tool@{limit}", []).append(expand([h.id for h in tool]))
                with_links[limit] += any(h.via == "link" for h in tool)
    graph: dict[str, float] = graph_stats(store, agent)
    hidden = sorted(str(h.payload.get("id")) for h in store.index.backend.iterate(
        Where(must=tuple(store.index.tenant_filter(agent))))
        if h.payload.get("superseded_by"))
    info = {"add_s": t1 - t0, "statuses": statuses, "graph": graph, "superseded": hidden,
            "search_p50_ms": round(1000 * float(np.percentile(latencies, 50)), 2),
            "search_p95_ms": round(1000 * float(np.percentile(latencies, 95)), 2)}
    if args.links and corpus.queries:
        graph.update({f"searches_with_links@{k}": round(v / len(corpus.queries), 3)
                              for k, v in with_links.items()})
    return out, info


def graph_stats(store: MemoryStore, agent: str) -> dict[str, float]:
    """How linked the imported notes are: share with a link, links per note."""
    counts = [len(h.payload.get("links", [])) for h in store.index.backend.iterate(
        Where(must=tuple(store.index.tenant_filter(agent))))]
    if not counts:
        return {"notes": 0}
    return {"notes": len(counts),
            "notes_with_links": round(sum(1 for c in counts if c) / len(counts), 3),
            "links_per_note": round(sum(counts) / len(counts), 3)}


def evaluate(task: str, corpora: list[Corpus], rankings: dict[str, list[list[list[str]]]]
             ) -> dict[str, dict[str, dict[str, float]]]:
    """method -> group -> metric (groups: cat1-4, cat1..cat5 for LoCoMo; all for CMRC).

    ``R@list`` is the recall of ``tool@10``'s whole list, and of ``store`` cut to the same
    length query by query: do linked notes beat the next matches, for as many notes shown?
    """
    result: dict[str, dict[str, dict[str, float]]] = {}
    tool_len = [[len(r) for r in lists] for lists in rankings.get("tool@10", [])]
    for method, per_corpus in rankings.items():
        rows: dict[str, list[dict[str, float]]] = {}
        for ci, (corpus, ranked_lists) in enumerate(zip(corpora, per_corpus)):
            for qi, (query, ranked) in enumerate(zip(corpus.queries, ranked_lists)):
                s = score(ranked, query.relevant)
                if tool_len and method in ("store", "tool@10"):
                    s["R@list"] = recall_at(ranked, query.relevant, tool_len[ci][qi])
                if task == "locomo":
                    rows.setdefault(f"cat{query.category}", []).append(s)
                    if query.category != "5":
                        rows.setdefault("cat1-4", []).append(s)
                else:
                    rows.setdefault("all", []).append(s)
        result[method] = {group: mean(r) for group, r in sorted(rows.items())}
    return result


def per_corpus(corpora: list[Corpus], rankings: dict[str, list[list[list[str]]]]
               ) -> dict[str, dict[str, dict[str, float]]]:
    """method -> corpus -> metric over the corpus's scored queries (LoCoMo: categories 1-4):
    a change must hold in every conversation, not only on the mean."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for method, per in rankings.items():
        for corpus, ranked_lists in zip(corpora, per):
            rows = [score(ranked, q.relevant) for q, ranked in zip(corpus.queries, ranked_lists)
                    if q.category != "5"]
            out.setdefault(method, {})[corpus.name] = mean(rows)
    return out


def question_halves(queries: Sequence[Query]) -> list[str | None]:
    """Each question's held-apart half, in the data's order: "a" and "b" alternately over the
    scored questions; None for LoCoMo's category 5, which the halves leave out."""
    out: list[str | None] = []
    scored = 0
    for query in queries:
        if query.category == "5":
            out.append(None)
        else:
            out.append("ab"[scored % 2])
            scored += 1
    return out


def halves(corpora: list[Corpus], rankings: dict[str, list[list[list[str]]]]
           ) -> dict[str, dict[str, dict[str, float]]]:
    """method -> half -> metric (LoCoMo categories 1-4; CMRC all): the questions of each
    conversation alternately in half "a" and "b", so a change tuned on one half can be read
    on the other (a gain that holds on both is not an artefact of the dev questions).

    Questions that know their source document (CMRC's paragraphs) are also split by document:
    "first" holds the questions on the first half of the documents, "second" the rest, so a
    change is read on articles it was not chosen on, not only on other questions of the same
    articles.
    """
    out: dict[str, dict[str, dict[str, float]]] = {}
    for method, per in rankings.items():
        rows: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
        for corpus, ranked_lists in zip(corpora, per):
            kept = [(q, r, half) for q, r, half in zip(corpus.queries, ranked_lists,
                                                       question_halves(corpus.queries)) if half]
            parts = [q.part for q, _, _ in kept if q.part is not None]
            middle = (max(parts) + 1) / 2 if parts else 0.0
            for q, ranked, half in kept:
                s = score(ranked, q.relevant)
                rows[half].append(s)
                if q.part is not None:
                    rows.setdefault("first" if q.part < middle else "second", []).append(s)
        out[method] = {half: mean(r) for half, r in rows.items() if r}
    return out


#: the methods whose scores :func:`per_question` keeps (the baselines are read as means only)
PER_QUESTION_METHODS = ("store", "tool@5", "tool@10")
#: the metrics it keeps for each question
PER_QUESTION_METRICS = ("R@10", "hit@1", "MRR")


def per_question(corpora: list[Corpus], rankings: dict[str, list[list[list[str]]]]
                 ) -> dict[str, list[dict[str, Any]]]:
    """method -> one row per question: its corpus, index, text, category, half (as
    :func:`halves` splits them; None for LoCoMo's category 5) and
    :data:`PER_QUESTION_METRICS`.

    A mean moved by a few questions reads like a gain; ``python -m benchmarks.compare`` pairs
    two runs' rows and counts the questions each change moves up and down.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for method in PER_QUESTION_METHODS:
        for corpus, ranked_lists in zip(corpora, rankings.get(method, [])):
            for qi, (query, ranked, half) in enumerate(zip(corpus.queries, ranked_lists,
                                                           question_halves(corpus.queries))):
                s = score(ranked, query.relevant)
                out.setdefault(method, []).append(
                    {"corpus": corpus.name, "index": qi, "question": query.text,
                     "category": query.category, "half": half,
                     **{m: s[m] for m in PER_QUESTION_METRICS}})
    return out


def multi_hop(corpora: list[Corpus], rankings: dict[str, list[list[list[str]]]]
              ) -> dict[str, dict[str, dict[str, float]]]:
    """With ``--links`` on LoCoMo: method -> part -> R@10 and R@list of the multi-hop
    questions (category 1), per conversation and on the halves of :func:`halves`, for
    ``store``, ``tool@5`` and ``tool@10``: the few multi-hop questions of one conversation
    move the mean by more than a link can earn, so a change must hold in each part.
    """
    if "tool@10" not in rankings:
        return {}
    out: dict[str, dict[str, dict[str, float]]] = {}
    for method in ("store", "tool@5", "tool@10"):
        rows: dict[str, list[dict[str, float]]] = {c.name: [] for c in corpora}
        rows.update(a=[], b=[])
        for ci, corpus in enumerate(corpora):
            for qi, (q, half) in enumerate(zip(corpus.queries, question_halves(corpus.queries))):
                if q.category != "1" or half is None:
                    continue
                ranked = rankings[method][ci][qi]
                shown = len(rankings["tool@10"][ci][qi])
                row = {"R@10": recall_at(ranked, q.relevant, 10),
                       "R@list": recall_at(ranked, q.relevant, shown)}
                rows.setdefault(corpus.name, []).append(row)
                rows.setdefault(half, []).append(row)
        out[method] = {part: mean(r) for part, r in rows.items() if r}
    return out


def run(task: str, data: Path, args: argparse.Namespace) -> dict[str, Any]:
    loaded = load_locomo(data) if task == "locomo" else load_cmrc(data, unit=args.unit)
    corpora = loaded
    if args.corpora:
        corpora = [c for c in corpora if c.name in args.corpora.split(",")]
    if args.limit_corpora:
        corpora = corpora[:args.limit_corpora]
    if args.crowd:
        # Each conversation among the others' turns under fresh names (benchmarks.crowd); the
        # distractors come from every loaded conversation, not only the ones scored.
        corpora = [crowd(c, loaded, args.crowd) for c in corpora]
    chinese = task == "cmrc"
    overrides: dict[str, Any] = {"heat": args.heat, "link_expansion": args.links}
    # every store setting the command line may set: the option's value when given
    overrides.update({name: getattr(args, name) for name in STORE_SETTINGS
                      if getattr(args, name) is not None})
    config = load_config(overrides=overrides)
    embedder = CachedEmbedder(make_embedder(args.embedder), args.cache, args.realization)
    rankings: dict[str, list[list[list[str]]]] = {}
    timings: dict[str, Any] = {"per_corpus": []}
    started = time.perf_counter()
    with MemoryStore(":memory:", config=config, embedder=embedder) as store:
        for corpus in corpora:
            note_text = {d.id: titled_text(d, f"[{d.date_label}] {d.text}" if args.date_in_text
                                           and d.date_label else d.text, args.source_title)
                         for d in corpus.docs}
            ranked, info = store_rankings(store, corpus, args, note_text)
            if not args.no_baselines:
                base, base_t = baselines(corpus, embedder, chinese, note_text, args.source_title)
                ranked.update(base)
                info.update(base_t)
            for method, lists in ranked.items():
                rankings.setdefault(method, []).append(lists)
            timings["per_corpus"].append({"corpus": corpus.name, "docs": len(corpus.docs),
                                          "queries": len(corpus.queries), **info})
    embedder.save()
    timings["total_s"] = round(time.perf_counter() - started, 2)
    return {"task": task, "data": str(data), "settings": {
        "embedder": embedder.model_id, "enrich": args.enrich, "date_in_text": args.date_in_text,
        "links": args.links, "heat": args.heat, "unit": args.unit, "turn_times": args.turn_times,
        "source_title": args.source_title,
        **{name: getattr(config, name) for name in STORE_SETTINGS},
        "depth": DEPTH, "crowd": args.crowd, "realization": args.realization},
        "results": evaluate(task, corpora, rankings),
        "per_corpus": per_corpus(corpora, rankings), "halves": halves(corpora, rankings),
        "multi_hop": multi_hop(corpora, rankings) if task == "locomo" else {},
        "per_question": per_question(corpora, rankings), "timings": timings}


#: the store's settings a run may override (each an option of the same name, dashes for
#: underscores), reported with the results whatever their source
STORE_SETTINGS = ("fusion", "rrf_k", "sparse_weight", "dense_weight", "centering",
                  "common_words", "neighbour_weight", "neighbour_span", "mmr_lambda",
                  "question_share", "question_penalty", "time_lift", "link_min_cosine",
                  "link_pool", "link_keep", "link_lift", "link_lift_seeds", "link_lift_keep",
                  "subject_lift", "subject_head")


def _realizations(text: str) -> list[int]:
    """``--realizations``: distinct realizations (``REALIZATIONS``), comma-separated."""
    try:
        picked = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of realizations: {text!r}") from None
    if not picked or any(k not in REALIZATIONS for k in picked) or len(set(picked)) != len(picked):
        raise argparse.ArgumentTypeError(
            f"realizations are distinct numbers 0-{REALIZATIONS[-1]}, not {text!r}")
    return picked


#: the figures whose spread across realizations is printed: (group, metric) per task
SPREAD = {"locomo": [("cat1-4", "R@10"), ("cat1-4", "MRR"), ("cat1", "R@10"), ("cat5", "R@10"),
                     ("cat1", "R@list")],
          "cmrc": [("all", "hit@1"), ("all", "hit@10"), ("all", "MRR")]}


def spread(task: str, results: dict[int, dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """method -> "group metric" -> the figure in each realization (in the order run): how far
    the embedder's batch noise alone moves it. Figures a method lacks are left out."""
    out: dict[str, dict[str, list[float]]] = {}
    first = next(iter(results.values()))["results"]
    for method in first:
        for group, metric in SPREAD[task]:
            values = [r["results"].get(method, {}).get(group, {}).get(metric)
                      for r in results.values()]
            if all(v is not None for v in values):
                out.setdefault(method, {})[f"{group} {metric}"] = [float(v) for v in values]
    return out


def spread_table(task: str, results: dict[int, dict[str, Any]]) -> str:
    """Markdown: each headline figure per realization, then its range."""
    rows = spread(task, results)
    keys = list(results)
    lines = ["| method | figure | " + " | ".join(f"r{k}" for k in keys) + " | range |",
             "|---|---|" + "---|" * (len(keys) + 1)]
    for method, figures in rows.items():
        for name, values in figures.items():
            lines.append(f"| {method} | {name} | " + " | ".join(f"{v:.3f}" for v in values)
                         + f" | {max(values) - min(values):.3f} |")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.retrieval", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", choices=["locomo", "cmrc"])
    p.add_argument("--data", type=Path, help="data file (defaults to ../shared/benchdata/...)")
    p.add_argument("--out", type=Path, help="write the JSON result here")
    p.add_argument("--embedder", default="e5-small", help="embedder preset (default e5-small)")
    p.add_argument("--enrich", choices=["off", "offline"], default="off",
                   help="off: the episodic fast path; offline: the full write pipeline")
    p.add_argument("--date-in-text", action=argparse.BooleanOptionalAction, default=True,
                   help="prefix each LoCoMo turn with its session date")
    p.add_argument("--turn-times", action=argparse.BooleanOptionalAction, default=True,
                   help="give each LoCoMo turn its session's time plus one second per earlier "
                        "turn (the order a chat import has); --no-turn-times: the session time")
    p.add_argument("--centering", type=float,
                   help="the share of the tenant's centroid taken off ranking's query vector "
                        "(amem.search.centroid; 0 = off)")
    p.add_argument("--common-words", type=float,
                   help="how much of each common word's vector is taken off ranking's query "
                        "vector (amem.search.centroid; 0 = off)")
    p.add_argument("--neighbour-weight", type=float,
                   help="the store's neighbour lift (amem.search.adjacent; 0 = off)")
    p.add_argument("--neighbour-span", type=int, help="neighbours on each side")
    p.add_argument("--mmr-lambda", type=float, help="the store's MMR (amem.search.diverse; 1 = off)")
    p.add_argument("--question-share", type=float,
                   help="the store's reply-first step (amem.search.replies; 0 = off)")
    p.add_argument("--question-penalty", type=float,
                   help="how far a note that asks steps back among the first 20 "
                        "(amem.search.replies; 0 = off)")
    p.add_argument("--time-lift", type=float,
                   help="the store's lift of notes in a period the question names "
                        "(amem.search.timeq; 0 = off)")
    p.add_argument("--links", action=argparse.BooleanOptionalAction, default=False,
                   help="also score the tool's list with link expansion")
    p.add_argument("--heat", action=argparse.BooleanOptionalAction, default=False,
                   help="heat boost on (searches then change later rankings)")
    p.add_argument("--unit", choices=["sentence", "paragraph"], default="sentence")
    p.add_argument("--source-title", choices=["off", "tag", "keyword", "subject", "text"],
                   default="off",
                   help="CMRC: give each note its article's title, as an import of a document "
                        "would: as a tag, a keyword, a subject, or opening the text (off: the "
                        "plain protocol)")
    p.add_argument("--fusion", choices=["zscore", "rrf"], help="the store's fusion (default: config)")
    p.add_argument("--rrf-k", type=int, help="k of the store's RRF (with --fusion rrf)")
    p.add_argument("--sparse-weight", type=float)
    p.add_argument("--dense-weight", type=float)
    p.add_argument("--link-min-cosine", type=float, help="the link-expansion gate (query scale)")
    p.add_argument("--link-pool", type=int,
                   help="offline links: the notes sharing the note's terms read as candidates "
                        "(amem.write.candidates; 0 = the nearest by embedding, as before)")
    p.add_argument("--link-keep", type=int,
                   help="offline links: how many candidates passing the rule are linked")
    p.add_argument("--link-lift", type=float,
                   help="step 4b2: the lift of the candidates the best ones link to "
                        "(amem.search.linked; 0 = off)")
    p.add_argument("--link-lift-seeds", type=int, help="step 4b2: how many best candidates vote")
    p.add_argument("--link-lift-keep", type=int,
                   help="step 4b2: the head no lifted candidate passes")
    p.add_argument("--subject-lift", type=float,
                   help="step 4b3: the lift of what a Chinese question asks past its subject "
                        "(amem.search.subject; 0 = off)")
    p.add_argument("--subject-head", type=int, help="step 4b3: how many candidates it re-weighs")
    p.add_argument("--no-baselines", action="store_true")
    p.add_argument("--supersede", action=argparse.BooleanOptionalAction, default=True,
                   help="judge supersession while adding (with --enrich offline; the fast "
                        "path never judges): on vs off must rank alike on data without changes")
    p.add_argument("--limit-corpora", type=int, help="use only the first N corpora (quick runs)")
    p.add_argument("--corpora", help="comma-separated corpus names to use (e.g. conv-26)")
    p.add_argument("--cache", type=Path, help="directory of an on-disk embedding cache")
    p.add_argument("--realization", type=int, default=0, choices=REALIZATIONS,
                   help="0: each text embedded alone; 1-3: each passage beside a fixed companion "
                        "text, another valid vector (benchmarks.embcache): a gain that does not "
                        "hold across realizations is the embedder's batch noise")
    p.add_argument("--realizations", type=_realizations, metavar="K,K,...",
                   help="run once per realization (e.g. 0,1,2,3) and print the spread of the "
                        "headline figures after the tables; --out gets every result")
    p.add_argument("--crowd", type=int, metavar="N",
                   help="LoCoMo: the crowded store, each conversation among the others' turns "
                        "under fresh speaker names until its store holds N notes "
                        "(benchmarks.crowd; the standard sizes are 1500 and 10000)")
    return p.parse_args(argv)


def table(result: dict[str, Any]) -> str:
    """Markdown: the headline metrics per method (LoCoMo: plus R@10 per category, R@list),
    then the link graph of every corpus."""
    results = result["results"]
    if result["task"] != "locomo":
        cols = [("all", m) for m in ("hit@1", "hit@10", "NDCG@10", "MRR")]
    else:
        cols = [("cat1-4", m) for m in ("R@5", "R@10", "MRR")]
        cols += [(f"cat{c}", "R@10") for c in "1234"]
        if any("R@list" in g.get("cat1-4", {}) for g in results.values()):
            cols += [("cat1-4", "R@list")] + [(f"cat{c}", "R@list") for c in "1234"]
    head = [m if g in ("cat1-4", "all") else f"{g} {m}" for g, m in cols]
    lines = [f"| method | {' | '.join(head)} |", "|---|" + "---|" * len(cols)]
    for method, groups in results.items():
        cells = [groups.get(g, {}).get(m) for g, m in cols]
        lines.append(f"| {method} | " + " | ".join("" if v is None else f"{v:.3f}"
                                                   for v in cells) + " |")
    if result["task"] == "locomo" and result.get("per_corpus"):
        names = list(next(iter(result["per_corpus"].values())))
        lines.append(f"\nR@10 per conversation (cats 1-4) | {' | '.join(names)}")
        for method, per in result["per_corpus"].items():
            lines.append(f"{method} | " + " | ".join(f"{per[n].get('R@10', 0):.3f}"
                                                    for n in names))
        lines.append(f"\nMRR per conversation (cats 1-4) | {' | '.join(names)}")
        for method, per in result["per_corpus"].items():
            lines.append(f"{method} | " + " | ".join(f"{per[n].get('MRR', 0):.3f}"
                                                    for n in names))
    if result.get("halves"):
        lines.append("\nR@10 and MRR on held-apart halves (R@10 a | b, MRR a | b)")
        for method, per in result["halves"].items():
            lines.append(f"{method} | {per['a'].get('R@10', 0):.3f} | {per['b'].get('R@10', 0):.3f}"
                         f" | {per['a'].get('MRR', 0):.3f} | {per['b'].get('MRR', 0):.3f}")
        if any("first" in per for per in result["halves"].values()):
            lines.append("\nhit@1 and MRR on the questions of the first | second half of the "
                         "documents (hit@1 first | second, MRR first | second)")
            for method, per in result["halves"].items():
                first, second = per.get("first", {}), per.get("second", {})
                lines.append(f"{method} | {first.get('hit@1', 0):.3f} | "
                             f"{second.get('hit@1', 0):.3f} | {first.get('MRR', 0):.3f} | "
                             f"{second.get('MRR', 0):.3f}")
    if result.get("multi_hop"):
        parts = list(result["multi_hop"]["store"])
        lines.append(f"\nMulti-hop (cat 1) per part | {' | '.join(parts)}")
        for method, metric in (("tool@10", "R@list"), ("store", "R@list"), ("tool@5", "R@10"),
                               ("store", "R@10")):
            per = result["multi_hop"][method]
            lines.append(f"{method} {metric} | " + " | ".join(
                f"{per[p].get(metric, 0):.3f}" for p in parts))
    for corpus in result["timings"]["per_corpus"]:
        lines.append(f"\n{corpus['corpus']}: graph {json.dumps(corpus.get('graph', {}))}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    data = args.data or (DEFAULT_LOCOMO if args.task == "locomo" else DEFAULT_CMRC)
    # the arguments first: a wrong call is wrong whether or not the data is here
    if args.crowd is not None and (args.task != "locomo" or args.crowd < 1):
        print("--crowd N needs the locomo task and N >= 1 (the notes of each crowded store)",
              file=sys.stderr)
        return 2
    if args.source_title != "off" and args.task != "cmrc":
        print(f"--source-title {args.source_title} needs the cmrc task (LoCoMo's turns come "
              "from no titled document)", file=sys.stderr)
        return 2
    if not data.exists():
        print(f"no data file at {data}", file=sys.stderr)
        return 2
    if args.realizations:
        runs: dict[int, dict[str, Any]] = {}
        for k in args.realizations:
            args.realization = k
            runs[k] = run(args.task, data, args)
            print(f"## realization {k}\n\n{table(runs[k])}\n", flush=True)
        print("Spread across realizations (the embedder's batch noise alone)\n")
        print(spread_table(args.task, runs))
        if args.out:
            args.out.write_text(json.dumps({"realizations": runs,
                                            "spread": spread(args.task, runs)},
                                           indent=2, ensure_ascii=False))
        return 0
    result = run(args.task, data, args)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
