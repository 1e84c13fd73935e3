"""Server-side HTML for the inspector: escaping, the page shell, tables, forms.

Every value that reaches a page goes through :func:`esc` (or :func:`attr`): notes and
messages are untrusted text written by agents. Pages carry no inline script (the one shipped
``ui.js`` is loaded from ``/ui/static``), so the Content-Security-Policy can forbid it.
"""

from __future__ import annotations

import html
import json
from contextvars import ContextVar, Token
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from ..cli.output import printable  # imports nothing of ours: no cycle

#: the pages a user moves between (path, label)
NAV = (("notes", "Notes"), ("search", "Search"), ("graph", "Graph"),
       ("conversations", "Conversations"), ("health", "Health"))

CSP = ("default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


class Html(str):
    """Markup already escaped: :func:`esc` passes it through unchanged."""


def esc(value: Any) -> Html:
    """``value`` as text safe inside an element (markup passes through), its control and
    direction-override characters shown as escapes (``\\x1b``) as the CLI prints them: raw,
    a BEL or ESC drew a box or nothing, and a CR hid the text before it."""
    if isinstance(value, Html):
        return value
    return Html(html.escape(printable("" if value is None else str(value)), quote=True))


def attr(value: Any) -> str:
    return html.escape(printable("" if value is None else str(value)), quote=True)


def join(parts: Iterable[Any]) -> Html:
    return Html("".join(esc(p) for p in parts))


#: where the pages of the request being built live: ``/ui/s/<session's path key>`` for a
#: browser session (its cookie is sent under that path only), ``/ui`` for a Bearer key
_BASE: ContextVar[str] = ContextVar("amem_ui_base", default="/ui")


def set_base(base: str) -> Token[str]:
    """Build the links of this request's page under ``base`` (reset with the token after)."""
    return _BASE.set(base)


def reset_base(token: Token[str]) -> None:
    _BASE.reset(token)


def base() -> str:
    return _BASE.get()


def url(path: str, **params: Any) -> str:
    """``<base>/<path>`` (``/ui/...``, or under the session's secret path) with the non-empty
    ``params`` as its query: every link, form and redirect of a page is built here, so none
    leaves the path its session cookie is sent to."""
    kept = {k: v for k, v in params.items() if v not in (None, "", False)}
    return f"{_BASE.get()}/{path}" + (f"?{urlencode(kept)}" if kept else "")


def cut(text: str, limit: int, whole: str | None = None) -> Html:
    """``text`` up to ``limit`` characters; a longer text says how much was left out (and links
    ``whole``, the page that shows all of it), so a cut is never mistaken for the end."""
    if len(text) <= limit:
        return esc(text)
    more = f"… {len(text) - limit} more characters"
    tail = link(whole, more + " (read it whole)", class_="more") if whole else \
        Html(f'<span class="more">{esc(more)}</span>')
    return Html(f"{esc(text[:limit])} {tail}")


def link(href: str, text: Any, **attrs: str) -> Html:
    extra = "".join(f' {k.rstrip("_").replace("_", "-")}="{attr(v)}"' for k, v in attrs.items())
    return Html(f'<a href="{attr(href)}"{extra}>{esc(text)}</a>')


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, caption: str,
          empty: str = "nothing to show") -> Html:
    """A table with a caption (screen readers announce it) and column headers."""
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        body = f'<tr><td colspan="{len(headers)}" class="empty">{esc(empty)}</td></tr>'
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in headers)
    return Html(f"<table><caption>{esc(caption)}</caption><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table>")


def field(name: str, label: str, value: Any = "", *, kind: str = "text",
          options: Sequence[tuple[str, str]] | None = None, hint: str = "") -> Html:
    """A labelled input (or select): every control has a ``<label for>``."""
    ident = f"f-{name}"
    described = f' aria-describedby="{ident}-hint"' if hint else ""
    if options is not None:
        opts = "".join(f'<option value="{attr(v)}"{" selected" if str(value) == v else ""}>'
                       f"{esc(t)}</option>" for v, t in options)
        control = f'<select id="{ident}" name="{attr(name)}"{described}>{opts}</select>'
    else:
        control = (f'<input id="{ident}" name="{attr(name)}" type="{kind}" '
                   f'value="{attr(value)}"{described}>')
    note = f'<small id="{ident}-hint">{esc(hint)}</small>' if hint else ""
    return Html(f'<div class="field"><label for="{ident}">{esc(label)}</label>{control}{note}</div>')


def form(action: str, fields: Iterable[Html], *, submit: str, label: str) -> Html:
    """A GET form (reads only; the pages change data through ``ui.js`` and JSON)."""
    return Html(f'<form method="get" action="{attr(action)}" role="search" aria-label="{attr(label)}">'
                f'{join(fields)}<button type="submit">{esc(submit)}</button></form>')


def dl(items: Iterable[tuple[str, Any]]) -> Html:
    """A definition list of a record's fields."""
    return Html("<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items) + "</dl>")


def pretty(value: Any) -> Html:
    """A JSON value, shown as preformatted text."""
    return Html(f"<pre>{esc(json.dumps(value, ensure_ascii=False, indent=2, default=str))}</pre>")


def page(title: str, body: Html, *, current: str, who: str, agent: str | None,
         csrf: str = "", can_write: bool = False, timing_ms: float | None = None,
         choose_agent: bool = False) -> str:
    """The page shell: skip link, navigation, who is logged in, the main region."""
    items = []
    for name, label in NAV:
        mark = ' aria-current="page"' if name == current else ""
        items.append(f'<li><a href="{attr(url(name, agent=agent))}"{mark}>{esc(label)}</a></li>')
    nav = "".join(items)
    rights = "may change data" if can_write else "read-only"
    timing = f'<span class="timing" data-ms="{timing_ms:.1f}">built in {timing_ms:.0f} ms</span>' \
        if timing_ms is not None else ""
    return (
        "<!doctype html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{esc(title)} · amem inspector</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="stylesheet" href="/ui/static/ui.css"><script src="/ui/static/ui.js" defer></script>'
        f'<meta name="amem-csrf" content="{attr(csrf)}"><meta name="amem-base" '
        f'content="{attr(base())}"></head><body>'
        '<a class="skip" href="#main">Skip to content</a>'
        f'<header><span class="brand">amem inspector</span><nav aria-label="Pages"><ul>{nav}</ul></nav>'
        f'<span class="who" id="who">{esc(who)}{" · agent " if agent else ""}{esc(agent or "")} · {rights}</span>'
        f"{_agent_form(current, agent) if choose_agent else ''}"
        f'<a class="logout" id="logout" href="{attr(url("logout"))}">Log out</a></header>'
        f'<main id="main" tabindex="-1"><h1>{esc(title)}</h1>{body}</main>'
        f"<footer>{timing}</footer></body></html>")


def _agent_form(current: str, agent: str | None) -> str:
    """An owner's choice of agent (agent keys see their own only)."""
    return (f'<form method="get" action="{attr(url(current))}" aria-label="Choose the agent" class="agent">'
            f'<label for="agent-choice">Agent</label><input id="agent-choice" name="agent" '
            f'value="{attr(agent or "")}" size="12"><button type="submit">Show</button></form>')


def bare(title: str, body: Html) -> str:
    """A page outside the session (login, errors before login)."""
    return ("<!doctype html>\n"
            f'<html lang="en"><head><meta charset="utf-8"><title>{esc(title)} · amem inspector</title>'
            '<link rel="stylesheet" href="/ui/static/ui.css"><script src="/ui/static/ui.js" defer></script>'
            f'</head><body><main id="main"><h1>{esc(title)}</h1>{body}</main></body></html>')


def kv(mapping: Mapping[str, Any], depth: int = 0) -> Html:
    """A report as nested definition lists (a list of scalars on one line; deeper: JSON)."""
    def value(v: Any) -> Any:
        if isinstance(v, Mapping) and depth < 2:
            return kv(v, depth + 1) if v else "(none)"
        if isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v):
            return ", ".join(map(str, v)) or "(none)"
        if isinstance(v, (dict, list)):
            return json.dumps(v, default=str)
        return v

    return dl((k, value(v)) for k, v in mapping.items())


__all__ = ["CSP", "Html", "attr", "bare", "cut", "dl", "esc", "field", "form", "join", "kv", "link",
           "page", "pretty", "table", "url"]
