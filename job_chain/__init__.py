"""job-chain: chains of Baidu AIHC training jobs that advance themselves.

The library API (what the ``job-chain`` CLI itself uses)::

    from job_chain import ChainSession
    s = ChainSession.from_file("chain_info.json", local=True)
    run = s.start()
    s.wait(run.run_id, timeout=600).outcome   # Outcome.SUCCEEDED

Names are imported on first use, so ``import job_chain`` (and ``job-chain --help``) stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any, List

__version__ = "0.1.0"

_EXPORTS = {
    "ChainSession": "job_chain.session", "Run": "job_chain.session", "Submitted": "job_chain.session",
    "SubmitInterrupted": "job_chain.session", "RunSummary": "job_chain.session",
    "RunStatus": "job_chain.status.types", "StepStatus": "job_chain.status.types",
    "Attempt": "job_chain.status.types", "Outcome": "job_chain.status.types",
    "JobsAPI": "job_chain.aihc.api", "AIHCClient": "job_chain.aihc.client", "AIHCError": "job_chain.aihc.errors",
    "JobChainError": "job_chain.errors", "UsageError": "job_chain.errors", "RunNotFound": "job_chain.errors",
    "RunStillActive": "job_chain.errors", "RunTimeout": "job_chain.errors",
    "CredentialsMissing": "job_chain.errors", "ChainFileInvalid": "job_chain.errors",
    "Failure": "job_chain.failures.classify", "classify_files": "job_chain.failures.classify",
}
__all__ = ["__version__", *_EXPORTS]


def __dir__() -> List[str]:  # PEP 562: the public names, lazy ones included (dir, REPL completion)
    return sorted(set(__all__) | {name for name in globals() if name.startswith("__")})


def __getattr__(name: str) -> Any:  # PEP 562: lazy exports
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'job_chain' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
