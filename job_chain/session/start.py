"""What a new run would be: where it starts, what it freezes, the exact requests it sends."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from job_chain.errors import UsageError
from job_chain.session.runs import Run, Submitted
from job_chain.spec.model import Chain, Step


class PlanMixin:
    """The planning part of :class:`~job_chain.session.ChainSession`."""

    def _start_step(self, first: Union[int, str]) -> Step:
        chain = self.chain
        step = chain.find(first)
        if step is None:
            raise UsageError(f"--start {first}: {self.path} has {len(chain.steps)} steps, numbered 0 to "
                             f"{len(chain.steps) - 1} (names: {', '.join(s.name for s in chain.steps[:8])}"
                             f"{', …' if len(chain.steps) > 8 else ''})")
        if step.is_handler:
            raise UsageError(f"--start {first}: {step.name} is an exit handler (runOn: {step.run_on}); it starts by "
                             "itself after the run ended: start at a step of the chain instead")
        return step

    def run_chain(self, first: Union[int, str] = 0, *, local: Optional[bool] = None,
                  params: Optional[Mapping[str, str]] = None) -> Chain:
        """The chain a new run starting at ``first`` would freeze: steps before it (in a line, and
        every step of a graph with a lower index) are excluded from the run; ``params`` (``--param``)
        over the file's defaults (an unknown name is a :class:`UsageError`)."""
        from dataclasses import replace

        from job_chain.spec.params import resolve_params

        start = self._start_step(first)
        chain = self.chain_for(self._local if local is None else local)
        steps = [replace(s, excluded=f"the run started at step {start.index} ({start.display})")
                 if s.index < start.index and not s.is_handler else s for s in chain.steps]
        given = dict(params or {})
        return replace(chain, steps=steps, params=resolve_params(chain.params, given, self.path), params_set=given,
                       outputs={})

    def roots(self, first: Union[int, str] = 0) -> List[str]:
        """The names of the steps a run starting at ``first`` submits at once (with ``maxParallel`` or
        ``maxRunning``, as many as the caps allow; the others wait for a slot)."""
        return [s.name for s in self.waves(first)[0]]

    def waves(self, first: Union[int, str] = 0) -> Tuple[List[Step], List[Step]]:
        """(the steps a run starting at ``first`` submits at once, the ready ones that wait for a slot)."""
        from job_chain.record import slots
        from job_chain.rules import plan as plan_

        chain = self.run_chain(first)
        return slots.first_wave(chain, [chain.step(i) for i in plan_.plan(chain, {}).ready])  # type: ignore[misc]

    def _start_ready(self, run: Run, chain: Chain, ready: Sequence[Step], attempts: Mapping[str, int],
                     mode: str, origin: str) -> List[Submitted]:
        """Submit ``ready``: each capped step (maxParallel, maxRunning) through a slot, as many as are
        free, the others directly."""
        from job_chain.record import slots

        done = [self._submit(run, s.name, attempts.get(s.name, s.first_attempt), mode) for s in ready  # type: ignore
                if not slots.pools(chain, s)]
        if len(done) < len(ready):
            def submit(step: Step, attempt: int) -> str:  # a failure is raised to the caller: run, resume
                done.append(self._submit(run, step.name, attempt, mode))  # type: ignore[attr-defined]
                return slots.SUBMITTED

            slots.fill(chain, self.records, run.run_id, ready, attempts, submit, origin)  # type: ignore[attr-defined]
        return done

    def check_mode(self, chain: Chain, mode: str) -> None:
        """Refuse a mode the chain cannot run in, before anything is recorded."""
        from job_chain.record import outputs, slots

        if mode == "inline" and slots.capped(chain):
            raise UsageError("maxParallel and maxRunning need the run record on shared storage to hand slots on "
                             "(docs/graphs.md); an --inline run has none: run it without --inline")
        if mode == "watch" and outputs.referenced(chain):
            raise UsageError("steps of this chain use other steps' outputs, which the job's own tail hands on: "
                             "--advance watch does not wrap commands, so run it without --advance watch")

    def plan(self, first: Union[int, str] = 0, mode: str = "job",
             params: Optional[Mapping[str, str]] = None) -> List[Dict[str, Any]]:
        """The exact create requests ``start`` would send, one per first step (secrets redacted by the
        caller; the run id is a placeholder)."""
        from job_chain.submit.request import build_request, client_token

        chain = self.run_chain(first, params=params)
        out = []
        for name in self.roots(first):
            body = build_request(chain, name, "DRY-RUN", 1, mode=mode, host=chain.api_config.get("host"))
            out.append({"step": name, "resourcePoolId": chain.pool,
                        "clientToken": client_token("DRY-RUN", chain.named(name), 1), "body": body})  # type: ignore
        return out

    def request(self, run_id: Optional[str], step: Union[int, str], attempt: Optional[int] = None) -> Dict[str, Any]:
        """The create request run ``run_id`` sends (or sent) for ``step``: an attempt already
        submitted as the revision it was submitted with, else as the run's current revision."""
        from job_chain.record.outputs import recorded
        from job_chain.submit.request import build_request

        run = self.run(run_id)  # type: ignore[attr-defined]
        chain = self.frozen(run)  # type: ignore[attr-defined]
        found = self.step_of(chain, step)
        number = attempt or found.first_attempt
        sent = self.records.submission(run.run_id, found.name, number)  # type: ignore[attr-defined]
        if sent and isinstance(sent.get("revision"), int) and 0 < sent["revision"] != chain.revision:
            chain = self.records.frozen(run.run_id, revision=sent["revision"]) or chain  # type: ignore[attr-defined]
            found = chain.named(found.name) or found
        body = build_request(chain, found.name, run.run_id, number, mode=run.mode, host=run.endpoint or None,
                             outputs=recorded(self.records, run.run_id))  # type: ignore[attr-defined]
        return {"resourcePoolId": chain.pool, "body": body}

    def step_of(self, chain: Chain, step: Union[int, str]) -> Step:
        """A step of ``chain`` by name, display name or number; a clear error listing what exists otherwise."""
        found = chain.find(step)
        if found is None:
            names = ", ".join(f"{s.index} {s.name}" for s in chain.steps[:10])
            raise UsageError(f"no step {step!r} in this run (steps: {names}{', …' if len(chain.steps) > 10 else ''})")
        return found

