"""What a new run would be: where it starts, what it freezes, the exact requests it sends."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from job_chain.chain.model import Chain, Step
from job_chain.errors import UsageError


class PlanMixin:
    """The planning part of :class:`~job_chain.session.ChainSession`."""

    def _start_step(self, first: Union[int, str]) -> Step:
        chain = self.chain
        step = chain.named(first) if isinstance(first, str) and not first.isdigit() else chain.step(int(first))
        if step is None:
            raise UsageError(f"--start {first}: {self.path} has {len(chain.steps)} steps, numbered 0 to "
                             f"{len(chain.steps) - 1} (names: {', '.join(s.name for s in chain.steps[:8])}"
                             f"{', …' if len(chain.steps) > 8 else ''})")
        if step.is_handler:
            raise UsageError(f"--start {first}: {step.name} is an exit handler (runOn: {step.run_on}); it starts by "
                             "itself after the run ended: start at a step of the chain instead")
        return step

    def run_chain(self, first: Union[int, str] = 0, *, local: Optional[bool] = None) -> Chain:
        """The chain a new run starting at ``first`` would freeze: steps before it (in a line, and
        every step of a graph with a lower index) are excluded from the run."""
        from dataclasses import replace

        start = self._start_step(first)
        chain = self.chain_for(self._local if local is None else local)
        steps = [replace(s, excluded=f"the run started at step {start.index} ({start.name})")
                 if s.index < start.index and not s.is_handler else s for s in chain.steps]
        return replace(chain, steps=steps)

    def roots(self, first: Union[int, str] = 0) -> List[str]:
        """The names of the steps a run starting at ``first`` submits at once."""
        from job_chain.chain import graph

        chain = self.run_chain(first)
        return [chain.step(i).name for i in graph.plan(chain, {}).ready]  # type: ignore[union-attr]

    def plan(self, first: Union[int, str] = 0, mode: str = "job") -> List[Dict[str, Any]]:
        """The exact create requests ``start`` would send, one per first step (secrets redacted by the
        caller; the run id is a placeholder)."""
        from job_chain.chain.submit import build_request, client_token

        chain = self.run_chain(first)
        out = []
        for name in self.roots(first):
            body = build_request(chain, name, "DRY-RUN", 1, mode=mode, host=chain.api_config.get("host"))
            out.append({"step": name, "resourcePoolId": chain.pool,
                        "clientToken": client_token("DRY-RUN", chain.named(name), 1), "body": body})  # type: ignore
        return out

    def request(self, run_id: Optional[str], step: Union[int, str], attempt: Optional[int] = None) -> Dict[str, Any]:
        """The create request run ``run_id`` sends (or sent) for ``step``: an attempt already
        submitted as the revision it was submitted with, else as the run's current revision."""
        from job_chain.chain.submit import build_request

        run = self.run(run_id)  # type: ignore[attr-defined]
        chain = self.frozen(run)  # type: ignore[attr-defined]
        found = self.step_of(chain, step)
        number = attempt or found.first_attempt
        sent = self.records.submission(run.run_id, found.name, number)  # type: ignore[attr-defined]
        if sent and isinstance(sent.get("revision"), int) and 0 < sent["revision"] != chain.revision:
            chain = self.records.frozen(run.run_id, revision=sent["revision"]) or chain  # type: ignore[attr-defined]
            found = chain.named(found.name) or found
        body = build_request(chain, found.name, run.run_id, number, mode=run.mode, host=run.endpoint or None)
        return {"resourcePoolId": chain.pool, "body": body}

    def step_of(self, chain: Chain, step: Union[int, str]) -> Step:
        """A step of ``chain`` by name or by its number; a clear error listing what exists otherwise."""
        found = chain.named(step) if isinstance(step, str) and not step.isdigit() else chain.step(int(step))
        if found is None:
            names = ", ".join(f"{s.index} {s.name}" for s in chain.steps[:10])
            raise UsageError(f"no step {step!r} in this run (steps: {names}{', …' if len(chain.steps) > 10 else ''})")
        return found

