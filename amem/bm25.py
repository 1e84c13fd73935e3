"""BM25 as sparse vectors: term-frequency saturation on the client, IDF in the engine.

A document's sparse value for term t is ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))``;
the engine multiplies by its IDF (the sparse vector is declared with the IDF modifier), and a
query vector carries 1 per distinct query term, so the engine's dot product is Okapi BM25.
``avgdl`` comes from running statistics kept in the store's metadata; documents written while
the average was different keep their old normalisation until ``reindex`` (it drifts slowly).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .backends.base import Point, SparseVector, VectorBackend
from .text import TOKENIZER_VERSION, term_id, tokenize

#: the store metadata key recording which ``TOKENIZER_VERSION`` wrote the stored BM25 vectors
#: (absent: version 1, the light suffix stripper before the Snowball stemmer)
TOKENIZER_KEY = "tokenizer"


@dataclass(frozen=True)
class Bm25Params:
    k1: float = 1.2
    b: float = 0.75


def doc_vector(tokens: Sequence[str], avgdl: float, params: Bm25Params) -> SparseVector:
    """Saturated term frequencies of one document (empty when it has no terms)."""
    counts = Counter(tokens)
    dl = len(tokens)
    norm = params.k1 * (1.0 - params.b + params.b * dl / max(avgdl, 1e-9))
    return _sparse({term_id(t): tf * (params.k1 + 1.0) / (tf + norm) for t, tf in counts.items()})


def query_vector(tokens: Sequence[str]) -> SparseVector:
    """One per distinct query term: the engine's IDF does the weighting."""
    return _sparse({term_id(t): 1.0 for t in set(tokens)})


def _sparse(weights: dict[int, float]) -> SparseVector:
    # Two terms may share a crc32 id (rare): their weights simply add, as colliding postings would.
    items = sorted(weights.items())
    return SparseVector(tuple(i for i, _ in items), tuple(float(v) for _, v in items))


def note_terms(content: str, keywords: Sequence[str], tags: Sequence[str],
               subjects: Sequence[str] = ()) -> list[str]:
    """The BM25 field of a note: the content's terms, then each keyword, tag or subject term
    the content lacks, once.

    Offline enrichment draws its keywords and tags from the content itself; counting them
    again raised those terms' frequencies and the note's length, so a keyword-rich note
    outranked the turn that answers (LoCoMo conv-41 R@10 0.743 -> 0.715 with offline
    enrichment, docs/retrieval-next.md). A term the content lacks (an LLM's "career change",
    a caller's tag, a document's title given as a subject) is what the fields can add to BM25,
    and they still do: a CMRC sentence given its article's title as a subject is found by a
    question naming the article (hit@1 0.705 -> 0.82, benchmarks/RESULTS.md).
    """
    terms = tokenize(content)
    seen = set(terms)
    for term in tokenize(" \n".join([*keywords, *tags, *subjects])):
        if term not in seen:
            seen.add(term)
            terms.append(term)
    return terms


def payload_terms(payload: Mapping[str, Any]) -> list[str]:
    """:func:`note_terms` of a stored note's payload (fields a payload lacks count as empty)."""
    return note_terms(str(payload.get("content", "")), payload.get("keywords") or [],
                      payload.get("tags") or [], payload.get("subjects") or [])


@dataclass
class CorpusStats:
    """Running document count and token total, for avgdl."""

    docs: int = 0
    tokens: int = 0

    @property
    def avgdl(self) -> float:
        return self.tokens / self.docs if self.docs else 10.0

    def add(self, dl: int) -> None:
        self.docs += 1
        self.tokens += dl

    def remove(self, dl: int) -> None:
        self.docs = max(0, self.docs - 1)
        self.tokens = max(0, self.tokens - dl)

    def resized(self, docs: int) -> "CorpusStats":
        """The statistics of ``docs`` documents with today's average length.

        A process killed between its writes and its next metadata save leaves the saved count
        behind the engine's; the engine's count is the truth, and the average is the best
        estimate of the missing documents' length (it is what their vectors were built with).
        """
        if docs == self.docs:
            return CorpusStats(self.docs, self.tokens)
        return CorpusStats(docs, round(self.avgdl * docs))


def terms_outdated(meta: dict[str, object]) -> bool:
    """True when the stored BM25 vectors were made by another tokenizer than this one."""
    return meta.get(TOKENIZER_KEY, 1) != TOKENIZER_VERSION


def rebuild_sparse(backend: VectorBackend, avgdl: float, params: Bm25Params,
                   batch: int = 256) -> tuple[int, int]:
    """Re-tokenise every stored note: new BM25 vectors, the same dense vectors and payloads.

    A stemmer change maps "deployments" to another term than before, so a query would no
    longer meet notes written earlier; this rewrites their sparse vectors once. Returns how
    many points were rewritten (points without a vector or content are left alone) and the
    token total of every point under this tokenizer, which the corpus statistics take (they
    counted the old tokenizer's terms).
    """
    done = tokens = 0
    todo: list[Point] = []
    for hit in backend.iterate(None, with_vectors=True):
        payload = hit.payload
        terms = payload_terms(payload)
        tokens += len(terms)
        if hit.dense is None or not isinstance(payload.get("content"), str):
            continue
        todo.append(Point(hit.id, hit.dense, doc_vector(terms, avgdl, params), payload))
        if len(todo) >= batch:
            backend.upsert(todo)
            done, todo = done + len(todo), []
    if todo:
        backend.upsert(todo)
        done += len(todo)
    return done, tokens
