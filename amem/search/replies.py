"""Steps 4e and 5b of a search: a note that asks steps back; a question's reply goes first.

In a conversation kept as notes, a question about something ("What kind of counseling do you
want to pursue?") shares the words of a later question about the same thing ("What kind of
counseling is Caroline interested in?") better than the reply that answers it ("I'm thinking of
working with trans people..."). Both legs then rank the asked question first and the reply
right behind it. This step looks at the first matches' texts (the whole payloads the search
reads for its results anyway) and moves the reply told right after a question to the
question's place (``ranking.replies_first``). Nothing enters or leaves the matches; only their
order changes, and the moved notes take the scores of the places they take, so the list stays
ordered by score. LoCoMo dev (benchmarks/RESULTS.md, issue 29, third round): MRR of categories
1-4 0.571 -> 0.596, in every conversation and on both held-apart halves.

Step 4e goes further up the pipeline: among the first 20 candidates, every note that asks steps
back by ``question_penalty`` of the fused logit (each note's stored share, ``asks``, comes with
its ranking fields; an older note without it is read and measured), so a turn that tells
something takes its place; a question is rarely what answers (on LoCoMo dev 8 of 519 evidence
turns ask, 1.5%, against 18% of the turns the fused ranking put in its top 10 and 13% of all
turns). LoCoMo dev: R@10 0.801 -> 0.806, multi-hop (category 1) 0.495 -> 0.524, MRR +0.004.

A note *asks* when at least ``question_share`` of its sentences' characters are in sentences
ending with a question mark (bracketed annotations such as ``[shares a photo]`` or a date label
left out, and a speaker's label opening the text): a turn telling news and closing with "how
about you?" is not a question.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from .. import ranking
from ..notefields import ASKS
from ..text import question_share
from ..backends.base import Hit, VectorBackend
from ..config import AmemConfig

#: the first matches that may hand their place to a reply, and how far down the reply may
#: stand; chosen on half a of LoCoMo dev (replayed at share 0.5, half a MRR: 3 and 5 0.572;
#: 1 and 5 0.571, 5 and 10 0.570, 1 and 3 0.568)
HEAD = 3
REACH = 5
#: the candidates whose texts step 4e reads: a question below them cannot reach the matches an
#: agent reads (a limit of at most 20)
QUESTION_HEAD = 20


def asked_share(payload: Mapping[str, object]) -> float | None:
    """A note's question share: the stored one (``asks``), else measured from the content the
    payload holds; None when it holds neither (ranking fields of a note written before
    ``asks`` was stored)."""
    stored = payload.get(ASKS)
    if isinstance(stored, (int, float)):
        return float(stored)
    content = payload.get("content")
    return None if content is None else question_share(str(content))


def questions_back(config: AmemConfig, backend: VectorBackend, fused: list[tuple[str, float]],
                   ranked: Mapping[str, Hit]) -> tuple[list[tuple[str, float]], dict[str, Hit]]:
    """Step 4e: among the first ``QUESTION_HEAD`` candidates, a note that asks steps back by
    ``question_penalty`` of the fused logit (``ranking.step_back``; 0 = off), so a turn that
    tells something takes its place in the head.

    A note's question share is stored with it (``asks``, a ranking field the legs return in
    ``ranked``); a note written before it was stored is read whole and its content measured.
    Returns the ranking and the whole payloads read (the search's own read of its matches
    skips them)."""
    penalty, share = config.question_penalty, config.question_share
    if penalty <= 0 or share <= 0 or config.fusion != "zscore" or len(fused) < 2:
        return fused, {}
    head = fused[:QUESTION_HEAD]
    shares = {pid: asked_share(ranked[pid].payload) if pid in ranked else None
              for pid, _ in head}
    older = [pid for pid, value in shares.items() if value is None]
    read = {h.id: h for h in backend.retrieve(older)} if older else {}
    shares.update({pid: asked_share(h.payload) or 0.0 for pid, h in read.items()})
    asking = {pid for pid, value in shares.items() if value is not None and value >= share}
    return ranking.step_back(head, asking, penalty) + fused[QUESTION_HEAD:], read


def replies_first(config: AmemConfig, matches: Sequence[tuple[str, float, float]],
                  hits: Mapping[str, Hit], include_superseded: bool
                  ) -> list[tuple[str, float, float]]:
    """``matches`` (``(id, rrf, score)``, best first) with a question's reply in its place.

    ``hits`` holds every match with its whole payload (``content``, ``event_ts``). Off with
    ``question_share`` 0, and with ``include_superseded`` (that list keeps a replaced note
    right after the note that replaced it, an order this step must not break).
    """
    share = config.question_share
    if share <= 0 or include_superseded or len(matches) < 2:
        return list(matches)
    head = [pid for pid, _, _ in matches[:REACH]]
    asks = {pid: (asked_share(hits[pid].payload) or 0.0) >= share for pid in head}
    if not any(asks[pid] for pid in head[:HEAD]):
        return list(matches)
    times = {pid: float(t) for pid in head
             if isinstance(t := hits[pid].payload.get("event_ts"), (int, float))}
    order = ranking.replies_first(head, asks, times, config.neighbour_gap_s, HEAD, REACH)
    if order == head:
        return list(matches)
    # the k-th note of the new order takes the k-th place's scores
    return [(pid, rrf, score) for pid, (_, rrf, score) in zip(order, matches)] \
        + list(matches[REACH:])


__all__ = ["HEAD", "QUESTION_HEAD", "REACH", "asked_share", "question_share", "questions_back",
           "replies_first"]
