"""The graph's layout and the nightly plot: pure functions over small literal inputs."""

from __future__ import annotations

import math
from pathlib import Path

from amem.notes import Note
from scheduler.record import append_run, read_runs
from tools.ui.graph import MAX_NODES, SIZE, Graph, layout, svg
from tools.ui.health import SERIES, plot
from tools.ui.html import esc


def _note(i: int, links: list[str] | None = None, superseded: bool = False) -> Note:
    return Note(id=f"n{i}", content=f"note <{i}>", agent_id="a", links=links or [],
                superseded_by="n0" if superseded else None)


def test_a_few_hundred_nodes_lie_inside_the_picture_apart() -> None:
    graph = Graph()
    graph.add(_note(0), 0)
    for i in range(1, 301):
        graph.add(_note(i, [f"n{i - 1}"]), 1 + i % 3)
    assert graph.truncated and len(graph.nodes) == MAX_NODES
    graph.link_all()
    pos = layout(graph)
    assert pos["n0"] == (SIZE / 2, SIZE / 2)
    for x, y in pos.values():
        assert 100 <= x <= SIZE - 100 and 100 <= y <= SIZE - 100  # room for labels
    points = sorted(pos.values())
    closest = min(math.dist(a, b) for a, b in zip(points, points[1:]))
    assert closest > 4  # no two nodes on one spot
    picture = svg(graph, "a", "t")
    assert picture.count("<circle") == MAX_NODES and 'data-edges="%d"' % len(graph.edges) in picture
    assert "<text" not in picture  # past 60 nodes the labels are titles only (hover, screen readers)


def test_node_text_is_escaped_and_superseded_notes_are_hollow() -> None:
    graph = Graph()
    graph.add(_note(1), 0)
    graph.add(_note(2, superseded=True), 1)
    picture = svg(graph, "a", "<t>")
    assert "note <1>" not in picture and str(esc("note <1>")) in picture
    assert picture.count('fill="#ffffff"') == 1


def test_the_run_history_keeps_the_newest_and_the_plot_draws_each_series(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    for i in range(7):
        append_run(path, {"finished_at": f"2026-01-0{i + 1}", "merges": i}, keep=5)
    runs = read_runs(path)
    assert [r["merges"] for r in runs] == [2, 3, 4, 5, 6]
    path.write_text(path.read_text() + "not json\n")
    assert len(read_runs(path)) == 5
    picture = plot(runs)
    assert picture.count("<polyline") == len(SERIES) and 'data-runs="5"' in picture
    assert "No nightly run" in plot([])


def test_a_consolidation_survivor_is_drawn_as_a_cluster() -> None:
    from tools.ui.graph import _cluster_groups

    graph = Graph()
    survivor = _note(1, ["n2"])
    survivor.evolution_history = [{"action": "consolidate_merge", "merged": "gone-1"},
                                  {"action": "consolidate_merge", "merged": "gone-2"}]
    for note in (survivor, _note(2), _note(3)):
        graph.add(note, 0)
    _cluster_groups(graph)
    assert graph.group == {"n1": 1, "n2": 1, "n3": 0}
    picture = svg(graph, "a", "t")
    assert 'data-merged="2"' in picture and "absorbed 2 notes in consolidation" in picture
