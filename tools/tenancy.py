"""Who a call runs as: the one rule that binds an lcm session key to an agent, and the
decoding of the identity headers of the HTTP server.

Session keys follow the OpenClaw convention ``agent:<agent>:<rest>`` (``agent:a1:main``,
``agent:a1:cron:nightly``); lcm calls the conversations of one key a *session family*. A key
belongs to the agent named in its second segment and to no one else. So that the segment is
unambiguous for agent ids holding ``:`` (which note ids and agent ids may), the agent is
written with ``%`` and ``:`` percent-escaped (``a:b`` -> ``agent:a%3Ab:main``); an id without
them reads exactly as itself. ``session_key_for`` is the only place that decides which family
a caller may read: the facade, the MCP server (stdio and HTTP) and the CLI all go through it.
"""

from __future__ import annotations

import unicodedata
from urllib.parse import unquote_to_bytes

from .errors import ToolError

PREFIX = "agent:"
#: longest session key accepted (lcm's keys are short; this only stops runaway input)
MAX_SESSION_KEY_CHARS = 500
#: the HTTP headers that carry the caller's identity (their names in error fields)
AGENT_HEADER = "X-Amem-Agent"
SESSION_HEADER = "X-Amem-Session"


def agent_segment(agent_id: str) -> str:
    """The agent as written inside a session key (``%`` and ``:`` escaped, nothing else)."""
    return agent_id.replace("%", "%25").replace(":", "%3A")


def default_session_key(agent_id: str) -> str:
    """The family an agent reads when nobody names one: ``agent:<agent>:main``."""
    return f"{PREFIX}{agent_segment(agent_id)}:main"


def session_owner(session_key: str) -> str | None:
    """The agent a session key belongs to, or ``None`` when it belongs to no agent.

    Only the canonical spelling counts (``agent:a%3ab:x`` is nobody's), so one key never
    names two agents and two keys of one family are always the same string.
    """
    if not session_key.startswith(PREFIX):
        return None
    segment, sep, rest = session_key[len(PREFIX):].partition(":")
    if not segment or not sep or not rest:
        return None
    try:
        agent = unquote_to_bytes(segment).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return agent if agent_segment(agent) == segment else None


def session_key_for(agent_id: str, requested: object = None, *,
                    field: str = "session_key") -> str:
    """The session family ``agent_id`` may read: ``requested`` if it is the agent's own,
    the agent's default family when nothing is requested.

    Raises:
        ToolError: ``invalid_argument`` for a malformed key, ``forbidden`` for a key of
            another agent (or of none); ``field`` names where the key came from.
    """
    if requested is None:
        return default_session_key(agent_id)
    if not isinstance(requested, str) or not requested.strip():
        raise ToolError("invalid_argument", f"{field} must be a non-empty string", field=field)
    if len(requested) > MAX_SESSION_KEY_CHARS:
        raise ToolError("invalid_argument", f"{field} is {len(requested)} characters; the "
                        f"limit is {MAX_SESSION_KEY_CHARS}", field=field)
    if any(unicodedata.category(ch).startswith("C") for ch in requested):
        raise ToolError("invalid_argument", f"{field} must not contain control characters",
                        field=field)
    if session_owner(requested) != agent_id:
        raise ToolError("forbidden", f"{field} {requested[:100]!r} is not a session of agent "
                        f"{agent_id!r}; its sessions are '{PREFIX}{agent_segment(agent_id)}:...'",
                        field=field)
    return requested


def decode_header(raw: str, name: str) -> str:
    """An identity header's text: its raw bytes as UTF-8, then percent-decoded.

    HTTP servers hand header values over as latin-1 (one character per byte), so re-encoding
    as latin-1 gives back the bytes the client sent. Both ``X-Amem-Agent: ålice`` sent as
    UTF-8 and ``X-Amem-Agent: %C3%A5lice`` name the agent ``ålice``; a literal ``%`` is sent
    as ``%25``.

    Raises:
        ToolError: ``invalid_argument`` naming the header for bytes or escapes that are not
            UTF-8, or a ``%`` not followed by two hex digits.
    """
    try:
        text = raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise ToolError("invalid_argument", f"the {name} header is not valid UTF-8",
                        field=name) from None
    index = text.find("%")
    while index != -1:
        digits = text[index + 1:index + 3]
        if len(digits) != 2 or any(c not in "0123456789abcdefABCDEF" for c in digits):
            raise ToolError("invalid_argument", f"the {name} header has a '%' that is not "
                            "followed by two hex digits (send a literal '%' as %25)", field=name)
        index = text.find("%", index + 3)
    try:
        return unquote_to_bytes(text).decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError("invalid_argument", f"the {name} header's percent-escapes are not "
                        "valid UTF-8", field=name) from None
