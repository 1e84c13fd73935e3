"""PostgreSQL connection URLs as lcm shows them: recognised, and never with a secret in them."""

from __future__ import annotations

import re

__all__ = ["is_postgres_url", "redact_url", "SECRET_PARAMETERS"]

#: query parameters whose value is a secret: libpq's ``password`` and ``sslpassword`` (the
#: client key's passphrase), and any other parameter naming a password, secret or token, so a
#: driver option added later is masked too rather than shown
SECRET_PARAMETERS = frozenset({"password", "sslpassword"})
_SECRET_NAME = re.compile(r"pass|secret|token", re.IGNORECASE)
_MASK = "***"


def is_postgres_url(value: object) -> bool:
    return isinstance(value, str) and value.startswith(("postgresql://", "postgres://"))


def redact_url(url: str) -> str:
    """The URL without its secrets, for messages and logs: the ``user:password@`` password and
    every secret query parameter (``?password=``, ``sslpassword=``) become ``***``.

    Parsed by hand rather than with :func:`urllib.parse.urlsplit`: libpq URLs may list several
    hosts (``host1:5432,host2:5433``, its failover form) where ``urlsplit().port`` raises, and
    rebuilding the host from ``hostname`` lost the brackets of an IPv6 address. Everything but
    the secrets is kept as written.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _redact_query(url)
    # the authority ends at the first '/', '?' or '#'; a '@' in a password must be
    # percent-encoded in a valid URL, so the last '@' of the authority ends the user info
    end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    userinfo, at, hosts = authority.rpartition("@")
    if at and ":" in userinfo:
        user = userinfo.split(":", 1)[0]
        authority = f"{user}:{_MASK}@{hosts}"
    return f"{scheme}://{authority}{_redact_query(tail)}"


def _redact_query(tail: str) -> str:
    """``tail`` (path, query, fragment) with the values of secret query parameters masked."""
    path, q, rest = tail.partition("?")
    if not q:
        return tail
    query, h, fragment = rest.partition("#")
    pairs = []
    for pair in query.split("&"):
        name, eq, _value = pair.partition("=")
        if eq and (name.lower() in SECRET_PARAMETERS or _SECRET_NAME.search(name)):
            pair = f"{name}={_MASK}"
        pairs.append(pair)
    return f"{path}?{'&'.join(pairs)}{h}{fragment}"
