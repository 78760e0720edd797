"""job-chain: chains of Baidu AIHC training jobs that advance themselves.

The library API (what the ``job-chain`` CLI itself uses)::

    from job_chain import ChainSession
    s = ChainSession.from_file("chain_info.json", local=True)
    run = s.start()
    s.wait(run.run_id, timeout=600).outcome   # Outcome.SUCCEEDED

Names are imported on first use, so ``import job_chain`` (and ``job-chain --help``) stays fast.
"""

# Before anything else, in syntax every Python 3 parses: a job's image whose python3 is too old
# for job-chain (its step's tail runs `python3 -m job_chain.hop`) is told which Python it has and
# what is needed, after its script succeeded, instead of failing in some import with a traceback.
import sys

if sys.version_info < (3, 8):
    sys.stderr.write("job-chain: error: this python3 is Python {}.{}.{} ({}); job-chain needs Python 3.8 or "
                     "newer. A step's own script has run: use an image whose python3 is 3.8 or newer, then "
                     "'job-chain resume' the run\n".format(sys.version_info[0], sys.version_info[1],
                                                           sys.version_info[2], sys.executable))
    raise SystemExit(75)  # the advance failed, and a resume submits what it would have (hop/advance.py)

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing here (see below)
if TYPE_CHECKING:
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
__all__ = ["__version__"] + list(_EXPORTS)


def __dir__() -> "List[str]":  # PEP 562: the public names, lazy ones included (dir, REPL completion)
    return sorted(set(__all__) | {name for name in globals() if name.startswith("__")})


def __getattr__(name: str) -> "Any":  # PEP 562: lazy exports
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError("module 'job_chain' has no attribute {!r}".format(name))
    return getattr(importlib.import_module(module), name)
