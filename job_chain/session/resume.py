"""``resume``: where a fix goes in. The file is compared with the frozen run by step name, the
difference applied to what did not succeed (``--rerun`` for what did), and kept as a new revision."""

from __future__ import annotations

import os
import shlex
from typing import Any, Dict, List, Optional, Tuple

from job_chain.errors import RunStillActive, UsageError
from job_chain.session.runs import ResumePlan, Run, Submitted
from job_chain.spec.model import Chain
from job_chain.status.summarize import resume_targets, summarize


class ResumeMixin:
    """The resume part of :class:`~job_chain.session.ChainSession`."""

    def preview_resume(self, run_id: Optional[str] = None, *, rerun: Tuple[str, ...] = (),
                       params: Optional[Dict[str, str]] = None) -> ResumePlan:
        """What :meth:`resume` would do — the file's changes by step name, and what it would submit —
        without doing it. :class:`RunStillActive` while a step is going."""
        plan, _ = self._resume_plan(self.run(run_id), rerun, params or {})
        return plan

    def _resume_plan(self, run: Run, rerun: Tuple[str, ...], params: Dict[str, str]) -> Tuple[ResumePlan, Chain]:
        from dataclasses import replace

        from job_chain.record import slots
        from job_chain.rules.revise import revise
        from job_chain.spec.params import resolve_params

        status = self.status(run.run_id)
        active = [s for s in status.steps if s.active]
        if active:
            raise RunStillActive(
                f"run {run.run_id} is still going ({active[0].name} is {active[0].status}); stop it first "
                f"with 'job-chain stop {shlex.quote(self.path)} --run {run.run_id}'", run.run_id)
        old = self.frozen(run)
        note = ""
        if self._from_file and not os.path.exists(self.path):
            new, note = None, f"{self.path} is gone: the run resumes as it was frozen"
        else:
            self.reload()  # raises the file's problems: a fix must be valid to go in
            new = self.chain_for(run.local)
        rerun = tuple(self._rerun_names(new or old, rerun))
        if new is not None or params:  # the run keeps the values it was given; --param sets new ones
            base = new or old
            defaults = base.params
            given = {k: v for k, v in old.params_set.items() if k in defaults}
            resolve_params(defaults, params, self.path)  # an unknown --param name is an error
            given.update(params)
            new = replace(base, params={**defaults, **given}, params_set=given)
        chain, changes, revision = old, [], run.revision
        if new is not None and run.revision:
            latest = {s.name: max([a.attempt for a in s.attempts + s.history] or [0]) for s in status.steps}
            done = {s.name for s in status.steps if s.succeeded or (s.status == "skipped" and old.named(s.name)
                                                                      and old.named(s.name).excluded)}  # type: ignore
            candidate, changes = revise(old, new, done=done, latest=latest, rerun=rerun, revision=run.revision + 1)
            if any(c.applied for c in changes) or rerun:
                chain, revision = candidate, run.revision + 1
                chain.digest = ""
        if chain is not old:
            status = summarize(chain, [a for s in status.steps for a in s.attempts + s.history],
                               self.records.facts(run.run_id), run_id=run.run_id)
        targets = resume_targets(status, chain)
        now, later = slots.first_wave(chain, [chain.named(n) for n, _ in targets])  # type: ignore[misc]
        attempt = dict(targets)
        return ResumePlan(run.run_id, revision, changes, [(s.name, attempt[s.name]) for s in now], note,
                          waiting=[(s.name, attempt[s.name]) for s in later]), chain

    def _rerun_names(self, chain: Chain, rerun: Tuple[str, ...]) -> List[str]:
        """``--rerun`` names: a step's name or display name, or a matrix's name (all its points)."""
        out: List[str] = []
        for name in rerun:
            points = chain.points(name)
            found = [s.name for s in points] or [s.name for s in [chain.find(name)] if s is not None]
            if not found:
                raise UsageError(f"--rerun {name}: no step {name!r} in {self.path}")
            out.extend(found)
        return out

    def resume(self, run_id: Optional[str] = None, *, mode: Optional[str] = None,
               rerun: Tuple[str, ...] = (), params: Optional[Dict[str, str]] = None) -> List[Submitted]:
        """Apply the chain file's changes to the run (by step name, to steps that did not succeed;
        ``rerun`` names succeeded steps to run again with what follows them; ``params`` set parameters
        for the steps that have not succeeded), keep the result as a new frozen revision, and submit
        every step that did not succeed and whose dependencies did (as many as ``maxParallel`` and
        ``maxRunning`` allow at once: the others start as slots free up).

        Succeeded steps are kept. Never duplicates: a step an interrupted submit or a failed
        advance may have created is submitted with the same client token. Exit handlers run again
        when the resumed run ends, and notifications go out again. :class:`RunStillActive` while a
        step is going; ``[]`` when there is nothing to submit.
        """
        from job_chain.spec.frozen import freeze

        run = self.run(run_id)
        plan, chain = self._resume_plan(run, tuple(rerun), dict(params or {}))
        if not plan.targets:
            return []
        self.check_mode(chain, mode or run.mode)
        self.records.clear_stopped(run.run_id)
        self.records.clear_advance_failures(run.run_id)
        chosen = mode or run.mode
        status = self.status(run.run_id)
        record = dict(self.records.require_run(run.run_id))
        handlers_ran = any(s.submitted for s in status.steps if s.is_handler)
        changes: Dict[str, Any] = {"mode": chosen, "round": int(record.get("round") or 0) + (1 if handlers_ran else 0),
                                   "epoch": int(record.get("epoch") or 0) + 1}  # every slot free again
        if plan.revision != run.revision:
            why = "resumed with " + ", ".join(c.line()[2:] for c in plan.changes if c.applied)
            if rerun:
                why += f"; --rerun {', '.join(rerun)}"
            changes["digest"] = self.records.freeze(run.run_id, freeze(chain), revision=plan.revision, reason=why,
                                                    changes=[c.as_json() for c in plan.changes])
            changes["revision"] = plan.revision
        self.records.update_run(run.run_id, **changes)
        run = self.run(run.run_id)
        chain = self.frozen(run)
        targets = plan.targets + plan.waiting
        return self._start_ready(run, chain, [chain.named(n) for n, _ in targets], dict(targets), chosen,  # type: ignore
                                 "resume")

