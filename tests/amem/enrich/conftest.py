"""Fixtures for the enrichment tests."""

from __future__ import annotations

from tests.fakes import fake_openai  # noqa: F401  (a pytest fixture, used by name)
