"""The ranking maths of ``search``: pure functions over ids and scores, no I/O."""

from __future__ import annotations

import math
from operator import itemgetter
from typing import Callable, Collection, Hashable, Mapping, Sequence, TypeVar

# written once, lcm fuses with them too
from amem.kernel.fusion import zscore_fusion as zscore_fusion
from amem.kernel.fusion import zscore_totals as zscore_totals

K = TypeVar("K", bound=Hashable)


def zscore_total(item: K, columns: Sequence[Mapping[K, float]], weights: Sequence[float],
                 missing: Sequence[float], moments: Sequence[tuple[float, float]]) -> float:
    """``sum_i w_i * z_i(item)`` with the given moments, before the logistic; a constant
    column (std 0) adds nothing. The logistic of it is the fused score."""
    total = 0.0
    for column, weight, fill, (mean, std) in zip(columns, weights, missing, moments):
        if std <= 1e-12:
            continue
        total += weight * (float(column.get(item, fill)) - mean) / std
    return total


def logistic(x: float) -> float:
    """``1 / (1 + e^-x)``, safe for any finite ``x`` (the fused score's scale)."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def logit(score: float) -> float:
    """``logistic``'s inverse for a fused score in (0, 1); 0 and 1 are held 1e-12 inside."""
    return math.log(max(score, 1e-12) / max(1.0 - score, 1e-12))


#: more notes than this at one instant are a bulk write (an import, a batch without times):
#: nothing says in which order they were told
BULK_INSTANT = 4


def time_neighbours(times: Mapping[K, float], seeds: Sequence[K], span: int, gap: float,
                    bulk: Collection[float] = ()) -> dict[K, list[K]]:
    """Which seeds each note is a neighbour of: note -> seeds, in the seeds' order.

    A seed's neighbours are the notes of the ``span`` instants right before it and the
    ``span`` right after it in time (``times``: epoch seconds), each less than ``gap`` seconds
    away; a few notes sharing one instant are taken together (nothing says which came first).
    A note at the seed's own instant is never its neighbour. An instant of a bulk write (more
    than :data:`BULK_INSTANT` notes in ``times``, or named in ``bulk``) has no order at all:
    its notes have no neighbours, and a walk from another seed stops at it (the note added
    right after an import is not the next thing any imported note said). ``times`` must hold
    every note within ``gap`` of each seed, or a farther note would be taken for the next one.
    A seed without a time has no neighbours.
    """
    if span < 0 or not math.isfinite(gap) or gap < 0:
        raise ValueError("span must be >= 0 and gap a finite number >= 0")
    at: dict[float, list[K]] = {}
    for item in sorted(times, key=lambda item: (times[item], str(item))):
        at.setdefault(times[item], []).append(item)
    crowded = {t for t, items in at.items() if len(items) > BULK_INSTANT} | set(bulk)
    instants = sorted(at)
    index = {t: i for i, t in enumerate(instants)}
    out: dict[K, list[K]] = {}
    for seed in dict.fromkeys(seeds):
        if seed not in times or times[seed] in crowded:
            continue
        t = times[seed]
        for step in (-1, 1):
            i = index[t] + step
            for _ in range(span):
                if not 0 <= i < len(instants) or abs(instants[i] - t) >= gap or instants[i] in crowded:
                    break
                for other in at[instants[i]]:
                    out.setdefault(other, []).append(seed)
                i += step
    return out


def neighbour_lift(base: Mapping[K, float], sources: Mapping[K, Sequence[K]],
                   weight: float) -> list[tuple[K, float]]:
    """``logistic(base[d] + weight * max(0, max_{s in sources[d]} base[s]))``, best first.

    ``base`` holds the fused z totals (:func:`zscore_total`) of every note to rank;
    ``sources[d]`` the notes ``d`` is a neighbour of (:func:`time_neighbours`). In a
    conversation the turn that answers often shares few words with the question while the
    turn next to it (the question asked back, the topic's opening) matches it well: the
    answer is lifted by its best neighbour's standing. Only a neighbour above the candidates'
    mean lifts (a weak neighbour must not push a good match down). Ties keep ``base``'s order.
    """
    if not math.isfinite(weight) or weight < 0:
        raise ValueError("weight must be finite and >= 0")
    scored = []
    for item, z in base.items():
        told_near = sources.get(item)
        if told_near:  # z + weight * 0 is z: a note with no neighbour keeps its total
            lift = max((base[s] for s in told_near if s in base), default=0.0)
            z = z + weight * max(0.0, lift)
        scored.append((item, logistic(z)))
    # a stable sort, reversed, keeps equal scores in base's order
    scored.sort(key=itemgetter(1), reverse=True)
    return scored


def link_votes(ranked: Sequence[tuple[K, float]], voters: Mapping[K, Sequence[K]],
               weight: float, keep: int) -> list[tuple[K, float]]:
    """``ranked`` (best first, scores in (0, 1)) with the notes the best ones link to lifted.

    A note's logit gains ``weight`` times the sum, over ``voters[d]`` (the notes linking to
    it, itself left out), of their logits above 0 (the candidates' mean): a note several good
    matches point to climbs, a weak voter adds nothing. No lifted note passes the ``keep``-th
    note, and the first ``keep`` are never lifted, so the head the fusion chose stays as it
    was. Returns the notes best first, a lifted one scored ``logistic`` of its new logit and
    the others as given; ties keep ``ranked``'s order.
    """
    if not math.isfinite(weight) or weight < 0:
        raise ValueError("weight must be finite and >= 0")
    if keep < 1:
        raise ValueError("keep must be >= 1")
    if weight == 0 or len(ranked) <= keep:
        return list(ranked)
    score = dict(ranked)
    # just below the keep-th: a lifted note can reach the head's edge, not enter it
    ceiling = logit(ranked[keep - 1][1]) - 1e-6
    scored = list(ranked)  # a note not lifted keeps its score as it was (no logit round trip)
    for i in range(keep, len(ranked)):
        item, s = ranked[i]
        if item not in voters:  # most candidates: no logit taken
            continue
        votes = sum(max(0.0, logit(score[v])) for v in voters[item] if v != item and v in score)
        z = logit(s)
        if votes > 0 and z < ceiling:
            scored[i] = (item, logistic(min(z + weight * votes, ceiling)))
    scored.sort(key=itemgetter(1), reverse=True)  # stable: ties keep ranked's order
    return scored


def diversify(ranked: Sequence[tuple[K, float]], similarity: Sequence[Sequence[float]],
              keep: float, penalty: float) -> list[tuple[K, float]]:
    """Maximal marginal relevance over ``ranked`` (best first, scores on the fused scale).

    Greedily picks the note with the best ``keep * logit(score) - (1 - keep) * penalty *
    max_similarity_to_the_picked``; ``similarity[i][j]`` is how alike notes ``i`` and ``j`` of
    ``ranked`` are (a square table in ``ranked``'s order: built once by the caller, so the
    picks only look values up). The picks take the scores of ``ranked`` in their order (the
    k-th pick gets the k-th best score), so the list stays ordered by score and nothing outside
    it moves. ``keep`` 1 returns ``ranked``. Ties keep ``ranked``'s order.
    """
    if not 0.0 <= keep <= 1.0:
        raise ValueError("keep must lie in [0, 1]")
    if not math.isfinite(penalty) or penalty < 0:
        raise ValueError("penalty must be finite and >= 0")
    if len(similarity) != len(ranked) or any(len(row) != len(ranked) for row in similarity):
        raise ValueError("similarity must be a square table, one row per ranked note")
    if keep == 1.0 or len(ranked) < 3:
        return list(ranked)
    relevance = [keep * logit(s) for _, s in ranked]
    weight = (1.0 - keep) * penalty
    left = list(range(len(ranked)))
    # how alike each note is to the closest one picked; below 0 counts as 0 (unrelated)
    redundancy = [0.0] * len(ranked)
    picked: list[int] = []
    while left:
        # the best trade-off; ``left`` is in ranked order and only a strictly better value
        # replaces, so a tie goes to the note ranked first (a plain loop: ``max`` with a key
        # built a tuple per note and pick, a third of this step)
        best, best_value = left[0], relevance[left[0]] - weight * redundancy[left[0]]
        for i in left:
            value = relevance[i] - weight * redundancy[i]
            if value > best_value:
                best, best_value = i, value
        left.remove(best)
        picked.append(best)
        for i in left:
            alike = similarity[i][best]
            if alike > redundancy[i]:
                redundancy[i] = alike
    return [(ranked[i][0], score) for i, (_, score) in zip(picked, ranked)]


def replies_first(order: Sequence[K], asks: Mapping[K, bool], times: Mapping[K, float],
                  gap: float, head: int, reach: int) -> list[K]:
    """``order`` with a question's reply moved to the question's place.

    For each of the first ``head`` notes that ``asks`` (its text is mostly a question), the
    note told next after it (the smallest time in ``times`` later than its own, less than
    ``gap`` seconds later) among the first ``reach`` of ``order`` takes its place when that
    note does not ask too; the question and the notes between move down one. A question
    matches the words of a question about it better than the reply that answers it, but the
    reply holds the answer. Each note moves at most once; a note without a time is never a
    question's reply nor has one.
    """
    if head < 0 or reach < 0 or not math.isfinite(gap) or gap < 0:
        raise ValueError("head and reach must be >= 0 and gap a finite number >= 0")
    out = list(order)
    if len(set(out)) != len(out):
        raise ValueError("order must not repeat a note")
    moved: set[K] = set()
    for i in range(min(head, len(out))):
        item = out[i]
        if item in moved or not asks.get(item, False) or item not in times:
            continue
        t = times[item]
        later = [(times[other], j) for j, other in enumerate(out[i + 1:reach], start=i + 1)
                 if other in times and t < times[other] < t + gap]
        if not later:
            continue
        j = min(later)[1]
        reply = out[j]
        if reply in moved or asks.get(reply, False):
            continue
        out.insert(i, out.pop(j))
        moved.update((item, reply))
    return out


def step_back(ranked: Sequence[tuple[K, float]], marked: Collection[K],
              penalty: float) -> list[tuple[K, float]]:
    """``ranked`` (best first, scores in (0, 1)) reordered as if every ``marked`` note's logit
    were ``penalty`` lower; the notes take the scores of ``ranked`` in their order (the k-th
    note gets the k-th best score), so the list stays ordered by score. Ties keep the order.
    """
    if not math.isfinite(penalty) or penalty < 0:
        raise ValueError("penalty must be finite and >= 0")
    if penalty == 0 or not any(item in marked for item, _ in ranked):
        return list(ranked)
    keyed = sorted(((logit(s) - (penalty if item in marked else 0.0), i)
                    for i, (item, s) in enumerate(ranked)), key=lambda t: (-t[0], t[1]))
    return [(ranked[i][0], score) for (_, i), (_, score) in zip(keyed, ranked)]


def unranked_score(scores: Sequence[float], pool: int) -> float:
    """The score to assume for a note a ranking did not return, given its returned ``scores``.

    A ranking that returned fewer than ``pool`` notes returned every note it scores above
    zero (BM25 ranks only notes sharing a term), so the rest score 0. A full ranking cut the
    rest off below its last score: that score is their upper bound and the assumption made.
    """
    if pool < 1:
        raise ValueError("pool must be >= 1")
    if len(scores) < pool or not scores:
        return 0.0
    return float(min(scores))


def heat_boost(score: float, retrieval_count: int, age_days: float, factor: float = 0.002) -> float:
    """``score * (1 + factor * ln(1 + retrieval_count) / (age_days + 1))``.

    Notes retrieved often and recently rise a little; the boost fades with days since the
    last access. Negative inputs are clamped to zero (a clock skew must not invert ranking).
    """
    count = max(0, retrieval_count)
    age = max(0.0, age_days)
    return score * (1.0 + factor * math.log1p(count) / (age + 1.0))


def usage_boost(score: float, best_cosine: float | None, threshold: float = 0.97,
                factor: float = 1.0) -> float:
    """``score * (1 + factor * (c - threshold) / (1 - threshold))`` when ``c >= threshold``.

    ``c`` is the best cosine of the query with a query after which the agent opened the note
    (``amem.usage``); None or below ``threshold``: ``score`` unchanged. The same question
    again (c = 1) multiplies by ``1 + factor``; the boost fades to nothing at the threshold,
    so a question that is merely on the same topic never moves.
    """
    if not -1.0 <= threshold < 1.0:
        raise ValueError("threshold must lie in [-1, 1)")
    if not math.isfinite(factor) or factor < 0:
        raise ValueError("factor must be finite and >= 0")
    if best_cosine is None or not math.isfinite(best_cosine) or best_cosine < threshold:
        return score
    closeness = min(1.0, (best_cosine - threshold) / (1.0 - threshold))
    return score * (1.0 + factor * closeness)


def expand_links(
    seeds: Sequence[K],
    links_of: Callable[[K], Sequence[K]],
    cosine_of: Callable[[K], float | None],
    *,
    hops: int = 2,
    min_cosine: float = 0.25,
    max_added: int = 8,
) -> list[K]:
    """Breadth-first expansion over links from ``seeds``, hop by hop.

    A linked note is admitted when its cosine to the query is at least ``min_cosine``
    (``cosine_of`` returns None for notes that cannot be admitted: missing, inactive, another
    tenant). Only admitted notes are expanded further. Within a hop, the admitted notes come in
    the order of how many notes of the hop before link to them, ties in discovery order: a note
    several matches point to beats one a single match points to (LoCoMo dev, offline links:
    the tool's first 10 at limit 5 hold +0.026 more multi-hop evidence than in discovery
    order). Seeds are never added; at most ``max_added`` notes come back, each once.
    """
    if hops <= 0 or max_added <= 0:
        return []
    visited: set[K] = set(seeds)
    added: list[K] = []
    level: list[K] = list(dict.fromkeys(seeds))
    for _ in range(hops):
        votes: dict[K, int] = {}  # admitted this hop -> notes of the hop before linking to it
        for node in level:
            for neighbour in dict.fromkeys(links_of(node)):
                if neighbour in votes:
                    votes[neighbour] += 1
                    continue
                if neighbour in visited:
                    continue
                visited.add(neighbour)
                cos = cosine_of(neighbour)
                if cos is not None and cos >= min_cosine:
                    votes[neighbour] = 1
        level = sorted(votes, key=lambda n: -votes[n])  # stable: discovery order on ties
        added.extend(level[:max_added - len(added)])
        if len(added) >= max_added or not level:
            break
    return added


# ---------------------------------------------------------------- supersession in a ranking

def changed_in_part_order(items: Sequence[tuple[str, str | None]]) -> list[int]:
    """Positions of ``(note id, partly_superseded_by)`` items, best first, reordered so that
    the newer note that changed part of a note comes right before it when it ranked lower:
    the older note keeps its rank (its other facts may be what was asked), and the change to
    it is read first. Pure: search applies it to its ranking."""
    order = list(range(len(items)))
    where = {nid: i for i, (nid, _) in enumerate(items)}
    for i, (_, by) in enumerate(items):
        j = where.get(by) if by is not None else None
        if j is None or j == i:
            continue
        at, pos = order.index(i), order.index(j)
        if pos > at:  # the successor ranked lower: it goes right before the older note
            order.pop(pos)
            order.insert(at, j)
    return order


def history_order(items: Sequence[tuple[str, str | None]]) -> list[int]:
    """Positions of ``(note id, superseded_by)`` items, best first, reordered so that a
    superseded note follows the note that replaced it (and its chain) when both are there;
    one whose successor is absent keeps its place. Pure: search applies it to its ranking."""
    present = {nid: i for i, (nid, _) in enumerate(items)}
    followers: dict[str, list[int]] = {}
    for i, (_, by) in enumerate(items):
        if by is not None and by in present and by != items[i][0]:
            followers.setdefault(by, []).append(i)
    out: list[int] = []
    placed: set[int] = set()

    def place(i: int) -> None:
        if i in placed:
            return
        placed.add(i)
        out.append(i)
        for j in followers.get(items[i][0], []):
            place(j)

    for i, (_, by) in enumerate(items):
        if by is None or by not in present or by == items[i][0]:
            place(i)
    for i in range(len(items)):  # a cycle of marks (cannot be written, but never lose a hit)
        place(i)
    return out
