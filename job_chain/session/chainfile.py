"""The chain file a session is about, as it is now, and whether it can be used.

A session lives long (the web console keeps one per chain file): a run freezes, and a resume
compares, the file as it is at that moment, so both read it again. A file that is broken or gone
is no error until something needs it (``strict=False``): recorded runs are steered from their
frozen copies meanwhile.

Such a session reads the file only when something needs it (:meth:`ChainFile.defer`). What a
command about a recorded run needs to know of it — can it be used, does it differ from the run —
is kept in ``FILE.runs/`` with the digests of what the load read (``Chain.inputs``): while the file
and its scripts read the same, byte for byte, the answer stands and the file is not validated
again (:func:`job_chain.spec.scripts.same_inputs`); a 5,000-step file costs its reading, not its checks.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any, Dict, Optional

from job_chain.errors import ChainFileInvalid, JobChainError
from job_chain.spec.model import Chain

if TYPE_CHECKING:
    from job_chain.record.records import RunRecords

KEPT_RUNS = 200  # runs the kept check remembers as matching the file (the newest looked at)


@functools.lru_cache(maxsize=None)
def checker() -> str:
    """Which code checks a chain file: job-chain's version and its checking modules as installed
    (an upgrade, or an edited checkout, makes every kept check stale)."""
    import hashlib

    from job_chain import __version__

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts = [__version__]
    for folder in ("spec", "aihc"):
        where = os.path.join(root, folder)
        for name in sorted(os.listdir(where)):
            if name.endswith(".py"):
                info = os.stat(os.path.join(where, name))
                parts.append(f"{folder}/{name}:{info.st_size}:{info.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


class ChainFile:
    """The session's chain file: its path, the chain it holds now (or the problem that stops it)."""

    def __init__(self, path: str, chain: Optional[Chain], problem: Optional[JobChainError] = None, *,
                 from_file: bool = False) -> None:
        self.path = path
        self._problem = problem  # why the file cannot be used now (its runs are still steerable)
        self.from_file = from_file  # False: the session was given a Chain, which it keeps
        self._chain = chain
        self.records: Optional[RunRecords] = None  # where the check is kept (the session's records)
        self._deferred = False  # defer(): the file is read when first needed
        self._kept: Optional[Dict[str, Any]] = None  # the kept check, when the file reads as it says

    def defer(self) -> None:
        """Read the file only when something needs it (and its problem, when asked, from the check
        kept beside its runs while the file reads the same)."""
        self.from_file, self._deferred, self._chain, self._problem = True, True, None, None

    @property
    def problem(self) -> Optional[JobChainError]:
        """Why the file cannot be used now; None when it can (a deferred file that reads as it did
        when it was last loaded and found sound is not validated again to say so)."""
        if self._deferred and self._same_as_kept() is None:
            self._load()
        return self._problem

    @property
    def chain(self) -> Chain:
        """The chain as the file holds it (validated); raises the file's problem when it cannot be used."""
        if self._deferred:
            self._load()
        if self._chain is None:
            raise self._problem or ChainFileInvalid(f"{self.path}: cannot be read")
        return self._chain

    def _read(self) -> None:
        """Load and check the file as it reads now: its chain, or the problem that stops it."""
        from job_chain.spec.loader import load_chain

        self._deferred = False
        try:
            self._chain, self._problem = load_chain(self.path, local=True), None
        except ChainFileInvalid as exc:
            self._chain, self._problem = None, exc

    def _load(self) -> None:
        self._read()
        if self._chain is not None:
            self.keep_match(None, 0)  # sound as it reads now: the next process need not validate it to say so

    def _kept_check(self) -> Optional[Dict[str, Any]]:
        """The kept check, when this job-chain made it (an upgrade's new rules check the file again)."""
        kept = self.records.file_check() if self.records is not None else None
        return kept if kept is not None and kept.get("checker") == checker() else None

    def _same_as_kept(self) -> Optional[Dict[str, Any]]:
        """The kept check when the (deferred) file reads now as it did when it was kept, else None."""
        if self._kept is None and self.records is not None:
            from job_chain.spec.scripts import same_inputs

            kept = self._kept_check()
            inputs = kept.get("inputs") if kept else None
            if isinstance(inputs, dict) and same_inputs(self.path, inputs):
                self._kept = kept
        return self._kept

    def matches(self, run_id: str, revision: int) -> bool:
        """Whether the file was found to match revision ``revision`` of run ``run_id`` when it read as
        it does now (then :func:`job_chain.session.resume.file_changes` need not compare them again)."""
        if self._deferred:
            kept = self._same_as_kept()
        elif self._chain is not None and self._chain.inputs and self.from_file and self.records is not None:
            kept = self._kept_check()
            kept = kept if kept is not None and kept.get("inputs") == self._chain.inputs else None
        else:
            return False
        unchanged = kept.get("unchanged") if kept else None
        return isinstance(unchanged, dict) and unchanged.get(run_id) == revision

    def keep_match(self, run_id: Optional[str], revision: int) -> None:
        """Keep that the file, as loaded now, is sound and matches revision ``revision`` of run
        ``run_id`` (None: only that it is sound)."""
        if self._chain is None or not self._chain.inputs or not self.from_file or self.records is None:
            return
        kept = self._kept_check()
        if not kept or kept.get("inputs") != self._chain.inputs or not isinstance(kept.get("unchanged"), dict):
            kept = {"inputs": self._chain.inputs, "checker": checker(), "unchanged": {}}
        elif run_id is None:
            return
        unchanged = kept["unchanged"]
        if run_id is None:
            self.records.keep_file_check(kept)
            return
        if unchanged.get(run_id) == revision:
            return
        unchanged.pop(run_id, None)
        unchanged[run_id] = revision
        while len(unchanged) > KEPT_RUNS:
            unchanged.pop(next(iter(unchanged)))
        self.records.keep_file_check(kept)

    def reload(self) -> Chain:
        """Read the file again and return its chain, raising its problems (a session given a Chain keeps it)."""
        if not self.from_file:
            return self.chain
        self._read()
        if self._chain is None:
            raise self._problem or ChainFileInvalid(f"{self.path}: cannot be read")
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
