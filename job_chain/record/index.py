"""Where each run's record lives, so ``status --run ID`` finds a run without its chain file.

One small file per run (``<data dir>/runs/<run-id>``, holding the chain file's absolute path),
written when the run starts: no shared file to rewrite, so simultaneous starts never lose each
other's entries. A run recorded before this index existed is found by looking for
``*.runs/<run-id>`` under the current directory.
"""

from __future__ import annotations

import os
from typing import List, Optional

from job_chain.record.layout import RUNS_SUFFIX, is_run_id
from job_chain.util.files import write_private

INDEX_ENV = "JOB_CHAIN_RUN_INDEX"
SEARCH_DEPTH = 3


def chain_id(path: str) -> str:
    """A short stable id for a chain file, for URLs (its absolute path is not put in them): the
    console's pages and the links notifications give to them."""
    import hashlib

    return hashlib.sha1(os.path.abspath(path).encode("utf-8", "surrogateescape")).hexdigest()[:12]


def index_dir() -> str:
    """env ``JOB_CHAIN_RUN_INDEX``, else ``runs`` in the user's data dir."""
    if os.environ.get(INDEX_ENV):
        return os.path.abspath(os.path.expanduser(os.environ[INDEX_ENV]))
    import platformdirs

    return os.path.join(platformdirs.user_data_dir("job-chain"), "runs")


def remember(run_id: str, chain_path: str) -> None:
    """Note where run ``run_id`` is recorded; best effort (an unwritable data dir loses only this)."""
    try:
        os.makedirs(index_dir(), mode=0o700, exist_ok=True)
        write_private(os.path.join(index_dir(), run_id), os.path.abspath(chain_path) + "\n")
    except OSError:
        pass


def forget(run_id: str) -> None:
    try:
        os.unlink(os.path.join(index_dir(), run_id))
    except OSError:
        pass


def locate(run_id: str, search_from: str = ".") -> List[str]:
    """The chain files whose record holds run ``run_id``: the index's entry if its record still
    exists, else every ``*.runs/<run-id>`` up to a few directories below ``search_from``."""
    if not is_run_id(run_id):
        return []
    found: List[str] = []
    noted = _read(os.path.join(index_dir(), run_id))
    if noted and os.path.isdir(noted + RUNS_SUFFIX + os.sep + run_id):
        found.append(noted)
    root = os.path.abspath(search_from)
    for directory, subdirs, _ in os.walk(root):
        depth = directory[len(root):].count(os.sep)
        for name in subdirs:
            if name.endswith(RUNS_SUFFIX) and os.path.isdir(os.path.join(directory, name, run_id)):
                path = os.path.join(directory, name[: -len(RUNS_SUFFIX)])
                if path not in found:
                    found.append(path)
        subdirs[:] = [d for d in subdirs if not d.startswith(".") and not d.endswith(RUNS_SUFFIX)] \
            if depth < SEARCH_DEPTH else []
    return found


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip() or None
    except (OSError, ValueError):
        return None
