"""The chain file a session is about, as it is now, and whether it can be used.

A session lives long (the web console keeps one per chain file): a run freezes, and a resume
compares, the file as it is at that moment, so both read it again. A file that is broken or gone
is no error until something needs it (``strict=False``): recorded runs are steered from their
frozen copies meanwhile.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from job_chain.errors import ChainFileInvalid, JobChainError
from job_chain.spec.model import Chain


class ChainFile:
    """The session's chain file: its path, the chain it holds now (or the problem that stops it)."""

    def __init__(self, path: str, chain: Optional[Chain], problem: Optional[JobChainError] = None, *,
                 from_file: bool = False) -> None:
        self.path = path
        self.problem = problem  # why the file cannot be used now (its runs are still steerable)
        self.from_file = from_file  # False: the session was given a Chain, which it keeps
        self._chain = chain

    @property
    def chain(self) -> Chain:
        """The chain as the file holds it (validated); raises the file's problem when it cannot be used."""
        if self._chain is None:
            raise self.problem or ChainFileInvalid(f"{self.path}: cannot be read")
        return self._chain

    def reload(self) -> Chain:
        """Read the file again and return its chain, raising its problems (a session given a Chain keeps it)."""
        from job_chain.spec.loader import load_chain

        if not self.from_file:
            return self.chain
        try:
            self._chain, self.problem = load_chain(self.path, local=True), None
        except ChainFileInvalid as exc:
            self._chain, self.problem = None, exc
            raise
        return self._chain

    def gone(self) -> bool:
        """The file the session was opened on no longer exists (a resume then keeps the run as frozen)."""
        return self.from_file and not os.path.exists(self.path)

    def api_config(self) -> Dict[str, Any]:
        """The file's ``api_config`` as the session knows it: its chain's, or for a broken file what a
        tolerant read finds (the run's jobs read it the same way: ``RunRecords.api_config``)."""
        if self._chain is not None:
            return dict(self._chain.api_config)
        from job_chain.aihc.credentials import file_api_config

        return file_api_config(self.path)
