"""What every session operation works with, and the two questions each of them asks first: which
recorded run a call names, and which chain that run runs.

:class:`~job_chain.session.ChainSession` builds one :class:`RunContext` and hands it to the module
functions behind its methods (:mod:`.start`, :mod:`.resume`, :mod:`.stop`, :mod:`.watch`,
:mod:`.logs`, :mod:`.look`): each operation is a function of the context, checkable by a type
checker and testable with a context of its own, instead of a method of one class spread over files.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Callable, List, Optional, Union

from job_chain.errors import UsageError
from job_chain.record.records import RunRecords
from job_chain.session.chainfile import ChainFile
from job_chain.session.places import Places
from job_chain.session.runs import Run
from job_chain.spec.model import Chain


@dataclass(frozen=True)
class RunContext:
    """The chain file, its run records, where its runs run, and where warnings go."""

    file: ChainFile
    records: RunRecords
    places: Places
    warn: Callable[[str], None]

    @property
    def path(self) -> str:
        return self.file.path


def all_runs(ctx: RunContext) -> List[Run]:
    """Every recorded run of the chain, newest first."""
    return [Run.from_record(ctx.path, r) for r in ctx.records.runs()]


def find_run(ctx: RunContext, run_id: Optional[str] = None) -> Run:
    """One recorded run (default: the latest); :class:`RunNotFound` lists the known ones."""
    if run_id is None:
        latest = ctx.records.latest_run()
        if latest is None:
            raise UsageError(f"no run of {ctx.path} is recorded here: start one with "
                             f"'job-chain run {shlex.quote(ctx.path)}'")
        return Run.from_record(ctx.path, latest)
    return Run.from_record(ctx.path, ctx.records.require_run(run_id))


def frozen(ctx: RunContext, run: Union[Run, str, None] = None) -> Chain:
    """The chain ``run`` runs (rule 7, :meth:`~job_chain.record.records.RunRecords.run_chain`, as its
    jobs decide it): its frozen copy, or for a run recorded before runs were frozen the file now."""
    found = run if isinstance(run, Run) else find_run(ctx, run)
    return ctx.records.run_chain(found.run_id, lambda: ctx.file.chain)
