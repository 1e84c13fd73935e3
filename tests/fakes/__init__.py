"""Reusable fakes for tests: a scriptable OpenAI-compatible server on 127.0.0.1.

Use the ``fake_openai`` fixture by importing it into a ``conftest.py``::

    from tests.fakes import fake_openai  # noqa: F401  (a pytest fixture)
"""

from __future__ import annotations

from typing import Iterator

import pytest

from .openai_server import FakeOpenAI, Reply, Request, chat, error, garbage, json_reply, raw, reject_format, slow

__all__ = ["FakeOpenAI", "Reply", "Request", "chat", "error", "garbage", "json_reply", "raw", "reject_format",
           "slow", "fake_openai"]


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A running fake server, closed after the test."""
    server = FakeOpenAI()
    try:
        yield server
    finally:
        server.close()
