"""A value over one of PostgreSQL's own limits is bad input, not a lost server.

A text kept as a message (under ``largeFileThresholdTokens``, which a host may raise far) whose
words make the full-text vector over 1 MB (``words``, the generated ``tsvector`` column) is
refused by the server with "string is too long for tsvector"; psycopg counts that among its
OperationalErrors, so lcm said "the PostgreSQL server dropped the connection" and a client
retried a batch that can never go in."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lcm import LcmStore
from lcm.errors import LcmValidationError

KEY = "agent:a1:main"
#: 150,000 different words: a ~2.1 MB tsvector from 1.5 M characters (~375,000 tokens)
MANY_WORDS = " ".join(f"w{i:07d}q" for i in range(150_000))


def test_a_text_whose_words_pass_the_servers_tsvector_limit_is_refused_as_input(
        make_pg_store: Callable[..., LcmStore]) -> None:
    pg = make_pg_store(large_file_threshold_tokens=1_000_000, large_files_dir="")
    with pytest.raises(LcmValidationError, match="string is too long for tsvector") as refused:
        pg.ingest(KEY, [{"role": "user", "content": "kept"}, {"role": "tool", "content": MANY_WORDS}])
    assert "largeFileThresholdTokens" in str(refused.value) and "nothing" in str(refused.value)
    assert pg.db.scalar("SELECT count(*) FROM messages") == 0  # the batch rolled back whole
    assert pg.ingest(KEY, [{"role": "user", "content": "kept"}]).stored == 1  # the store still serves
