"""Which chain files the console shows, and one :class:`ChainSession` per file (reused while unchanged).

A chain file is a ``*.json`` with a sibling ``*.json.runs/`` directory (its recorded runs; the
file itself may be broken or gone: its runs are steered from their frozen copies). The
search is bounded in depth and count, so pointing the console at ``/`` stays quick.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from job_chain.errors import JobChainError
from job_chain.record.index import chain_id
from job_chain.record.layout import RUNS_SUFFIX
from job_chain.session import ChainSession
from job_chain.status.types import RunStatus

MAX_DEPTH = 4
MAX_CHAINS = 200
SKIP_DIRS = {"node_modules", "__pycache__", "site-packages"}
FINAL_TTL = 30.0  # seconds a final status is reused (resume from here forgets it at once)
LIVE_TTL = 1.0  # a running one: several pages polling share one look at the API


def find_chain_files(paths: List[str], max_depth: int = MAX_DEPTH, limit: int = MAX_CHAINS) -> List[str]:
    """Chain files with recorded runs under ``paths`` (files given directly are always kept)."""
    found: List[str] = []
    for root in paths:
        if os.path.isfile(root):
            found.append(os.path.abspath(root))
            continue
        base = os.path.abspath(root).rstrip(os.sep).count(os.sep)
        for folder, dirs, files in os.walk(os.path.abspath(root)):
            depth = folder.rstrip(os.sep).count(os.sep) - base
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not d.endswith(RUNS_SUFFIX)
                             and d not in SKIP_DIRS and depth < max_depth)
            names = set(files)
            runs_dirs = ({d for d in os.listdir(folder) if d.endswith(".json" + RUNS_SUFFIX)}
                         if depth <= max_depth else set())
            # a chain file with recorded runs, or the runs of one that is gone (steerable from them)
            for name in sorted(names | {d[: -len(RUNS_SUFFIX)] for d in runs_dirs}):
                if name.endswith(".json") and name + RUNS_SUFFIX in runs_dirs:
                    found.append(os.path.join(folder, name))
                    if len(found) >= limit:
                        return sorted(set(found))
    return sorted(set(found))


def short_names(paths: List[str]) -> Dict[str, str]:
    """Each path's shortest tail that no other path ends with, its folder and name at least:
    ``sft/chain_info.json`` and ``pretrain/chain_info.json``, ``a/sft/…`` and ``b/sft/…`` when those
    are alike too. What the runs list and its filter show (a long common beginning would hide the
    difference; the whole path is in their title)."""
    parts = {p: p.strip(os.sep).split(os.sep) for p in paths}
    out: Dict[str, str] = {}
    for path, mine in parts.items():
        for size in range(min(2, len(mine)), len(mine) + 1):
            tail = mine[-size:]
            if not any(other[-size:] == tail for o, other in parts.items() if o != path):
                break
        out[path] = "/".join(tail)
    return out


@dataclass
class Entry:
    """One chain file: its session, or why it cannot be opened."""

    id: str
    path: str
    session: Optional[ChainSession]
    error: str = ""


class Catalog:
    """The chain files under the console's paths; sessions are rebuilt when a file changes."""

    def __init__(self, paths: List[str], *, local: bool = False, rescan: float = 5.0) -> None:
        self.paths = [os.path.abspath(p) for p in paths] or [os.getcwd()]
        self.local = local  # where runs started from the console go (runs found here go where they were recorded)
        self.rescan = rescan
        self._lock = threading.Lock()
        self._sessions: Dict[str, Tuple[float, Entry]] = {}
        self._scanned = 0.0
        self._files: List[str] = []
        self._extra: List[str] = []
        self._statuses: Dict[Tuple[str, str], Tuple[float, RunStatus]] = {}

    @property
    def home(self) -> str:
        """Where submitted chains are written: the first directory the console was given."""
        for path in self.paths:
            if os.path.isdir(path):
                return path
        return os.path.dirname(self.paths[0])

    def add(self, path: str) -> Entry:
        """A chain written from the console: shown even before the next scan."""
        with self._lock:
            if os.path.abspath(path) not in self._extra:
                self._extra.append(os.path.abspath(path))
        return self.entry_for_path(path)

    def files(self, *, now: bool = False) -> List[str]:
        """The chain files (rescanned every ``rescan`` s; with ``now``, at once: the walk is bounded)."""
        with self._lock:
            if now or time.monotonic() - self._scanned > self.rescan:
                self._files = find_chain_files(self.paths)
                self._scanned = time.monotonic()
            return sorted(set(self._files) | set(self._extra))

    def entries(self) -> List[Entry]:
        return [self.entry_for_path(p) for p in self.files()]

    def entry_for_path(self, path: str) -> Entry:
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            mtime = -1.0
        with self._lock:
            cached = self._sessions.get(path)
            if cached and cached[0] == mtime:
                return cached[1]
        try:
            # no place of its own: each run is steered where it was recorded to run (a --local
            # console must not answer "drop --local" about a cloud run); new runs: see Pages. A
            # broken or missing file still shows its runs, from their frozen copies. What pages
            # show never starts a stopped local server (an action may: Pages.acting_session).
            session = ChainSession.from_file(path, strict=False, start_local=False)
            problem = session.chain_problem
            entry = Entry(chain_id(path), path, session, str(problem).splitlines()[0] if problem else "")
        except JobChainError as exc:
            entry = Entry(chain_id(path), path, None, str(exc).splitlines()[0])
        with self._lock:
            self._sessions[path] = (mtime, entry)
        return entry

    def get(self, cid: str) -> Optional[Entry]:
        """The chain with this id; a chain written since the last scan is found by scanning again."""
        for now in (False, True):
            for path in self.files(now=now):
                if chain_id(path) == cid:
                    return self.entry_for_path(path)
        return None

    def status(self, entry: Entry, run_id: str, *, fresh: bool = False) -> RunStatus:
        """The run's status, shared for a moment between the pages polling it."""
        assert entry.session is not None
        key = (entry.path, run_id)
        now = time.monotonic()
        cached = self._statuses.get(key)
        if cached and not fresh:
            ttl = LIVE_TTL if cached[1].outcome == "running" else FINAL_TTL
            if now - cached[0] < ttl:
                return cached[1]
        status = entry.session.status(run_id, outputs=True)  # an inline run's: read from logs, once
        self._statuses[key] = (now, status)
        return status

    def forget(self, entry: Entry, run_id: str) -> None:
        """After an action on a run: the next look asks the API again."""
        self._statuses.pop((entry.path, run_id), None)
