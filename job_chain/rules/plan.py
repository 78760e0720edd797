"""What may start next: the pure rule every advancing job, the watcher, ``resume`` and ``status``
share — which steps are ready, which can never start, whether the run has ended and which exit
handlers run — from each step's planner state (:func:`job_chain.rules.state.planner_state`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Sequence

if TYPE_CHECKING:  # the in-job advance imports this module on every hop: no model, no dataclasses
    from job_chain.spec.model import Chain

# step states, as the planner sees them
SUCCEEDED, FAILED, STOPPED, ACTIVE, RETRY_DUE, NOT_SUBMITTED = (
    "succeeded", "failed", "stopped", "active", "retry-due", "not-submitted")


class Plan:
    """Where a run stands as a graph. (A plain class: every join's hop imports this module, and a
    named tuple costs a fresh python ~0.3 ms to make.)"""

    __slots__ = ("ready", "blocked", "ended", "failed", "handlers")

    def __init__(self, ready: List[int], blocked: Dict[int, str], ended: bool, failed: bool,
                 handlers: List[int]) -> None:
        self.ready = ready  # steps whose dependencies all succeeded and that were never submitted
        self.blocked = blocked  # step -> why it can never start ("needs train")
        self.ended = ended  # no step is going or can still start (handlers aside)
        self.failed = failed  # some step failed (or can never start because one did)
        self.handlers = handlers  # exit handlers that should run now that the run ended


def plan(chain: Chain, states: Dict[int, str], *, stopped: bool = False) -> Plan:
    """Decide from each step's state (``SUCCEEDED``, ``ACTIVE``, …) what starts next.

    Steps excluded from the run (before ``--start``, or added upstream of succeeded steps by a
    resume) count as done. Nothing new is ready in a stopped run; its ``always`` handlers still
    run once it ended.
    """
    graph_steps = [s for s in chain.steps if not s.is_handler]
    done = {s.index for s in graph_steps if s.excluded}

    def state(index: int) -> str:
        return SUCCEEDED if index in done else states.get(index, NOT_SUBMITTED)

    pending = [s for s in graph_steps if state(s.index) == NOT_SUBMITTED]  # only these can be blocked or ready
    blocked: Dict[int, str] = {}
    if pending:  # (in order of depth: a step is blocked by a dependency that is)
        names = {s.index: s.display for s in chain.steps}
        order = depths(chain)
        for step in sorted(pending, key=lambda s: (order.get(s.index, 0), s.index)):
            for dep in step.depends_on:
                if state(dep) in (FAILED, STOPPED) or dep in blocked:
                    blocked[step.index] = f"needs {names[dep]}"
                    break
    ready = [] if stopped else [s.index for s in pending if s.index not in blocked
                                and all(state(d) == SUCCEEDED for d in s.depends_on)]
    seen = {state(s.index) for s in graph_steps}
    ended = not (ACTIVE in seen or RETRY_DUE in seen) and not ready
    if stopped:
        ended = ACTIVE not in seen
    failed = FAILED in seen or bool(blocked and not stopped)
    handlers: List[int] = []
    if ended:
        handlers = [h.index for h in chain.handlers if h.run_on == "always" or (h.run_on == "failure" and failed)]
    return Plan(sorted(ready), blocked, ended, failed, handlers)


def depths(chain: Chain) -> Dict[int, int]:
    """Each step's longest dependency path length (0 for roots), without recursion (chains are long)."""
    return depths_of({s.index: s.depends_on for s in chain.steps})


def depths_of(edges: Dict[int, Sequence[int]]) -> Dict[int, int]:
    """:func:`depths` over ``{step: its dependencies}`` (also what the console draws from a run's status)."""
    deps = {i: [d for d in parents if d in edges] for i, parents in edges.items()}
    waiting = {i: len(d) for i, d in deps.items()}
    children: Dict[int, List[int]] = {}
    for index, parents in deps.items():
        for parent in parents:
            children.setdefault(parent, []).append(index)
    depth = {i: 0 for i, n in waiting.items() if n == 0}
    queue = sorted(depth)
    while queue:
        node = queue.pop()
        for child in children.get(node, ()):
            depth[child] = max(depth.get(child, 0), depth[node] + 1)
            waiting[child] -= 1
            if waiting[child] == 0:
                queue.append(child)
    return depth


def levels(chain: Chain) -> List[List[int]]:
    """The steps in waves: each wave can start once the ones before it succeeded (the dry-run plan)."""
    waves: Dict[int, List[int]] = {}
    order = depths(chain)
    for step in chain.steps:
        if step.is_handler or step.excluded:
            continue
        waves.setdefault(order.get(step.index, 0), []).append(step.index)
    return [waves[k] for k in sorted(waves)]
