"""``amem keys add|list|revoke``: the keys that let a client call ``amem serve --http``
(``tools.keys``). A running server sees a new or revoked key from its next request."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from .common import Cmd, runtime
from .output import EXIT_NOT_FOUND, CliError, emit, usage_error

if TYPE_CHECKING:
    from ..keys import KeyStore
    from .common import Subparsers

T = TypeVar("T")


def register(cmd: Cmd, sub: Subparsers) -> None:
    """Add the ``keys`` commands to the ``amem`` parser (called by ``tools.cli.main``)."""
    keys = sub.add_parser("keys", help="keys for clients of `amem serve --http`",
                          description="Issue, list and revoke the keys that clients of "
                                      "`amem serve --http` send as Authorization: Bearer <key>.")
    ksub = keys.add_subparsers(dest="keys_command", metavar="KEYS_COMMAND", required=True)
    p = cmd("add", cmd_keys_add, "issue a key and print its secret (once)", into=ksub)
    p.add_argument("--owner", action="store_true",
                   help="an owner key: may act as any agent and read the store-wide reports")
    p.add_argument("--read-only", action="store_true",
                   help="only tools and routes that change nothing")
    p.add_argument("--name", default="", help="a label to recognise the key by in `keys list`")
    cmd("list", cmd_keys_list, "the issued keys (never their secrets)", into=ksub)
    p = cmd("revoke", cmd_keys_revoke, "revoke a key (a running server refuses it at once)",
            into=ksub)
    p.add_argument("id", help="the key's id (from `amem keys list`)")


def _store(args: argparse.Namespace) -> KeyStore:
    from ..keys import KeyStore

    return KeyStore.for_home(runtime(args).settings.amem.home)


def _call(work: Callable[[], T]) -> T:
    """``work()``, an untrustworthy key file turned into the CLI's config error (exit 2)."""
    from ..keys import KeyFileError

    try:
        return work()
    except KeyFileError as exc:
        raise CliError(str(exc), code="config_error", exit_code=2) from None


def cmd_keys_add(args: argparse.Namespace) -> int:
    # --agent is a common option; for a key it names the agent the key acts as, and only an
    # explicit one counts (the configured default agent is no choice of the owner's)
    agent = None if args.owner else args.agent
    if args.owner and args.agent:
        raise usage_error("an owner key acts for every agent: give --owner or --agent, not both",
                          "agent")
    if not args.owner and not agent:
        raise usage_error("a key needs --agent ID (the agent it acts as) or --owner", "agent")
    store = _store(args)
    try:
        record, secret = _call(lambda: store.add(agent=agent, owner=args.owner,
                                                 read_only=args.read_only, name=args.name))
    except ValueError as exc:
        raise usage_error(str(exc), "agent") from None
    data = {**record.public(), "secret": secret}
    scope = "owner (any agent)" if record.owner else f"agent {record.agent!r}"
    emit(args, data, f"key {record.id}: {scope}{', read-only' if record.read_only else ''}\n"
                     f"secret: {secret}\n"
                     "This secret is shown once and stored nowhere; send it as "
                     "'Authorization: Bearer <secret>'.")
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    store = _store(args)
    records = _call(store.list)
    rows = [r.public() for r in records]

    def text() -> str:
        if not rows:
            return "no keys issued (`amem keys add --agent ID` issues one)"
        return "\n".join(
            f"{r['id']}  {'owner' if r['owner'] else 'agent ' + repr(r['agent'])}"
            f"{'  read-only' if r['read_only'] else ''}  "
            f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(r['created']))}Z"
            f"{'  ' + r['name'] if r['name'] else ''}" for r in rows)

    emit(args, {"keys": rows}, text)
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        record = _call(lambda: store.revoke(args.id))
    except KeyError:
        raise CliError(f"no key {args.id!r}; `amem keys list` shows the issued ones",
                       code="not_found", exit_code=EXIT_NOT_FOUND, field="id") from None
    emit(args, {"revoked": record.id}, f"key {record.id} revoked")
    return 0
