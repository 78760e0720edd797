"""Where the run page draws each step: columns by dependency depth, one row per step, arrows from
each dependency to its dependent, exit handlers in a dashed column of their own after the graph.

Pure geometry from a run's status; the template only draws the coordinates. Sizes stay bounded:
long lines shrink as they always did, and a wide column shows :data:`MAX_ROWS` rows at most
(the last one "+N more"), keeping the steps that need attention (failed, running) in view.

Names are read whole: a label wraps at ``-``, ``_``, ``.``, ``,`` and before ``[`` into up to
:data:`LABEL_LINES` lines of :data:`LINE_CHARS` characters, columns are as wide as their longest
line, a matrix point keeps its matrix's name, and an edge leaves and enters its nodes level with
them (above their labels) and bends only between the columns' label bands — an edge that skips
columns runs in a lane above every row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from job_chain.rules.plan import depths_of
from job_chain.status.types import SKIPPED, StepStatus
from job_chain.ui.views import tone

MAX_ROWS = 12  # rows drawn per column; the rest of a wide column becomes one "+N more" node
LEFT = 30  # x of the first column
TOP = 20  # y of the first row
MORE_HALF = 30  # half the width of a labelled "+N more" pill
LINE_CHARS = 20  # characters of one label line at most
LABEL_LINES = 3  # lines of one label at most (the rest is in its tooltip)
CHAR_PX = 6.6  # the width of one character of a label (11px sans-serif), for the column width
LINE_PX = 13  # the height of a label line
LANE = 16  # room above the rows for edges that skip columns
_ATTENTION = {"fail": 0, "run": 1, "stop": 2, "wait": 3}  # which steps a capped column keeps in view


@dataclass
class Node:
    step: StepStatus
    x: float
    y: float
    tone: str
    skipped: bool
    label: str  # the whole name as shown ("3 train[lr=1e-4]"); its tooltip
    note: str = ""  # a second label line: "after the run (failure)" for an exit handler
    lines: List[str] = field(default_factory=list)  # the label wrapped
    removed: bool = False  # a step that left the chain in a later revision (history)


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
    wrapped = {s.index: wrap(label_text(s)) for s in steps} if labels else {}
    lines = max([len(w) for w in wrapped.values()] + [1])
    half = max([radius + 2.0] + [len(line) * CHAR_PX / 2 + 4 for w in wrapped.values() for line in w])
    if labels:
        gap = max(gap, int(2 * half + 40))  # a label band per column, and room between for the edges
    row_gap = 44 + (lines - 1) * LINE_PX if labels else 2 * radius + 10
    handler_gap = row_gap + 12 if labels else row_gap  # room for "after the run (failure)" under each handler
    rows = max([min(len(c), MAX_ROWS) for c in columns.values()] + [1])
    span = max((rows - 1) * row_gap, (min(len(handlers), MAX_ROWS) - 1) * handler_gap, 0)
    skips = labels and any(depth.get(d, 0) < depth.get(s.index, 0) - 1 for s in graph for d in edges_in[s.index])
    top = TOP + (LANE if skips else 0)
    left = max(LEFT, int(half + 6)) if labels else LEFT  # the first column's labels inside the drawing
    middle = top + span / 2  # every column is centred on one line: a line stays straight

    def ys(count: int, gap_y: float = row_gap) -> List[float]:
        return [middle + (k - (count - 1) / 2) * gap_y for k in range(count)]

    nodes: List[Node] = []
    more: List[More] = []
    where: Dict[int, Tuple[int, float, float, float]] = {}  # drawn id -> (column, x, y, half width)
    hidden: Dict[int, int] = {}  # step -> column of the "+N more" node that stands for it
    for col in range(ncols):
        x = left + col * gap
        members = columns.get(col, [])
        shown, rest = _cap(members)
        count = len(shown) + (1 if rest else 0)
        for step, y in zip(shown, ys(count)):
            nodes.append(_node(step, x, y, wrapped.get(step.index)))
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
            edges.append(Edge(_curve(where[source], where[target], half if labels else 0, top - radius - 6),
                              source, target, dep in skipped or step.index in skipped))

    last_x = left + max(ncols - 1, 0) * gap
    width = last_x + left + 10
    box = None
    if handlers:
        box_w = max(140, int(2 * half + 8)) if labels else 2 * radius + 16
        hgap = max(130, int(half + box_w / 2 + 30)) if labels else max(gap, 3 * radius + 16)
        hx = last_x + hgap if graph else left + box_w / 2 + 10
        shown, rest = _cap(handlers)
        count = len(shown) + (1 if rest else 0)
        hys = ys(count, handler_gap)
        for step, y in zip(shown, hys):
            node = _node(step, hx, y, wrapped.get(step.index))
            node.note = f"after the run ({step.run_on})"
            nodes.append(node)
        if rest:
            more.append(More(hx, hys[-1], len(rest), [s.index for s in rest]))
        box_top = max(4.0, hys[0] - radius - 10)
        bottom = hys[-1] + (50 + (lines - 1) * LINE_PX if labels else radius + 8)
        box = (hx - box_w / 2, box_top, float(box_w), bottom - box_top)
        width = int(hx + box_w / 2 + 8)
    if labels and graph:
        width = max(width, int(last_x + half + 10))
    height = int(max(top + span + (38 + (lines - 1) * LINE_PX if labels else 20), box[1] + box[3] + 4 if box else 0))
    return Dag(nodes, edges, more, int(width), height, radius, labels, gap >= 36, box, ncols)


def _cap(members: List[StepStatus]) -> Tuple[List[StepStatus], List[StepStatus]]:
    """(drawn, folded into "+N more"): steps that need attention first, then by index."""
    if len(members) <= MAX_ROWS:
        return members, []
    order = sorted(members, key=lambda s: (_ATTENTION.get(tone(s.status), 9), s.index))
    keep = {s.index for s in order[:MAX_ROWS - 1]}
    return [s for s in members if s.index in keep], [s for s in members if s.index not in keep]


def label_text(step: StepStatus) -> str:
    """A node's label: its number and whole name (a matrix point with its matrix's name)."""
    return f"{step.index} {step.label}"


def wrap(text: str, width: int = LINE_CHARS, most: int = LABEL_LINES) -> List[str]:
    """``text`` in lines of ``width`` characters at most, broken after ``-``, ``_``, ``.``, ``,``,
    ``=`` or a space, and a matrix point's values on a line of their own (a piece longer than a
    line is cut); more than ``most`` lines
    end in "…" (the tooltip has the whole name)."""
    import re

    pieces = [p for p in re.split(r"(?<=[-_., =])|(?=\[)", text) if p]
    lines: List[str] = []
    for piece in pieces:
        while len(piece) > width:
            if lines and len(lines[-1]) < width:
                room = width - len(lines[-1])
                lines[-1], piece = lines[-1] + piece[:room], piece[room:]
            else:
                lines.append(piece[:width])
                piece = piece[width:]
        if lines and len(lines[-1]) + len(piece) <= width and not piece.startswith("["):
            lines[-1] += piece
        elif piece:
            lines.append(piece)
    lines = [line.strip() for line in lines if line.strip()]
    if len(lines) > most:
        lines = lines[:most]
        lines[-1] = lines[-1][:width - 1] + "…"
    return lines


def _node(step: StepStatus, x: float, y: float, lines: Optional[List[str]]) -> Node:
    label = label_text(step) if lines is not None else ""
    return Node(step, x, y, tone(step.status), step.status == SKIPPED, label, lines=list(lines or []),
                removed=bool(step.removed))


def _curve(a: Tuple[int, float, float, float], b: Tuple[int, float, float, float], half: float, lane: float) -> str:
    """From the right edge of ``a`` to the left edge of ``b``: level with each node out of and into
    its label band (``half`` each side of a column: labels hang below their node), a cubic between
    the bands; an edge that skips columns goes up into the ``lane`` above every row and along it."""
    _, x1, y1, h1 = a
    _, x2, y2, h2 = b
    sx, ex = x1 + h1 + 1, x2 - h2 - 2
    ax, bx = max(sx, x1 + half), min(ex, x2 - half)
    if b[0] - a[0] > 1 and half:
        return (f"M{sx:.1f},{y1:.1f} L {ax:.1f},{y1:.1f} C{ax + 14:.1f},{y1:.1f} {ax + 6:.1f},{lane:.1f} "
                f"{ax + 20:.1f},{lane:.1f} L {bx - 20:.1f},{lane:.1f} C{bx - 6:.1f},{lane:.1f} {bx - 14:.1f},{y2:.1f} "
                f"{bx:.1f},{y2:.1f} L {ex:.1f},{y2:.1f}")
    if b[0] - a[0] > 1 and y1 == y2:  # no labels: bow upwards over the nodes between
        lift = 0.45 * (x2 - x1) / (b[0] - a[0])
        bend = (x2 - x1) / 2
        return (f"M{sx:.1f},{y1:.1f} C{x1 + bend:.1f},{y1 - lift:.1f} {x2 - bend:.1f},{y2 - lift:.1f} "
                f"{ex:.1f},{y2:.1f}")
    bend = (bx - ax) / 2
    return (f"M{sx:.1f},{y1:.1f} L {ax:.1f},{y1:.1f} C{ax + bend:.1f},{y1:.1f} {bx - bend:.1f},{y2:.1f} "
            f"{bx:.1f},{y2:.1f} L {ex:.1f},{y2:.1f}")
