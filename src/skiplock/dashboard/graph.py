"""The workflow graph on a job's page: an ``app.workflow_graph()`` laid out for an inline SVG.

Drawn on the server, no script: jobs in layers by their longest path from a root (a job with
no parent among those drawn), left to right, so every edge points right; within a layer in
the order of their parents' rows (then by id), which keeps a chain straight and a group's
members beside each other; each layer centred on the tallest. The template draws a box per
job (filled in its state's colour through its ``state-<name>`` class, a link to its page)
and a curve with an arrowhead per edge.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._job import JobState
from .._workflow_records import WorkflowGraph

NODE_W = 168
NODE_H = 44
GAP_X = 56
GAP_Y = 14
PAD = 8
TASK_CHARS = 22
"""A task name longer than this is cut (with an ellipsis) in its box; the box's title and
the link's page hold the whole name."""

FINAL = frozenset(s.value for s in JobState.final())


@dataclass(frozen=True, slots=True)
class Box:
    """One job drawn: where its box's top-left corner is, what it says."""

    id: int
    task: str
    label: str
    """The task name cut to fit the box."""
    state: str
    x: int
    y: int
    current: bool
    """The job whose page this is."""


@dataclass(frozen=True, slots=True)
class Arrow:
    """One edge drawn, parent to child, as an SVG path."""

    parent: int
    child: int
    path: str


@dataclass(frozen=True, slots=True)
class Drawing:
    boxes: list[Box]
    arrows: list[Arrow]
    width: int
    height: int
    truncated: bool
    """The workflow has more jobs than were drawn (``app.workflow_graph``'s ``most``)."""
    current_drawn: bool
    """Whether the job whose page this is is among the boxes."""
    node_w: int = NODE_W
    node_h: int = NODE_H

    @property
    def live(self) -> bool:
        """Whether any job drawn may still change state (not succeeded, cancelled or dead)."""
        return any(b.state not in FINAL for b in self.boxes)


def layers(ids: list[int], edges: list[tuple[int, int]]) -> dict[int, int]:
    """Each job's layer: 0 for a root, else one past its deepest parent (the longest path
    from a root), over the edges between the given jobs. Workflows are acyclic (enqueue
    refuses a cycle); a cycle met anyway is put after everything else, never looped on."""
    known = set(ids)
    parents: dict[int, list[int]] = {i: [] for i in ids}
    children: dict[int, list[int]] = {i: [] for i in ids}
    for parent, child in edges:
        if parent in known and child in known and parent != child:
            parents[child].append(parent)
            children[parent].append(child)
    left = {i: len(parents[i]) for i in ids}
    layer = dict.fromkeys(ids, 0)
    ready = sorted(i for i in ids if left[i] == 0)
    done: set[int] = set()
    while ready:
        node = ready.pop()
        done.add(node)
        for child in children[node]:
            layer[child] = max(layer[child], layer[node] + 1)
            left[child] -= 1
            if left[child] == 0:
                ready.append(child)
    if len(done) < len(ids):
        after = max(layer.values(), default=0) + 1
        for i in ids:
            if i not in done:
                layer[i] = after
    return layer


def draw(graph: WorkflowGraph, current: int) -> Drawing:
    """Lay ``graph`` out: boxes in layers, arrows between them."""
    ids = [n.id for n in graph.nodes]
    layer_of = layers(ids, graph.edges)
    known = set(ids)
    edges = sorted({(p, c) for p, c in graph.edges if p in known and c in known and p != c})
    parents: dict[int, list[int]] = {i: [] for i in ids}
    for parent, child in edges:
        parents[child].append(parent)
    columns: list[list[int]] = [[] for _ in range(max(layer_of.values(), default=-1) + 1)]
    for i in sorted(ids):
        columns[layer_of[i]].append(i)
    row: dict[int, float] = {}

    def place(i: int) -> tuple[float, int]:
        """Below its parents' mean row (they are all in earlier layers), then by id."""
        above = [row[p] for p in parents[i] if p in row]
        return (sum(above) / len(above) if above else -1.0, i)

    for column in columns:
        column.sort(key=place)
        for index, i in enumerate(column):
            row[i] = index
    tallest = max((len(c) for c in columns), default=0)
    step_x, step_y = NODE_W + GAP_X, NODE_H + GAP_Y
    where: dict[int, tuple[int, int]] = {}
    for index, column in enumerate(columns):
        offset = (tallest - len(column)) * step_y // 2
        for position, i in enumerate(column):
            where[i] = (PAD + index * step_x, PAD + offset + position * step_y)
    boxes = [
        Box(n.id, n.task, _cut(n.task), n.state, *where[n.id], n.id == current) for n in graph.nodes
    ]
    arrows = [Arrow(p, c, _curve(where[p], where[c])) for p, c in edges]
    width = PAD * 2 + max(len(columns) * step_x - GAP_X, 0)
    height = PAD * 2 + max(tallest * step_y - GAP_Y, 0)
    return Drawing(boxes, arrows, width, height, graph.truncated, current in known)


def _cut(task: str) -> str:
    return task if len(task) <= TASK_CHARS else task[: TASK_CHARS - 1] + "…"


def _curve(parent: tuple[int, int], child: tuple[int, int]) -> str:
    """From the parent box's right side to the child box's left, bending halfway."""
    x1, y1 = parent[0] + NODE_W, parent[1] + NODE_H // 2
    x2, y2 = child[0] - 2, child[1] + NODE_H // 2  # the arrowhead's tip meets the box
    bend = (x2 - x1) // 2
    return f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"
