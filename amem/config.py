"""Configuration of the note store: one frozen dataclass, loaded once.

Precedence, lowest first: the defaults below < a TOML file (``[amem]`` table or top level)
< ``AMEM_*`` environment variables < explicit arguments. Library code never reads
``os.environ``: callers (the CLI, the server) pass their environment in.

Each field is key ``<name>`` and variable ``AMEM_<NAME>`` (``amem.kernel.settings`` reads
them). The file's table and the ``AMEM_`` namespace are shared: the scheduler's
``schedule_*`` keys (``scheduler.config``) and the command line's variables (``tools.settings``)
live there too, so a key or variable this module does not know is not necessarily a typo;
``tools.settings`` knows every owner and rejects what none of them takes.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .kernel.home import default_home
from .kernel.settings import ARGUMENTS, Section, Unclaimed, read_toml, setting, warn_once

log = logging.getLogger(__name__)

ENV_PREFIX = "AMEM_"


@dataclass(frozen=True)
class AmemConfig:
    """Every tunable of the note store. Field docs say what each one changes."""

    #: data directory (the embedded store lives in ``<home>/store``)
    home: Path = Path("~/.local/share/amem").expanduser()
    #: "edge" (embedded qdrant-edge, the default) or "qdrant" (a server via qdrant-client)
    backend: str = "edge"
    qdrant_url: str | None = None
    qdrant_api_key: str | None = None
    collection: str = "amem"
    #: embedder preset name (see ``amem.embed.make_embedder``)
    embedder: str = "e5-small"
    embed_threads: int = setting(1, at_least=1)
    embed_batch: int = setting(32, at_least=1)
    #: the default tenant when a caller names none
    agent_id: str = "default"
    #: longest note text accepted, in characters
    max_text_chars: int = setting(32_000, at_least=1)
    max_query_chars: int = setting(4_000, at_least=1)
    max_limit: int = setting(100, at_least=1)

    # --- search ---
    #: how BM25 and dense are fused: "zscore" (each ranking's scores standardised over the
    #: candidates, then weighted; keeps how far a top match stands out) or "rrf" (ranks only).
    #: benchmarks.retrieval, dev data: zscore LoCoMo R@10 0.637 -> 0.717, MRR 0.465 -> 0.542,
    #: CMRC hit@1 0.674 -> 0.705 against rrf k=60 (RESULTS.md, issue 13)
    fusion: str = "zscore"
    rrf_k: int = setting(60, at_least=1)
    #: weights of the two rankings in the fusion (z-score coefficients, or RRF numerators); a
    #: weak dense model must not drag BM25 down. 0.4/0.6 measured best for zscore (0.35-0.45
    #: within 0.01); rrf was measured at 1.0/1.0
    sparse_weight: float = setting(0.4, at_least=0)
    dense_weight: float = setting(0.6, at_least=0)
    #: step 1b (amem.search.centroid): ranking's query vector is the query's minus this share
    #: of the mean vector of the tenant's live notes, renormalised, so the dense leg ranks by
    #: what a question asks beyond what the store is about anyway (0 = off; a tenant with fewer
    #: than 50 live notes is never centred). Shown similarities keep the query's own vector.
    #: LoCoMo dev, four embedding realizations: R@10 0.800-0.804 -> 0.812-0.819, MRR
    #: 0.605-0.609 -> 0.612-0.618, multi-hop 0.499-0.515 -> 0.518-0.537. 0.75 read best on
    #: LoCoMo's half a (R@10 0.816-0.829) but cost CMRC 0.016 of hit@10, below its dense
    #: baseline; at 0.5 CMRC holds (hit@1 0.704 -> 0.707, hit@10 0.928 -> 0.919)
    centering: float = setting(0.5, at_least=0, at_most=1)
    #: step 1b too: each word of the query found in at least a quarter of the tenant's notes
    #: (a chat's two names) has this much of its own vector, embedded alone, taken off ranking's
    #: query vector first: the dense leg's IDF (0 = off). LoCoMo dev with centering 0.5, four
    #: realizations: multi-hop 0.518-0.537 -> 0.557-0.577, R@10 0.812-0.819 -> 0.817-0.833,
    #: MRR 0.612-0.618 -> 0.606-0.612 (0.3 / 0.6 / 0.9 on realization 0: multi-hop 0.538 /
    #: 0.557 / 0.555, R@10 0.814 / 0.817 / 0.803)
    common_words: float = setting(0.6, at_least=0, at_most=1)
    #: candidates fetched from each ranking before fusion
    candidates: int = setting(50, at_least=1)
    heat: bool = True
    #: small on purpose: retrieval counts say a note was returned, not that it was right, so
    #: heat only reorders near-equal scores (benchmarks.heat_bench: at 0.05 independent
    #: questions lost 0.055 R@10 and repeated ones 0.040; at 0.002 nothing lost R@10)
    heat_factor: float = setting(0.002, at_least=0)
    #: usage heat (amem.usage): a note opened after a search is boosted for a later query
    #: whose cosine to that search's query is at least usage_threshold, by up to usage_factor
    #: (x2 for the same question). e5 puts different questions at 0.8-0.9, so 0.97 means "the
    #: same question" (benchmarks.heat_bench); 0 factor = off. Part of heat (heat = false: off)
    usage_threshold: float = setting(0.97, at_least=-1, below=1)
    usage_factor: float = setting(1.0, at_least=0, below=math.inf)
    #: step 4b (amem.search.adjacent): a note is lifted by ``neighbour_weight`` times the best
    #: fused z score (above the mean) of the ``neighbour_span`` notes told right before or after
    #: it, looked for around the ``neighbour_seeds`` best candidates, within
    #: ``neighbour_gap_s`` seconds of event time (0 weight = off). LoCoMo dev, turns with their
    #: own times: R@10 0.717 -> 0.79 at 0.5 / 2 (chosen on half a, held on half b)
    neighbour_weight: float = setting(0.5, at_least=0, below=math.inf)
    neighbour_span: int = setting(2, at_least=0)
    neighbour_seeds: int = setting(10, at_least=1)
    neighbour_gap_s: float = setting(1800.0, at_least=0, below=math.inf)
    #: step 4b2 (amem.search.linked): the candidates the ``link_lift_seeds`` best candidates
    #: link to gain ``link_lift`` times the sum of those seeds' fused z scores above the mean,
    #: never past the ``link_lift_keep``-th candidate (0 weight = off). LoCoMo dev, offline
    #: enrichment, four realizations: multi-hop R@10 +0.012 to +0.050 (mean +0.035), MRR +0.001
    #: to +0.004 at 0.1 / 5 / 3 (chosen on the links before speakers were read apart, when it
    #: gave +0.017 to +0.039; without the keep, MRR -0.004 to -0.008; 0.15 cost open-domain)
    link_lift: float = setting(0.1, at_least=0, below=math.inf)
    link_lift_seeds: int = setting(5, at_least=1)
    link_lift_keep: int = setting(3, at_least=1)
    #: step 4b3 (amem.search.subject): a question holding Han characters whose start one of
    #: the first five candidates holds (its subject) lifts the first ``subject_head``
    #: candidates by ``subject_lift`` times the z score of their BM25 score for the rest of
    #: the question (0 = off). CMRC 2018 sentences: hit@1 0.707 -> 0.744, +0.036 on each half
    #: of the questions (0.5 and 0.75 tie on half a; 20 read best in the replay)
    subject_lift: float = setting(0.5, at_least=0, below=math.inf)
    subject_head: int = setting(20, at_least=2)
    #: step 4c (amem.search.diverse): the first 20 candidates reordered by maximal marginal
    #: relevance, ``lambda * z - (1 - lambda) * 1.5 * similarity to the picked`` (1 = off). LoCoMo
    #: dev: 0.7 R@10 +0.013 and multi-hop +0.02 over the neighbour lift (0.5-0.8 within 0.003)
    mmr_lambda: float = setting(0.7, at_least=0, at_most=1)
    #: steps 4e and 5b (amem.search.replies): a note whose text is at least this share question
    #: (by sentence characters) asks; 5b: among the first matches, a note that asks gives its
    #: place to the reply told right after it (0 = both steps off). LoCoMo dev: MRR 0.571 ->
    #: 0.596 by 5b at 0.4 (0.3-0.5 within 0.007, 0.4 best on half a)
    question_share: float = setting(0.4, at_least=0, at_most=1)
    #: step 4e (amem.search.replies): among the first 20 candidates, a note at least
    #: ``question_share`` question steps back by this much of the fused logit (0 = off)
    question_penalty: float = setting(1.5, at_least=0, below=math.inf)
    #: step 4d (amem.search.timeq): a question naming a period ("in June 2023", "on 7 July,
    #: 2023") adds this to the fused logit of the candidates whose event time lies in it (a
    #: lift, not a filter; 0 = off). LoCoMo dev: MRR +0.005 at 1.0 (0.5-2.0 within 0.003)
    time_lift: float = setting(1.0, at_least=0, below=math.inf)
    link_expansion: bool = True
    link_hops: int = setting(2, at_least=0)
    link_min_cosine: float = setting(0.25, at_least=-1, at_most=1)
    link_max_added: int = setting(8, at_least=0)
    bm25_k1: float = setting(1.2, at_least=0)
    #: length normalisation: notes are short and uneven, so milder than the usual 0.75
    bm25_b: float = setting(0.3, at_least=0, at_most=1)

    #: the embedder's cosine of unrelated notes (None: its measured value, see amem.similarity);
    #: the write thresholds below (fold, pending, link floor, consolidation) are on this scale
    similarity_baseline: float | None = setting(None, at_least=0, below=1)
    #: the query-to-note scale: the cosine of a query and an unrelated note (similarity 0) and of
    #: a query and a typical answering note (1); None: the embedder's measured values. Search's
    #: ``similarity``, ``min_similarity`` and ``link_min_cosine`` are on this scale
    query_baseline: float | None = setting(None, at_least=-1, at_most=1)
    query_top: float | None = setting(None, at_least=-1, at_most=1)

    # --- writes ---
    fold_threshold: float = setting(0.85, at_least=-1, at_most=1)
    pending_threshold: float = setting(0.72, at_least=-1, at_most=1)
    #: the offline link rule never links below this note similarity (0 = unrelated notes); the
    #: nearest notes always reach the verifier (an LLM, when configured, sees them all)
    link_floor: float = setting(0.0, at_least=-1, at_most=1)
    link_candidates: int = setting(6, at_least=1)
    #: offline links (``amem.write.candidates``): the notes sharing the most of a new note's
    #: BM25 terms read as candidates, those told on another day first (0 = the
    #: ``link_candidates`` nearest by embedding, as an LLM is offered); the rule links the first
    #: ``link_keep`` that pass. LoCoMo dev, multi-hop R@list over as many matches, on vectors
    #: embedded alone: -0.017 with the nearest, +0.018 to +0.036 with these over four embedding
    #: realizations (benchmarks/RESULTS.md)
    link_pool: int = setting(30, at_least=0)
    link_keep: int = setting(4, at_least=1)
    evolve_max: int = setting(3, at_least=0)
    #: evolve linked notes on one add in N (1 = every add)
    evolve_every: int = setting(1, at_least=1)
    #: a bulk import re-embeds the notes its folds and evolutions changed when this many wait
    #: (and at its end), not after every batch; 0 = after every batch (see ``amem.refresh``)
    import_reembed_every: int = setting(1024, at_least=0)
    #: after a bulk write (``add_many``, ``amem import``) with this many points written since
    #: the engine's index was last built, it is built again (amem.index_build); 0 = nightly only
    optimize_after: int = setting(5000, at_least=0)
    #: the embedded engine's largest segment, in MiB of float vectors (68k notes at 384-d):
    #: an index build's memory follows the segment it writes (~9 KB a note), a search's cost
    #: the number of segments. Set when a store is created (a store keeps its own);
    #: docs/index-build-memory.md has the figures
    segment_mb: int = setting(100, at_least=1)
    #: the embedded engine's search threads (its per-segment reads run on them); 0 = one fewer
    #: than the CPUs the process may use, at least one (``EdgeBackend``: on 2 CPUs a search
    #: took 5-13% longer on the engine's own pool of eight than on one thread); at most
    #: ``amem.backends.edge.MAX_SEARCH_THREADS``
    search_threads: int = setting(0, at_least=0, at_most=256)
    #: points whose ranking fields a long-running process (``amem serve``, ``amem ui``) keeps
    #: in RAM, read in the background after open and after each index build, so a search
    #: reads no payload pages for them (~0.55 KB a point: 250k ~140 MB, which keeps a 1M-note
    #: server within 2 GB; 0 = none; amem.backends._edge_table)
    rank_table: int = setting(250_000, at_least=0)

    #: nightly consolidation merges same-category notes at or above this cosine
    consolidate_threshold: float = setting(0.75, at_least=-1, at_most=1)

    # --- LLM (unset base_url = offline enrichment) ---
    llm_base_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_api_key: str | None = None
    llm_connect_timeout: float = setting(5.0, at_least=0)
    llm_read_timeout: float = setting(60.0, at_least=0)
    #: seconds one LLM call may take in all (retries and a dripping reply included); then offline
    llm_deadline_s: float = setting(90.0, above=0)
    #: an LLM reply longer than this many bytes is not read further (the call falls back offline)
    llm_max_reply_bytes: int = setting(2_000_000, at_least=1024)


    def __post_init__(self) -> None:
        SECTION.validate(self)  # types and the bounds above; thresholds are cosines, in [-1, 1]
        _check(self)

    @property
    def store_path(self) -> Path:
        """Where the embedded engine keeps its files."""
        return Path(self.home) / "store"

    def replace(self, **changes: Any) -> "AmemConfig":
        """A copy with ``changes`` applied (and validated)."""
        return load_config(base=self, overrides=changes)


def _check(cfg: AmemConfig) -> None:
    """Rules the fields' bounds cannot say (choices with their own words, rules between fields)."""
    if cfg.backend not in ("edge", "qdrant"):
        raise ConfigError(f"backend must be 'edge' or 'qdrant', not {cfg.backend!r}", key="backend")
    if cfg.backend == "qdrant" and not cfg.qdrant_url:
        raise ConfigError("backend 'qdrant' needs qdrant_url (AMEM_QDRANT_URL)", key="qdrant_url")
    if cfg.pending_threshold > cfg.fold_threshold:
        raise ConfigError("pending_threshold must not exceed fold_threshold", key="pending_threshold")
    if (cfg.query_baseline is not None and cfg.query_top is not None
            and cfg.query_baseline >= cfg.query_top):
        raise ConfigError("query_baseline must lie below query_top", key="query_baseline")
    if cfg.fusion not in ("zscore", "rrf"):
        raise ConfigError(f"fusion must be 'zscore' or 'rrf', not {cfg.fusion!r}", key="fusion")
    if not cfg.agent_id or len(cfg.agent_id) > 128:
        raise ConfigError("agent_id must be 1 to 128 characters", key="agent_id")


#: TOML strings and the command line's text flags are parsed as amem always has (lenient)
SECTION = Section(AmemConfig, error=ConfigError, env_prefix=ENV_PREFIX, lenient=True)

#: variables ``MemoryStore()`` reads itself when given no config (``amem.store``)
STORE_ENV = frozenset({"AMEM_CONFIG", "AMEM_AGENT"})
#: the file's keys the note store shares its table with: the nightly job's (``scheduler.config``).
#: A namespace, not a list of the scheduler's keys, so that this package does not know them.
NEIGHBOUR_KEY_PREFIXES = ("schedule_",)


def amem_table(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The note store's part of a parsed config file: its ``[amem]`` table, else the top level,
    without the other packages' tables (``[lcm]``...)."""
    table = doc["amem"] if isinstance(doc.get("amem"), Mapping) else doc
    return {k: v for k, v in table.items() if not isinstance(v, Mapping)}


def load_config(
    toml_path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    base: AmemConfig | None = None,
    table: Mapping[str, Any] | None = None,
    unclaimed: list[Unclaimed] | None = None,
) -> AmemConfig:
    """Merge defaults < TOML < ``AMEM_*`` env < ``overrides`` into one validated config.

    Args:
        toml_path: the config file (its ``[amem]`` table, else its top level).
        env: the environment to read (pass ``os.environ`` from a CLI); ``None`` reads none.
        overrides: explicit values by key; an unknown key is an error.
        base: start from this config instead of the defaults (``AmemConfig.replace``).
        table: the table itself, already read (``tools.settings`` reads the file once);
            ``toml_path`` then only names it in errors.
        unclaimed: where to put the file's keys and the ``AMEM_*`` variables that are not the
            note store's, for a caller that knows the table's other owners to judge. Without
            it, a file key is an error unless it is in a neighbour's namespace
            (``NEIGHBOUR_KEY_PREFIXES``), and those keys and the unknown ``AMEM_*`` variables
            (the command line's and the servers' share the namespace) are logged once as a
            warning.

    Raises:
        ConfigError: an invalid value, an unknown key in ``overrides``, or (without
            ``unclaimed``) an unknown file key outside the neighbours' namespaces; ``.key``
            names it.
    """
    env = env or {}
    values: dict[str, Any] = dataclasses.asdict(base) if base else {"home": default_home(env)}
    tables: list[tuple[Mapping[str, Any], str]] = []
    if table is not None:
        tables.append((table, str(toml_path) if toml_path is not None else "[amem]"))
    elif toml_path is not None:
        tables.append((amem_table(read_toml(toml_path, ConfigError)), str(Path(toml_path).expanduser())))
    loaded = SECTION.load(base=values, tables=tables,
                           env={k: v for k, v in env.items() if k not in STORE_ENV},
                           overrides=overrides)
    others: list[Unclaimed] = []
    for item in loaded.unclaimed:
        if item.source == ARGUMENTS:
            raise SECTION.unknown(item)
        others.append(item)
    if unclaimed is not None:
        unclaimed.extend(others)
    else:
        for item in others:
            if not item.is_env and not item.name.startswith(NEIGHBOUR_KEY_PREFIXES):
                raise SECTION.unknown(item)  # a typo in the file is not a neighbour's key
        warn_once(log, "amem config: not note-store keys, left to their owners (or misspelt?): %s",
                  (i.name for i in others))
    return AmemConfig(**loaded.values)
