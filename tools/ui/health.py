"""The inspector's health page: status and doctor, the nightly runs plotted, the index build.

An owner sees the store-wide reports of ``amem status`` / ``amem doctor`` (the server's
``OwnerAccess``); an agent's key sees its own ``memory_status``. The plot is an SVG of the
run history (``scheduler.record.read_runs``): one line per count over the runs' finish times.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .html import Html, attr, esc, join, kv, pretty, table, url

#: the counts plotted, with their colours (distinct in grey scale too: dashes differ)
SERIES = (("merges", "#1f5fa8", ""), ("superseded", "#a8321f", "6 3"),
          ("compactions", "#2a7a2a", "2 2"), ("embedding_debt", "#7a2a7a", "8 2 2 2"))
W, H, PAD = 720, 240, 40


def _count_ok(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def usable_runs(runs: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The runs whose plotted counts are whole numbers (or absent), and why each other one was
    left out: a hand-edited or damaged history must not take the page down with it."""
    kept: list[dict[str, Any]] = []
    why: list[str] = []
    for n, run in enumerate(runs, 1):
        bad = [key for key, _, _ in SERIES if not _count_ok(run.get(key))]
        if bad:
            why.append(f"record {n} ({str(run.get('finished_at', 'no finish time'))[:30]}): "
                       + ", ".join(f"{k}={str(run.get(k))[:20]!r}" for k in bad)
                       + " is not a whole number")
        else:
            kept.append(run)
    return kept, why


def plot(runs: Sequence[dict[str, Any]]) -> Html:
    """Lines of each series over the runs (evenly spaced, oldest left)."""
    if not runs:
        return Html('<p id="runs-empty">No nightly run has finished yet: the plot starts with the first.</p>')
    top = max([1] + [int(r.get(k) or 0) for r in runs for k, _, _ in SERIES])
    step = (W - 2 * PAD) / max(1, len(runs) - 1)

    def xy(i: int, value: int) -> str:
        return f"{PAD + i * step:.1f},{H - PAD - (H - 2 * PAD) * value / top:.1f}"

    lines = []
    legend = []
    for n, (key, colour, dash) in enumerate(SERIES):
        points = " ".join(xy(i, int(r.get(key) or 0)) for i, r in enumerate(runs))
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        lines.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dashes} points="{points}">'
                     f"<title>{esc(key)}</title></polyline>")
        legend.append(f'<text x="{PAD + n * 150}" y="18" fill="{colour}">{esc(key.replace("_", " "))}</text>')
    axis = (f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#333"/>'
            f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" stroke="#333"/>'
            f'<text x="4" y="{PAD + 4}">{top}</text><text x="4" y="{H - PAD}">0</text>'
            f'<text x="{PAD}" y="{H - 10}">{esc(str(runs[0].get("finished_at", ""))[:10])}</text>'
            f'<text x="{W - PAD - 80}" y="{H - 10}">{esc(str(runs[-1].get("finished_at", ""))[:10])}</text>')
    return Html(f'<svg id="runs-plot" role="img" aria-label="Nightly runs: merges, superseded, '
                f'compactions and embedding debt per run" viewBox="0 0 {W} {H}" width="100%" '
                f'data-runs="{len(runs)}">{axis}{"".join(lines)}{"".join(legend)}</svg>')


def verdict(doctor: dict[str, Any]) -> Html:
    """Doctor's verdict in one line: all clear (green) only when both stores were checked."""
    lcm = doctor.get("lcm") or {}
    lcm = lcm.get("doctor", lcm) if isinstance(lcm, dict) else {}
    unchecked = isinstance(lcm, dict) and lcm.get("available") is False
    if not doctor.get("ok"):
        cls, text = "bad", "doctor: problems found (below)"
    elif unchecked:
        cls, text = "bad", ("doctor: the notes show no problems; the conversation store was NOT "
                            f"checked ({lcm.get('reason') or 'this server runs without it'})")
    else:
        cls, text = "ok", "doctor: no problems found"
    return Html(f'<p id="doctor-verdict" class="{cls}">{esc(text)}</p>')


def render_health(*, owner: bool, status: dict[str, Any], doctor: dict[str, Any] | None,
                  runs: list[dict[str, Any]], index_build: dict[str, Any] | None,
                  agent: str, skipped_lines: Sequence[int] = (),
                  history_unreadable: str | None = None) -> Html:
    """``status`` is the store-wide one for an owner, the agent's own otherwise; ``doctor`` is
    there only when asked for (it reads every row: seconds on a large store). Lines of the run
    history that are no run (``skipped_lines``) or runs with a bad count are left out, and the
    page says which; a history that cannot be read at all (``history_unreadable``: why) is
    said, not taken for no runs."""
    runs, bad_runs = usable_runs(runs)
    parts: list[Any] = [Html("<h2>Status</h2>" if owner else "<h2>Status of this agent</h2>"),
                        kv(status)]
    if owner and doctor is None:
        parts.append(Html(
            f'<p><a id="run-doctor" href="{attr(url("health", agent=agent, doctor="1"))}">Run doctor '
            "now</a> (it checks every note and message: seconds on a large store).</p>"))
    elif owner and doctor is not None:
        parts += [Html("<h2>Doctor findings</h2>"), verdict(doctor), pretty(doctor)]
    else:
        parts.append(Html("<p>Store-wide status and doctor findings are for an owner key.</p>"))
    parts += [Html("<h2>Index build</h2>"), kv(index_build or {"state": "unknown"}),
              Html("<h2>Nightly runs</h2>"), _unreadable(history_unreadable),
              _skipped(skipped_lines, bad_runs), plot(runs),
              table(["finished", "status", "merges", "superseded", "compactions", "embedding debt",
                     "seconds"],
                    [(str(r.get("finished_at", ""))[:19], r.get("status"), r.get("merges"),
                      r.get("superseded"), r.get("compactions"), r.get("embedding_debt"),
                      r.get("duration")) for r in reversed(runs[-30:])],
                    caption="The last 30 nightly runs, newest first", empty="no runs yet")]
    return join(parts)


def _unreadable(why: str | None) -> Html:
    if why is None:
        return Html("")
    return Html('<div class="bad" id="runs-unreadable" role="status"><p>nightly_runs.jsonl '
                f"cannot be read ({esc(why)}): no run of it is shown. `amem doctor` names the "
                "file.</p></div>")


def _skipped(lines: Sequence[int], bad_runs: Sequence[str]) -> Html:
    if not lines and not bad_runs:
        return Html("")
    parts = []
    if lines:
        shown = ", ".join(map(str, lines[:10])) + (" ..." if len(lines) > 10 else "")
        parts.append(f"{len(lines)} lines that are not a JSON object (lines {shown})")
    parts += bad_runs[:10]
    if len(bad_runs) > 10:
        parts.append(f"and {len(bad_runs) - 10} more records")
    items = "".join(f"<li>{esc(p)}</li>" for p in parts)
    return Html('<div class="bad" id="runs-skipped" role="status"><p>Some of nightly_runs.jsonl '
                f"was skipped (the rest is shown):</p><ul>{items}</ul></div>")


__all__ = ["plot", "render_health", "usable_runs", "verdict"]
