"""The run page's graph layout, in-process: columns by dependency depth, edges, handlers, caps."""

from __future__ import annotations

from typing import List, Optional, Sequence

from job_chain.status.types import SKIPPED, StepStatus
from job_chain.ui.dag import MAX_ROWS, layout


def step(index: int, deps: Sequence[int] = (), status: str = "Succeeded", run_on: Optional[str] = None) -> StepStatus:
    return StepStatus(index, f"s{index}", status=status, depends_on=list(deps), run_on=run_on)


def line(n: int) -> List[StepStatus]:
    return [step(i, [i - 1] if i else []) for i in range(n)]


def xy(dag, index):  # type: ignore[no-untyped-def]
    node = next(n for n in dag.nodes if n.step.index == index)
    return node.x, node.y


def test_a_line_stays_a_straight_line_left_to_right() -> None:
    dag = layout(line(5))
    assert len(dag.nodes) == 5 and dag.columns == 5
    assert {n.y for n in dag.nodes} == {dag.nodes[0].y}
    xs = [xy(dag, i)[0] for i in range(5)]
    assert xs == sorted(xs) and len(set(xs)) == 5
    assert [(e.source, e.target) for e in dag.edges] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert dag.labels and dag.arrows and dag.handler_box is None


def test_a_500_step_line_keeps_the_compact_size() -> None:
    dag = layout(line(500))
    assert dag.height <= 40 and dag.radius == 5 and not dag.labels
    assert dag.width <= 40 + 499 * 14 + 40  # what the line drawing always took
    assert len(dag.nodes) == 500 and len(dag.edges) == 499 and not dag.more


def test_diamond_puts_the_branches_in_one_column_one_row_each() -> None:
    dag = layout([step(0), step(1, [0]), step(2, [0]), step(3, [1, 2])])
    assert dag.columns == 3
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = (xy(dag, i) for i in range(4))
    assert x0 < x1 == x2 < x3
    assert y1 != y2 and y0 == y3 == (y1 + y2) / 2  # the join sits between its branches
    assert sorted((e.source, e.target) for e in dag.edges) == [(0, 1), (0, 2), (1, 3), (2, 3)]
    for e in dag.edges:  # each edge starts at its dependency's side and ends at its dependent's
        sx, sy = xy(dag, e.source)
        tx, ty = xy(dag, e.target)
        start, end = e.path[1:].split(" ")[0], e.path.split(" ")[-1]
        assert float(start.split(",")[0]) > sx and float(start.split(",")[1]) == sy
        assert float(end.split(",")[0]) < tx and float(end.split(",")[1]) == ty


def test_depth_is_the_longest_path_and_a_skipping_edge_bows() -> None:
    dag = layout([step(0), step(1, [0]), step(2, [0, 1])])  # 0 -> 2 jumps over 1 on the same row
    assert xy(dag, 0)[0] < xy(dag, 1)[0] < xy(dag, 2)[0]
    jump = next(e for e in dag.edges if (e.source, e.target) == (0, 2))
    ys = [float(p.split(",")[1]) for p in jump.path.replace("M", "").replace("C", "").split(" ") if "," in p]
    assert min(ys) < xy(dag, 0)[1] - dag.radius  # in a lane above the nodes it jumps over


def test_long_names_wrap_whole_in_columns_as_wide_as_their_labels() -> None:
    from job_chain.ui.dag import CHAR_PX, LINE_CHARS

    names = ["pretrain-team-llama-9b-convert-v4", "pretrain-team-llama-9b-preprocess-v4",
             "pretrain-team-llama-9b-train-v4"]
    steps = [StepStatus(i, n, status="Succeeded", depends_on=[i - 1] if i else []) for i, n in enumerate(names)]
    steps.append(StepStatus(3, "eval-9f1c", status="Succeeded", depends_on=[2], display="eval[lr=1e-4,seed=1]",
                            group="eval", point={"lr": "1e-4", "seed": "1"}))
    dag = layout(steps)
    for node, name in zip(dag.nodes, names + ["eval[lr=1e-4,seed=1]"]):
        assert "".join(node.lines) == f"{node.step.index} {name}" and all(len(x) <= LINE_CHARS for x in node.lines)
    assert dag.nodes[3].lines == ["3 eval", "[lr=1e-4,seed=1]"]  # a matrix point keeps its matrix's name
    widest = max(len(x) for n in dag.nodes for x in n.lines) * CHAR_PX
    xs = sorted({n.x for n in dag.nodes})
    assert all(b - a > widest for a, b in zip(xs, xs[1:]))  # neighbouring labels never meet
    for e in dag.edges:  # level with its nodes until past the source's label band and from the target's
        sx, sy = xy(dag, e.source)
        points = [tuple(map(float, p.split(","))) for p in e.path.replace("M", "").replace("C", "").split(" ")
                  if "," in p]
        assert all(py == sy for px, py in points if px <= sx + widest / 2)


def test_fan_out_of_100_is_capped_with_plus_n_more_keeping_failures_in_view() -> None:
    steps = [step(0)] + [step(i, [0], status="Failed" if i == 77 else "Succeeded") for i in range(1, 101)]
    steps.append(step(101, list(range(1, 101)), status=SKIPPED))
    dag = layout(steps)
    middle = [n for n in dag.nodes if n.x == xy(dag, 1)[0]]
    assert len(middle) == MAX_ROWS - 1 and 77 in {n.step.index for n in middle}
    assert [m.count for m in dag.more] == [100 - (MAX_ROWS - 1)]
    assert len(dag.edges) == 2 * MAX_ROWS  # root -> each drawn row and "+N more", each row -> the join
    assert dag.height < 20 + MAX_ROWS * 60 + 60 and dag.width < 400
    assert all(e.dim for e in dag.edges if e.target == 101)


def test_exit_handlers_are_drawn_apart_after_the_graph_without_edges() -> None:
    dag = layout([step(0), step(1, [0]), step(2, [0]), step(3, run_on="failure", status=SKIPPED),
                  step(4, run_on="always")])
    assert dag.handler_box is not None
    bx, _, bw, bh = dag.handler_box
    handlers = [n for n in dag.nodes if n.step.run_on]
    assert [n.note for n in handlers] == ["after the run (failure)", "after the run (always)"]
    assert all(bx < n.x < bx + bw and n.x > xy(dag, 1)[0] for n in handlers)
    assert bx + bw <= dag.width and bh < dag.height
    assert all(3 not in (e.source, e.target) and 4 not in (e.source, e.target) for e in dag.edges)
    assert dag.columns == 2


def test_skipped_steps_are_marked_and_their_edges_dimmed() -> None:
    dag = layout([step(0, status="Failed"), step(1, [0], status=SKIPPED), step(2, [1], status=SKIPPED)])
    assert [n.skipped for n in dag.nodes] == [False, True, True]
    assert [n.tone for n in dag.nodes] == ["fail", "none", "none"]
    assert all(e.dim for e in dag.edges)
