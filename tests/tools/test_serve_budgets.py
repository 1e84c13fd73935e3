"""``amem serve --http`` sizes its request budgets from the ``[serve]`` settings: a routed
command over its budget is told when to retry, ``amem status`` through the server counts the
refusals per key, and ``--no-rate-limit`` turns them off."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tools.cli.serve import _guard_config
from tools.ratelimit import RateLimits

from .test_cli_console import amem, base_env
from .test_cli_server import Server


def _args(**changes: object) -> argparse.Namespace:
    values: dict[str, object] = {"insecure_no_auth": False, "path": "/mcp", "session_idle": None,
                                 "sessions_per_key": None, "no_rate_limit": False}
    values.update(changes)
    return argparse.Namespace(**values)


def test_the_server_takes_its_budgets_from_the_settings_and_the_flag_turns_them_off() -> None:
    budgets = RateLimits(writes_per_minute=7)
    assert _guard_config(_args(), budgets).rate_limits == budgets
    off = _guard_config(_args(no_rate_limit=True), budgets).rate_limits
    assert off is not None and off.enabled is False and off.writes_per_minute == 7


@pytest.mark.slow
def test_a_routed_command_over_its_budget_and_the_count_in_status(tmp_path: Path) -> None:
    # the CLI's own secret is an owner caller: a factor of 1 gives it an agent's budget here
    env = base_env(tmp_path, AMEM_SERVE_WRITES_PER_MINUTE="1", AMEM_SERVE_WRITE_BURST="2",
                   AMEM_SERVE_OWNER_FACTOR="1", AMEM_HEAT="false")
    server = Server(env)
    try:
        for text in ("Alice drinks green tea", "The staging database moved to db-2"):
            amem(env, "add", text)
        refused = amem(env, "add", "Porto trip in May", code=1)
        assert "key server-record is over its budget of requests that change data" in refused.stderr
        assert "retry in" in refused.stderr and "1 a minute, bursts of 2" in refused.stderr
        status = json.loads(amem(env, "status", "--json").stdout)
    finally:
        server.stop()
    budgets = status["rate_limit"]
    assert budgets["on"] is True and budgets["refused"] == 1
    cli = budgets["keys"]["server-record"]
    assert (cli["writes"], cli["writes_refused"]) == (2, 1)
    assert status["memory"]["notes_of_agent"] == 2  # the refused add wrote nothing
