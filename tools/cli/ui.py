"""``amem ui``: the web inspector (``tools.ui``) in a browser, logged in by a one-time link.

When an ``amem serve --http`` already holds this data directory, ``amem ui`` asks it (with the
server record's secret, after the server proved it wrote the record) for a one-time login
link to its ``/ui`` pages. Otherwise it starts the same HTTP server itself (``amem serve
--http --no-scheduler``: MCP, the host routes and ``/ui``, behind the same guard) and issues
the link before it serves. Either way it prints the link and opens the browser (unless
``--no-open``); the link opens one session, as the data directory's owner, within five
minutes. Others log in on the same page with a key (``amem keys add``).
"""

from __future__ import annotations

import argparse
import logging
import threading
from typing import TYPE_CHECKING

from .common import Cmd, runtime
from .output import CliError, EXIT_ERROR

if TYPE_CHECKING:
    from .common import Subparsers

log = logging.getLogger(__name__)


def register(cmd: Cmd, sub: Subparsers) -> None:
    """Add ``ui`` to the ``amem`` parser (called by ``tools.cli.main``)."""
    from .serve import _port

    p = cmd("ui", cmd_ui, "open the web inspector (notes, search, graph, conversations, "
                          "health) with a one-time login link")
    p.add_argument("--port", type=_port, default=8765,
                   help="HTTP port when no server runs yet, 1-65535 (default 8765)")
    p.add_argument("--no-open", action="store_true", help="print the link, do not open a browser")
    p.add_argument("--no-lcm", action="store_true", help="notes only (no conversation pages)")


def cmd_ui(args: argparse.Namespace) -> int:
    from ..keys import Principal
    from ..remote import find_server
    from ..ui.sessions import UiSessions
    from .serve import cmd_serve

    with runtime(args) as rt:
        home = rt.settings.amem.home
    record = find_server(home)
    if record is not None and record.transport == "http" and record.url:
        link = _link_from_server(record.url, record.token)
        _show(link, args)
        return 0
    book = UiSessions()
    token = book.issue_login(Principal("ui-login", None, owner=True))
    link = f"http://127.0.0.1:{args.port}/ui/login?t={token}"
    # The link is printed (and the browser opened) once this process's own server listens:
    # "something answers on the port" was also true of another program holding it, which was
    # then shown the login token, and the browser sent to its page.
    listening = threading.Event()
    for name, value in (("http", True), ("path", "/mcp"), ("lazy", None), ("no_scheduler", True),
                        ("session_key", None), ("insecure_no_auth", False),
                        ("session_idle", None), ("sessions_per_key", None),
                        ("no_rate_limit", False), ("ui_sessions", book),
                        ("on_listening", listening.set)):
        setattr(args, name, value)
    stop = threading.Event()
    waiter = threading.Thread(target=_show_when_listening, args=(link, args, listening, stop),
                              daemon=True)
    waiter.start()
    try:
        return cmd_serve(args)
    finally:
        stop.set()
        listening.set()  # wakes the waiter, which then sees ``stop`` and prints nothing


def _show_when_listening(link: str, args: argparse.Namespace, listening: threading.Event,
                         stop: threading.Event) -> None:
    listening.wait()
    if not stop.is_set():  # the server stopped (or never started): its own error says why
        _show(link, args)


def _link_from_server(url: str, token: str | None) -> str:
    """A login link from the running server (its record's secret opens it)."""
    import httpx

    base = url.split("/", 3)
    origin = "/".join(base[:3])
    try:
        with httpx.Client(trust_env=False, timeout=10) as client:  # no proxy may see the secret
            reply = client.post(f"{origin}/ui/login-link", json={},
                                headers={"Authorization": f"Bearer {token}"})
    except httpx.HTTPError as exc:
        raise CliError(f"the server at {origin} did not answer ({exc})", code="unavailable",
                       exit_code=EXIT_ERROR) from None
    if reply.status_code != 200:
        raise CliError(f"the server at {origin} refused a login link ({reply.status_code}: "
                       f"{reply.text[:200]})", code="unavailable", exit_code=EXIT_ERROR)
    return f"{origin}{reply.json()['path']}"


def _show(link: str, args: argparse.Namespace) -> None:
    print(f"amem inspector: {link}\n(one-time login link: it opens one session within 5 minutes)",
          flush=True)
    if not args.no_open:
        import webbrowser

        try:
            webbrowser.open(link)
        except Exception as exc:  # no browser here: the printed link is enough
            log.info("could not open a browser (%s); open the link above", exc)
