"""Where the run page draws each step: columns by dependency depth, one row per step, arrows from
each dependency to its dependent, exit handlers in a dashed column of their own after the graph.

Pure geometry from a run's status; the template only draws the coordinates. Sizes stay bounded:
long lines shrink as they always did, and a wide column shows :data:`MAX_ROWS` rows at most
(the last one "+N more"), keeping the steps that need attention (failed, running) in view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from job_chain.rules.plan import depths_of
from job_chain.status.types import SKIPPED, StepStatus
from job_chain.ui.views import tone

MAX_ROWS = 12  # rows drawn per column; the rest of a wide column becomes one "+N more" node
LEFT = 30  # x of the first column
TOP = 20  # y of the first row
MORE_HALF = 30  # half the width of a labelled "+N more" pill
_ATTENTION = {"fail": 0, "run": 1, "stop": 2, "wait": 3}  # which steps a capped column keeps in view


@dataclass
class Node:
    step: StepStatus
    x: float
    y: float
    tone: str
    skipped: bool
    label: str
    note: str = ""  # a second label line: "after the run (failure)" for an exit handler


@dataclass
class More:
    """The steps of a column beyond :data:`MAX_ROWS`, drawn as one node."""

    x: float
    y: float
    count: int
    steps: List[int]


@dataclass
class Edge:
    path: str  # SVG path data, from the dependency to the dependent
    source: int  # step index (or -1 - column for a "+N more" node)
    target: int
    dim: bool  # one end was skipped


@dataclass
class Dag:
    nodes: List[Node]
    edges: List[Edge]
    more: List[More]
    width: int
    height: int
    radius: int
    labels: bool  # room for a name under each node
    arrows: bool  # room for an arrow head between columns
    handler_box: Optional[Tuple[float, float, float, float]] = None  # x, y, width, height (dashed)
    columns: int = 0


def layout(steps: Sequence[StepStatus]) -> Dag:
    """The run page's graph for ``steps`` (a line stays a line)."""
    graph = [s for s in steps if not s.run_on]
    handlers = [s for s in steps if s.run_on]
    known = {s.index for s in graph}
    edges_in: Dict[int, Sequence[int]] = {s.index: [d for d in s.depends_on if d in known] for s in graph}
    depth = depths_of(edges_in)
    columns: Dict[int, List[StepStatus]] = {}
    for step in graph:
        columns.setdefault(depth.get(step.index, 0), []).append(step)
    ncols = max(columns) + 1 if columns else 0
    gap = 90 if ncols <= 12 else (36 if ncols <= 60 else 14)
    radius = 11 if ncols <= 60 else 5
    labels = ncols <= 12
    row_gap = 44 if labels else 2 * radius + 10
    handler_gap = 56 if labels else row_gap  # room for "after the run (failure)" under each handler
    rows = max([min(len(c), MAX_ROWS) for c in columns.values()] + [1])
    span = max((rows - 1) * row_gap, (min(len(handlers), MAX_ROWS) - 1) * handler_gap, 0)
    middle = TOP + span / 2  # every column is centred on one line: a line stays straight

    def ys(count: int, gap_y: float = row_gap) -> List[float]:
        return [middle + (k - (count - 1) / 2) * gap_y for k in range(count)]

    nodes: List[Node] = []
    more: List[More] = []
    where: Dict[int, Tuple[int, float, float, float]] = {}  # drawn id -> (column, x, y, half width)
    hidden: Dict[int, int] = {}  # step -> column of the "+N more" node that stands for it
    for col in range(ncols):
        x = LEFT + col * gap
        members = columns.get(col, [])
        shown, rest = _cap(members)
        count = len(shown) + (1 if rest else 0)
        for step, y in zip(shown, ys(count)):
            nodes.append(_node(step, x, y, labels))
            where[step.index] = (col, x, y, radius)
        if rest:
            y = ys(count)[-1]
            more.append(More(x, y, len(rest), [s.index for s in rest]))
            where[-1 - col] = (col, x, y, MORE_HALF if labels else radius)
            for step in rest:
                hidden[step.index] = col

    edges: List[Edge] = []
    seen = set()
    skipped = {s.index for s in graph if s.status == SKIPPED}
    for step in graph:
        target = step.index if step.index in where else -1 - hidden[step.index]
        for dep in edges_in[step.index]:
            source = dep if dep in where else -1 - hidden[dep]
            if (source, target) in seen:
                continue
            seen.add((source, target))
            edges.append(Edge(_curve(where[source], where[target], gap), source, target,
                              dep in skipped or step.index in skipped))

    last_x = LEFT + max(ncols - 1, 0) * gap
    width = last_x + LEFT + 10
    box = None
    if handlers:
        hgap = 130 if labels else max(gap, 3 * radius + 16)
        hx = last_x + hgap if graph else LEFT + 50
        box_w = 140 if labels else 2 * radius + 16
        shown, rest = _cap(handlers)
        count = len(shown) + (1 if rest else 0)
        hys = ys(count, handler_gap)
        for step, y in zip(shown, hys):
            node = _node(step, hx, y, labels)
            node.note = f"after the run ({step.run_on})"
            nodes.append(node)
        if rest:
            more.append(More(hx, hys[-1], len(rest), [s.index for s in rest]))
        top = max(4.0, hys[0] - radius - 10)
        bottom = hys[-1] + (50 if labels else radius + 8)
        box = (hx - box_w / 2, top, float(box_w), bottom - top)
        width = int(hx + box_w / 2 + 8)
    height = int(max(TOP + span + (38 if labels else 20), box[1] + box[3] + 4 if box else 0))
    return Dag(nodes, edges, more, int(width), height, radius, labels, gap >= 36, box, ncols)


def _cap(members: List[StepStatus]) -> Tuple[List[StepStatus], List[StepStatus]]:
    """(drawn, folded into "+N more"): steps that need attention first, then by index."""
    if len(members) <= MAX_ROWS:
        return members, []
    order = sorted(members, key=lambda s: (_ATTENTION.get(tone(s.status), 9), s.index))
    keep = {s.index for s in order[:MAX_ROWS - 1]}
    return [s for s in members if s.index in keep], [s for s in members if s.index not in keep]


def _node(step: StepStatus, x: float, y: float, labels: bool) -> Node:
    # a matrix point by its values (its column shows whose): "1 [lr=1e-4]"
    text = step.label[len(step.group):] if step.group else step.label
    label = f"{step.index} {text[:16]}" if labels else ""
    return Node(step, x, y, tone(step.status), step.status == SKIPPED, label)


def _curve(a: Tuple[int, float, float, float], b: Tuple[int, float, float, float], gap: int) -> str:
    """A left-to-right cubic from the right edge of ``a`` to the left edge of ``b``; an edge that
    jumps columns on one row bows upwards so that it does not run through the nodes between."""
    _, x1, y1, h1 = a
    _, x2, y2, h2 = b
    sx, ex = x1 + h1 + 1, x2 - h2 - 2
    bend = (x2 - x1) / 2
    lift = 0.45 * gap if y1 == y2 and b[0] - a[0] > 1 else 0
    return (f"M{sx:.1f},{y1:.1f} C{x1 + bend:.1f},{y1 - lift:.1f} {x2 - bend:.1f},{y2 - lift:.1f} "
            f"{ex:.1f},{y2:.1f}")
