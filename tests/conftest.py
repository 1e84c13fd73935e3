"""Project-wide fixtures: a clean environment for every test."""

from __future__ import annotations

import os

import pytest

_PREFIXES = ("AMEM_", "LCM_")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our own env vars never leak into a test (a developer's AMEM_HOME must not be used).

    ``AMEM_TEST_*`` variables are kept: they opt in to external services.
    """
    for name in list(os.environ):
        if name.startswith(_PREFIXES) and not name.startswith("AMEM_TEST_"):
            monkeypatch.delenv(name, raising=False)
