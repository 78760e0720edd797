"""``resume``: where a fix goes in. The file is compared with the frozen run by step name, the
difference applied to what did not succeed (``--rerun`` for what did), and kept as a new revision.

:func:`preview` decides all of it without changing anything; :func:`apply` records what it
decided and submits.
"""

from __future__ import annotations

import shlex
from typing import Any, Dict, List, Optional, Tuple

from job_chain.errors import RunStillActive, UsageError
from job_chain.record.records import as_placed
from job_chain.rules.revise import Change
from job_chain.session.context import RunContext, find_run, frozen
from job_chain.session.look import status
from job_chain.session.plan import check_mode, check_reachable, checkpoints, notify_values, steps_named
from job_chain.session.runs import ResumePlan, Run, Submitted
from job_chain.spec.model import Chain
from job_chain.status.summarize import resume_targets, summarize
from job_chain.status.types import StepStatus
from job_chain.util.suggest import did_you_mean


def preview(ctx: RunContext, run: Run, rerun: Tuple[str, ...], params: Dict[str, str],
            as_frozen: bool = False, renamed: Optional[Dict[str, str]] = None) -> Tuple[ResumePlan, Chain]:
    """(what a resume of ``run`` would do, the chain it would run): the file's changes by step name
    and what it would submit (a going run: ``going``, nothing to submit; :class:`RunStillActive` for
    ``rerun``/``params`` then). ``as_frozen``: the
    file is not read; the run continues as frozen (``--rerun`` and ``--param`` still apply)."""
    from job_chain.record import slots
    from job_chain.rules.revise import revise

    now = status(ctx, run.run_id)
    active = [s for s in now.steps if s.active]
    if active and (rerun or params or renamed):
        raise RunStillActive(
            f"run {run.run_id} is still going ({active[0].name} is {active[0].status}): "
            f"{'--rerun' if rerun else '--param' if params else '--rename'} waits until it ended; stop it first with "
            f"'job-chain stop {shlex.quote(ctx.path)} --run {run.run_id}'", run.run_id)
    old = frozen(ctx, run)
    note = ""
    new: Optional[Chain]
    if as_frozen:
        new, note = None, (f"run {run.run_id} continues as frozen (revision {run.revision}): the chain file's "
                           f"changes are not read (name it to apply them: job-chain resume {shlex.quote(ctx.path)} "
                           f"--run {run.run_id})")
    elif ctx.file.gone():
        new, note = None, f"{ctx.path} is gone: the run resumes as it was frozen"
    else:
        new = as_placed(ctx.file.reload(), run.local)  # raises the file's problems: a fix must be valid to go in
    rerun = tuple(rerun_names(ctx, new or old, rerun))
    if new is not None or params or rerun:
        new = _with_params(old, new or old, params, ctx.path)
    changes: List[Change] = []
    chain, revision = old, run.revision
    if new is not None and run.revision:
        latest = {s.name: max([a.attempt for a in s.attempts + s.history] or [0]) for s in now.steps}
        done = {s.name for s in now.steps if _kept(old, s)}
        held = {s.name: _why_held(s) for s in now.steps if s.submitted} if active else None
        candidate, changes = revise(old, new, done=done, latest=latest, rerun=rerun, revision=run.revision + 1,
                                    held=held, renamed=_renames(old, new, renamed or {}))
        if any(c.applied for c in changes) or rerun:
            chain, revision = candidate, run.revision + 1
            chain.digest = ""
    if chain is not old:
        now = summarize(chain, [a for s in now.steps for a in s.attempts + s.history],
                        ctx.records.facts(run.run_id), run_id=run.run_id)
    if active:  # the run goes on by itself: nothing is submitted or stopped from here
        going = f"run {run.run_id} is going ({active[0].name} is {active[0].status}): nothing is stopped or submitted"
        return ResumePlan(run.run_id, revision, changes, [], f"{note}; {going}" if note else going,
                          going=True), chain
    targets = resume_targets(now, chain)
    first, later = slots.first_wave(chain, steps_named(chain, [n for n, _ in targets]))
    attempt = dict(targets)
    return ResumePlan(run.run_id, revision, changes, [(s.name, attempt[s.name]) for s in first], note,
                      waiting=[(s.name, attempt[s.name]) for s in later],
                      checkpoints=checkpoints(chain, run.run_id, [s.name for s in now.steps if not s.succeeded])), chain


def _renames(old: Chain, new: Chain, renamed: Dict[str, str]) -> Dict[str, str]:
    """``--rename OLD=NEW`` checked against the run and the file: {new name: old name}."""
    out: Dict[str, str] = {}
    for was, now in renamed.items():
        if old.named(was) is None or old.named(was).removed_in:  # type: ignore[union-attr]
            raise UsageError(f"--rename {was}={now}: the run has no step {was!r} (its steps: "
                             f"{', '.join(s.name for s in old.steps if not s.removed_in)})")
        if new.named(was) is not None:
            raise UsageError(f"--rename {was}={now}: {was!r} is still in the chain file; a rename is for a step "
                             "whose name the file no longer has")
        if new.named(now) is None or old.named(now) is not None:
            raise UsageError(f"--rename {was}={now}: {now!r} must be a step the chain file has and the run does not")
        out[now] = was
    return out


def _why_held(step: StepStatus) -> str:
    """Why a change cannot reach a step of a going run: it has been submitted in it."""
    if step.succeeded:
        return "already succeeded"
    return f"it is {step.status.lower()}" if step.active else f"already submitted ({step.status.lower()})"


def _with_params(old: Chain, base: Chain, params: Dict[str, str], path: str) -> Chain:
    """``base`` with the parameter values the run was given (``old``), and ``params`` set anew."""
    from dataclasses import replace

    from job_chain.spec.params import resolve_params

    defaults = base.params
    given = {k: v for k, v in old.params_set.items() if k in defaults}
    resolve_params(defaults, params, path)  # an unknown --param name is an error
    given.update(params)
    return replace(base, params={**defaults, **given}, params_set=given)


def file_changes(ctx: RunContext, run: Run, reread: bool = True) -> List[Change]:
    """How the chain file differs from the revision ``run`` runs, by step name (what a resume would
    compare); [] when they match, or when the file is gone or cannot be used (said elsewhere).
    ``reread=False``: the file as the session read it (a command that opened it a moment ago; a
    5,000-step file is not validated twice)."""
    from job_chain.errors import ChainFileInvalid
    from job_chain.rules.revise import revise

    if not run.revision or ctx.file.gone():
        return []
    if not reread and ctx.file.matches(run.run_id, run.revision):
        return []  # found so before, and the file and its scripts read the same: not compared again
    try:
        new = as_placed(ctx.file.reload() if reread else ctx.file.chain, run.local)
    except ChainFileInvalid:
        return []
    old = frozen(ctx, run)
    new = _with_params(old, new, {}, ctx.path)
    changes = revise(old, new, done=set(), latest={}, rerun=(), revision=run.revision + 1)[1]
    if not changes:
        ctx.file.keep_match(run.run_id, run.revision)
    return changes


def revise_going(ctx: RunContext, run: Run, plan: ResumePlan, chain: Chain) -> ResumePlan:
    """Keep ``plan``'s revision of a going run, stopping and submitting nothing; then say which of
    its changes may not reach their step after all (``plan.changes`` updated, and returned).

    Exactly once holds whatever a hop read (:func:`~job_chain.rules.revise.revise` keeps every
    token). Which content a step runs: a hop writes its success marker, then reads the run's
    revision (``hop/advance.finish``); this writes the revision, then reads the record again. So a
    hop that read the previous revision wrote its marker before this looks, and every change to a
    step that became ready (or was submitted) meanwhile is reported as one that may not apply.
    """
    from job_chain.spec.frozen import freeze

    if plan.revision == run.revision:
        return plan
    old = frozen(ctx, run)
    secrets = notify_values(ctx, chain)  # before the revision that names them (a variable not set refuses)
    if secrets:
        ctx.records.save_notify_secrets(run.run_id, secrets)
    with ctx.records.start_lock():  # one resume at a time writes the next revision
        current = find_run(ctx, run.run_id)
        if current.revision != run.revision:
            raise UsageError(f"run {run.run_id} was revised meanwhile (it is at revision {current.revision}): "
                             "resume again")
        why = "resumed while going with " + ", ".join(c.line()[2:] for c in plan.changes if c.applied)
        digest = ctx.records.freeze(run.run_id, freeze(chain), revision=plan.revision, reason=why,
                                    changes=[c.as_json() for c in plan.changes])
        ctx.records.update_run(run.run_id, digest=digest, revision=plan.revision)
    after = status(ctx, run.run_id)  # read after the write: what became ready meanwhile
    by_name = {s.name: s for s in after.steps}
    for change in plan.changes:
        where = old if change.kind == "removed" else chain
        step = where.find(change.name)
        if not change.applied or step is None or step.is_handler:
            continue
        state = by_name.get(step.name)
        needs = [where.step(d) for d in step.depends_on]
        ready = all(d is not None and d.name in by_name and _succeeded(ctx, run.run_id, by_name[d.name])
                    for d in needs)
        if (state is not None and state.submitted) or ready:
            change.note = ("it became ready while the change was written: it may run as before "
                           "(its submission record keeps the revision it was made from)")
    return plan


def _succeeded(ctx: RunContext, run_id: str, step: StepStatus) -> bool:
    """The step succeeded, or its tail has written its marker (its job still runs the tail)."""
    return step.succeeded or bool(step.attempt and ctx.records.succeeded(run_id, step.name, step.attempt))


def _kept(old: Chain, step: StepStatus) -> bool:
    """A step a resume leaves as it is: it succeeded, or the run excluded it (started after it)."""
    frozen_step = old.named(step.name)
    return step.succeeded or (step.status == "skipped" and frozen_step is not None and bool(frozen_step.excluded))


def rerun_names(ctx: RunContext, chain: Chain, rerun: Tuple[str, ...]) -> List[str]:
    """``--rerun`` names: a step's name or display name, or a matrix's name (all its points)."""
    out: List[str] = []
    for name in rerun:
        points = chain.points(name)
        found = [s.name for s in points] or [s.name for s in [chain.find(name)] if s is not None]
        if not found:
            raise UsageError(f"--rerun {name}: no step {name!r} in {ctx.path}"
                             f"{did_you_mean(name, [s.name for s in chain.steps])}")
        out.extend(found)
    return out


def apply(ctx: RunContext, run_id: Optional[str] = None, *, mode: Optional[str] = None,
          rerun: Tuple[str, ...] = (), params: Optional[Dict[str, str]] = None,
          as_frozen: bool = False, renamed: Optional[Dict[str, str]] = None) -> List[Submitted]:
    """Resume the run (see :meth:`job_chain.session.ChainSession.resume`): keep what :func:`preview`
    decides as a new revision, and submit its targets. A going run: see :func:`revise_going`."""
    run = find_run(ctx, run_id)
    plan, chain = preview(ctx, run, tuple(rerun), dict(params or {}), as_frozen, renamed)
    if plan.going:
        revise_going(ctx, run, plan, chain)
        return []
    return _submit(ctx, run, plan, chain, mode, rerun)


def revise_running(ctx: RunContext, run_id: Optional[str] = None) -> ResumePlan:
    """A going run: keep the file's changes it can take now as a new revision (nothing stopped or
    submitted); the plan says what was applied and what was not, and why."""
    run = find_run(ctx, run_id)
    plan, chain = preview(ctx, run, (), {})
    return revise_going(ctx, run, plan, chain) if plan.going else plan


def _submit(ctx: RunContext, run: Run, plan: ResumePlan, chain: Chain, mode: Optional[str],
            rerun: Tuple[str, ...]) -> List[Submitted]:
    from job_chain.spec.frozen import freeze

    if not plan.targets:
        return []
    check_mode(chain, mode or run.mode)
    check_reachable(chain, mode or run.mode, run.local)
    secrets = notify_values(ctx, chain)  # read again: a rotated secret goes in with the resume
    if secrets:
        ctx.records.save_notify_secrets(run.run_id, secrets)
    ctx.records.clear_stopped(run.run_id)
    ctx.records.clear_advance_failures(run.run_id)
    chosen = mode or run.mode
    now = status(ctx, run.run_id)
    record = dict(ctx.records.require_run(run.run_id))
    round_ = ctx.records.round(run.run_id, record)
    # a new round once this one's end was acted on (its handlers ran, or it was notified): each
    # round's handlers and notifications happen once, and a round that ended unseen is not skipped
    ended = any(s.submitted for s in now.steps if s.is_handler) or ctx.records.notified(run.run_id, round_)
    changes: Dict[str, Any] = {"mode": chosen, "round": round_ + (1 if ended else 0),
                               "epoch": int(record.get("epoch") or 0) + 1}  # every slot free again
    if plan.revision != run.revision:
        said = [c.line()[2:] for c in plan.changes if c.applied and c.kind != "rerun"]
        said += [f"--rerun {', '.join(rerun)}"] if rerun else []
        why = "resumed with " + "; ".join(said)
        changes["digest"] = ctx.records.freeze(run.run_id, freeze(chain), revision=plan.revision, reason=why,
                                               changes=[c.as_json() for c in plan.changes])
        changes["revision"] = plan.revision
    ctx.records.update_run(run.run_id, **changes)
    run = find_run(ctx, run.run_id)
    carried = ctx.places.carried(run)
    if carried:  # the keys this resume connects with (rotated, or a run recorded before runs carried them)
        ctx.records.save_credentials(run.run_id, carried)
    chain = frozen(ctx, run)
    targets = plan.targets + plan.waiting
    from job_chain.session.start import start_ready

    return start_ready(ctx, run, chain, steps_named(chain, [n for n, _ in targets]), dict(targets), chosen, "resume")
