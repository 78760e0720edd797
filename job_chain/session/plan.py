"""What a new run would be — where it starts, what it freezes, the exact requests it sends — and the
request a recorded run sends for a step. Nothing here submits or records anything: ``--dry-run``
and the console's request view show these, and :mod:`.start` starts from them.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from job_chain.errors import UsageError
from job_chain.record.records import as_placed
from job_chain.session.context import RunContext, find_run, frozen
from job_chain.spec.model import Chain, Step
from job_chain.util.suggest import did_you_mean


def start_step(ctx: RunContext, first: Union[int, str]) -> Step:
    """The step a run starting at ``first`` (a number, a name, a point's or a matrix's name) starts
    at; a clear error for one that does not exist or is an exit handler."""
    chain = ctx.file.chain
    step = chain.find(first)
    if step is None:
        hint = did_you_mean(str(first), [s.name for s in chain.steps] + [s.display for s in chain.steps])
        raise UsageError(f"--start {first}: no such step{hint}; {ctx.path} has {len(chain.steps)} steps, numbered 0 to "
                         f"{len(chain.steps) - 1} (names: {', '.join(s.name for s in chain.steps[:8])}"
                         f"{', …' if len(chain.steps) > 8 else ''})")
    if step.is_handler:
        raise UsageError(f"--start {first}: {step.name} is an exit handler (runOn: {step.run_on}); it starts by "
                         "itself after the run ended: start at a step of the chain instead")
    return step


def chain_to_freeze(ctx: RunContext, first: Union[int, str] = 0, *, local: Optional[bool] = None,
                    params: Optional[Mapping[str, str]] = None) -> Chain:
    """The chain a new run starting at ``first`` would freeze: steps before it (in a line, and every
    step of a graph with a lower index) are excluded from the run; ``params`` (``--param``) over the
    file's defaults (an unknown name is a :class:`UsageError`); the file as a run of the session's
    place (or of ``local``) sees it."""
    from dataclasses import replace

    from job_chain.spec.params import resolve_params

    start = start_step(ctx, first)
    chain = as_placed(ctx.file.chain, ctx.places.local if local is None else local)
    steps = [replace(s, excluded=f"the run started at step {start.index} ({start.display})")
             if s.index < start.index and not s.is_handler else s for s in chain.steps]
    given = dict(params or {})
    return replace(chain, steps=steps, params=resolve_params(chain.params, given, ctx.path), params_set=given,
                   outputs={})


def waves(ctx: RunContext, first: Union[int, str] = 0) -> Tuple[List[Step], List[Step]]:
    """(the steps a run starting at ``first`` submits at once, the ready ones that wait for a slot:
    ``maxParallel``/``maxRunning``)."""
    from job_chain.record import slots
    from job_chain.rules import plan as plan_

    chain = chain_to_freeze(ctx, first)
    return slots.first_wave(chain, steps_at(chain, plan_.plan(chain, {}).ready))


def roots(ctx: RunContext, first: Union[int, str] = 0) -> List[str]:
    """The names of the steps a run starting at ``first`` submits at once."""
    return [s.name for s in waves(ctx, first)[0]]


def check_reachable(chain: Chain, mode: str, local: bool) -> List[str]:
    """Refuse, before anything is recorded, a run whose jobs could not read its record (a job-mode
    run on a cluster whose step mounts nothing holding the chain file:
    :func:`~job_chain.spec.loader.reachability`); what is only worth saying is returned."""
    from job_chain.spec.loader import reachability

    refuse, say = reachability(chain, mode, local)
    if refuse:
        raise UsageError(refuse[0])
    return say


def check_mode(chain: Chain, mode: str) -> None:
    """Refuse a mode the chain cannot run in, before anything is recorded."""
    from job_chain.record import outputs, slots
    from job_chain.spec import notify as notify_

    if mode == "inline" and chain.engine == "slurm":
        raise UsageError("a Slurm chain keeps what Slurm forgets (its jobs, each node's log and exit) beside the run "
                         "record on the shared filesystem (docs/slurm.md); an --inline run has no record: run it "
                         "without --inline")
    if mode == "inline" and slots.capped(chain):
        raise UsageError("maxParallel and maxRunning need the run record on shared storage to hand slots on "
                         "(docs/graphs.md); an --inline run has none: run it without --inline")
    if mode == "inline" and notify_.references(chain.notify):
        raise UsageError("notify names environment variables ({}), whose values the run record keeps for the "
                         "jobs that send; an --inline run has no record (and a secret never goes into a job's "
                         "command): run it without --inline".format(", ".join(notify_.references(chain.notify))))
    if mode == "watch" and outputs.referenced(chain):
        raise UsageError("steps of this chain use other steps' outputs, which the job's own tail hands on: "
                         "--advance watch does not wrap commands, so run it without --advance watch")


def notify_values(ctx: RunContext, chain: Chain) -> Dict[str, str]:
    """The values of the variables ``notify`` names, from this process's environment (the starting
    user's): :class:`UsageError` naming each one not set, before anything is recorded."""
    import os

    from job_chain.spec import notify as notify_

    return notify_.resolve(chain.notify, os.environ, ctx.path)


def plan(ctx: RunContext, first: Union[int, str] = 0, mode: str = "job",
         params: Optional[Mapping[str, str]] = None) -> List[Dict[str, Any]]:
    """The exact create requests ``start`` would send, one per first step (secrets redacted by the
    caller; the run id is a placeholder)."""
    from job_chain.submit.request import build_request, client_token

    chain = chain_to_freeze(ctx, first, params=params)
    out = []
    for step in steps_named(chain, roots(ctx, first)):
        body = build_request(chain, step.name, "DRY-RUN", 1, mode=mode, host=chain.api_config.get("host"))
        out.append({"step": step.name, "resourcePoolId": chain.pool,
                    "clientToken": client_token("DRY-RUN", step, 1), "body": body})
    return out


def planned_host(ctx: RunContext) -> str:
    """Where a new run would be submitted, for showing a plan without connecting anywhere."""
    if ctx.places.local:
        return "<local server>"
    return ctx.places.explicit.get("host") or ctx.file.chain.api_config.get("host") or "<AIHC host>"


def request(ctx: RunContext, run_id: Optional[str], step: Union[int, str],
            attempt: Optional[int] = None) -> Dict[str, Any]:
    """The create request run ``run_id`` sends (or sent) for ``step``: an attempt already submitted
    as the revision it was submitted with, else as the run's current revision."""
    from job_chain.record.outputs import recorded
    from job_chain.submit.request import build_request

    run = find_run(ctx, run_id)
    chain = frozen(ctx, run)
    found = step_of(chain, step)
    number = attempt or found.first_attempt
    sent = ctx.records.submission(run.run_id, found.name, number)
    if sent and isinstance(sent.get("revision"), int) and 0 < sent["revision"] != chain.revision:
        chain = ctx.records.frozen(run.run_id, revision=sent["revision"]) or chain
        found = chain.named(found.name) or found
    body = build_request(chain, found.name, run.run_id, number, mode=run.mode, host=run.endpoint or None,
                         outputs=recorded(ctx.records, run.run_id))
    return {"resourcePoolId": chain.pool, "body": body}


def checkpoints(chain: Chain, run_id: str, names: Optional[Iterable[str]] = None) -> List[Any]:
    """What is in the checkpoint directory of each step with one (of ``names``; None: every step the
    run may still submit), as run ``run_id`` reads it: a list of
    :class:`~job_chain.rules.checkpoint.Seen`."""
    from job_chain.rules.checkpoint import seen
    from job_chain.spec.params import checkpoint_of

    wanted = None if names is None else set(names)
    out = []
    for step in chain.steps:
        if step.excluded or (wanted is not None and step.name not in wanted):
            continue
        spec = checkpoint_of(chain, step, run_id)
        if spec is not None:
            out.append(seen(step.display, spec))
    return out


def step_of(chain: Chain, step: Union[int, str]) -> Step:
    """A step of ``chain`` by name, display name or number; a clear error listing what exists otherwise."""
    found = chain.find(step)
    if found is None:
        names = ", ".join(f"{s.index} {s.name}" for s in chain.steps[:10])
        hint = did_you_mean(str(step), [s.name for s in chain.steps])
        raise UsageError(f"no step {step!r} in this run{hint} (steps: {names}{', …' if len(chain.steps) > 10 else ''})")
    return found


def steps_named(chain: Chain, names: Iterable[str]) -> List[Step]:
    """The steps of ``chain`` with these names, in that order."""
    keys = list(names)
    return _all_there([chain.named(n) for n in keys], keys)


def steps_at(chain: Chain, indexes: Iterable[int]) -> List[Step]:
    """The steps of ``chain`` at these positions, in that order."""
    keys = list(indexes)
    return _all_there([chain.step(i) for i in keys], keys)


def _all_there(found: List[Optional[Step]], keys: List[Any]) -> List[Step]:
    """Callers pass names and positions the chain itself gave (its plan, a resume's targets), so a
    missing step is a bug, said as such rather than skipped."""
    steps = [s for s in found if s is not None]
    if len(steps) < len(found):
        missing = next(k for k, s in zip(keys, found) if s is None)
        raise LookupError(f"internal: the run's chain has no step {missing!r}")
    return steps
