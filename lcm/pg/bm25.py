"""FTS5's BM25 on PostgreSQL: the relevance score of ``bm25(messages_fts)`` (or ``messages_tri``), from the tsvector or the text.

FTS5 scores a row as ``-sum_i idf_i * f_i * (k1 + 1) / (f_i + k1 * (1 - b + b * D / avgdl))``
over the query's phrases ``i`` (k1 = 1.2, b = 0.75), where ``f_i`` is how often phrase ``i``
occurs in the row, ``D`` the row's number of tokens, ``avgdl`` the table's tokens per row and
``idf_i = log((N - n_i + 0.5) / (n_i + 0.5))`` (``N`` rows, ``n_i`` of them holding the phrase;
an idf at or below zero counts as 1e-6). lcm reports the negated value, so higher is better.

Here each part comes from the server, in the same float8 arithmetic in the same order, so the
scores agree with SQLite's to the last bits wherever the two tokenisers agree:

- ``D`` is the stored column ``n_words`` (runs of letters and digits, as unicode61 splits them;
  ``length(words)`` would count distinct lexemes, not tokens);
- ``N`` and the token total come from ``lcm_word_totals`` (kept by statement triggers in the
  writer's transaction), every ``n_i`` from one GIN-served count per phrase, all inside the
  grep's own statement and snapshot: exact, never a stale cache;
- ``f_i`` is ``ts_rank_cd(words, phrase) * 10``: with the default weights and no normalisation,
  ``ts_rank_cd`` of a single phrase is 0.1 per occurrence (cover), and it runs in C over the
  rows the tsquery matched (no per-row SQL function or unnest).

Queries of CJK terms only are scored by FTS5's trigram index on SQLite (once ingest's trigram
debt is paid; until then its pending rows come newest first, unscored): here by the same BM25
with a term's case-insensitive occurrences (overlapping ones too) as ``f``, the rows holding it
(the pg_trgm index counts them) as ``n``, and a row's trigrams (characters - 2) as ``D``, their
total kept in ``lcm_word_totals.n_grams``.

Known differences, where the tokenisers differ: a tsvector keeps at most 256 positions of a
lexeme and none past 16383, so a very long text may count fewer occurrences than FTS5; a word
PostgreSQL's parser splits or stems otherwise than porter unicode61 changes ``f``, ``n`` or
``D``; a CJK term holding a letter whose case PostgreSQL's locale folds otherwise than FTS5.
"""

from __future__ import annotations

from collections.abc import Sequence

from lcm.trigram import like_pattern

__all__ = ["K1", "B", "bm25_sql"]

#: FTS5's bm25() defaults (fts5_aux.c)
K1 = 1.2
B = 0.75
#: FTS5 replaces an idf at or below zero by this (a word in more than half the rows)
_MIN_IDF = 1e-6


def _gram_pattern(term: str) -> str:
    """A PostgreSQL regex counting every occurrence of ``term``, overlapping ones too (FTS5's
    trigram phrase matches at each position): a lookahead, the term's non-alphanumerics escaped."""
    return "(?=" + "".join("\\" + ch if ch.isascii() and not ch.isalnum() else ch for ch in term) + ")"


def bm25_sql(table: str, phrases: Sequence[str], alias: str = "t", *, index: str = "words") -> tuple[str, list[object]]:
    """The score expression over row ``alias`` of ``table`` and its parameters.

    ``index="words"`` scores FTS5's word index (``messages_fts``): each phrase a word query
    over the tsvector. ``index="grams"`` scores its trigram index (``messages_tri``, CJK terms):
    each phrase a case-insensitive substring, ``f`` its occurrences (overlapping ones too),
    ``n`` the rows holding it and ``D`` the row's trigrams (characters - 2).

    The table's figures are uncorrelated subqueries: PostgreSQL evaluates each once, and only
    when a first row is scored, so a grep that matches nothing pays for none of them.
    """
    if table not in ("messages", "summaries"):
        raise ValueError(f"no BM25 figures for table {table!r}")
    if index not in ("words", "grams"):
        raise ValueError(f"no BM25 over index {index!r} (words or grams)")
    total = "(SELECT coalesce(sum({}), 0) FROM lcm_word_totals WHERE tbl = '" + table + "')"
    n_rows, n_tokens = total.format("n_rows"), total.format("n_words" if index == "words" else "n_grams")
    # FTS5 divides by the row count it holds; a row being scored means there is at least one
    avgdl = f"({n_tokens}::float8 / greatest({n_rows}, 1)::float8)"
    holds = "words @@ lcm_tsq(?)" if index == "words" else "content ILIKE ? ESCAPE '\\'"
    # log((N - n + 0.5) / (n + 0.5)), at or below zero replaced by 1e-6, as in fts5_aux.c
    idf = (f"(SELECT CASE WHEN x > 0.0 THEN x ELSE {_MIN_IDF!r}::float8 END FROM (SELECT ln((({n_rows} - n)::float8 + 0.5) / "
           f"(n::float8 + 0.5)) AS x FROM (SELECT count(*) AS n FROM {table} WHERE {holds}) h) z)")  # fmt: skip
    d = f"{alias}.n_words::float8" if index == "words" else f"greatest(char_length({alias}.content) - 2, 0)::float8"
    parts: list[str] = []
    params: list[object] = []
    for phrase in phrases:
        f, f_args = _frequency(phrase, alias, index)
        # the same operations in the same order as fts5_aux.c, so the doubles are the same
        parts.append(f"{idf} * (({f} * ?::float8) / ({f} + ?::float8 * (?::float8 - ?::float8 + ?::float8 * {d} / {avgdl})))")
        params += [phrase if index == "words" else like_pattern(phrase), *f_args, K1 + 1.0, *f_args, K1, 1.0, B, B]
    return "(" + " + ".join(["0.0::float8", *parts]) + ")", params


def _frequency(phrase: str, alias: str, index: str) -> tuple[str, list[object]]:
    """``f``: how often row ``alias`` holds ``phrase``, as SQL and its parameters."""
    if index == "words":
        return f"round(ts_rank_cd({alias}.words, lcm_tsq(?)) * 10)::float8", [phrase]
    if any(phrase[:k] == phrase[-k:] for k in range(1, len(phrase))):
        # a term that can overlap itself (哈哈哈 in 哈哈哈哈哈 is there 3 times): a lookahead regex
        return f"regexp_count({alias}.content, ?, 1, 'i')::float8", [_gram_pattern(phrase)]
    # else its occurrences are disjoint: counted by what removing them takes off, near free next
    # to the regex (which added 0.4-0.9 s to a relevance grep over 100k of 1M messages)
    low = f"lower({alias}.content)"
    return f"((char_length({low}) - char_length(replace({low}, lower(?), ''))) / char_length(lower(?)))::float8", [phrase, phrase]
