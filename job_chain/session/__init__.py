"""The Python API that the CLI and the console call: :class:`ChainSession` and the values it returns."""

from job_chain.session.core import ChainSession
from job_chain.session.runs import ResumePlan, Run, RunSummary, SubmitInterrupted, Submitted

__all__ = ["ChainSession", "Run", "RunSummary", "Submitted", "SubmitInterrupted", "ResumePlan"]
