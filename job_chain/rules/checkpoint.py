"""The last complete checkpoint of a step, by Megatron's convention (AIAK saves Megatron checkpoints).

Megatron writes ``iter_0000200/`` first and ``latest_checkpointed_iteration.txt`` (the tracker,
holding ``200``) only once that directory is whole. So the last *complete* checkpoint is the
iteration the tracker names, and only if its directory exists; a directory the tracker does not
name (``iter_0000300`` while the tracker still says 200: a save cut short) is never chosen. A
retry is told it in ``JOB_CHAIN_RESUME_ITERATION`` and ``JOB_CHAIN_RESUME_CHECKPOINT``. Standard
library only: this runs in the advancing job, where the checkpoint storage is mounted.

The settings as written may hold ``${params.X}``, ``${matrix.X}`` and ``${run.id}``: every reader
takes the step's checkpoint of a run from :func:`job_chain.spec.params.checkpoint_of`, never
``step.checkpoint`` itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from job_chain.spec.model import Checkpoint

RESUME_ITERATION = "JOB_CHAIN_RESUME_ITERATION"
RESUME_CHECKPOINT = "JOB_CHAIN_RESUME_CHECKPOINT"
MAX_TRACKER = 4096  # bytes: a tracker holds one number


def iteration_dir(spec: Checkpoint, iteration: int) -> str:
    return os.path.join(spec.dir, f"iter_{iteration:07d}")


def last_complete(spec: Optional[Checkpoint]) -> Optional[Tuple[int, str]]:
    """(iteration, its directory) of the last complete checkpoint, or None (no tracker, a tracker that
    names no iteration — Megatron's ``release`` — or one whose directory is missing)."""
    if spec is None:
        return None
    try:
        with open(os.path.join(spec.dir, spec.tracker), "rb") as handle:
            text = handle.read(MAX_TRACKER).decode("ascii", "replace").strip()
    except OSError:
        return None
    if not text.isdigit():
        return None
    iteration = int(text)
    folder = iteration_dir(spec, iteration)
    return (iteration, folder) if os.path.isdir(folder) else None


def saved_at(spec: Checkpoint) -> Optional[float]:
    """When the last complete checkpoint became complete: the tracker's modification time (Megatron
    writes it once the iteration's directory is whole), in the storage's clock; None when unknown."""
    try:
        return os.stat(os.path.join(spec.dir, spec.tracker)).st_mtime
    except OSError:
        return None


def resume_env(found: Optional[Tuple[int, str]]) -> Dict[str, str]:
    """What a retry is told about where to resume (nothing when there is no complete checkpoint)."""
    if found is None:
        return {}
    return {RESUME_ITERATION: str(found[0]), RESUME_CHECKPOINT: found[1]}


@dataclass(frozen=True)
class Seen:
    """What is in a step's checkpoint directory before a run or resume submits it (said before doing it:
    job-chain cannot know whose checkpoint it is, a directory shared by two runs included)."""

    step: str  # how people see the step
    dir: str
    found: Optional[Tuple[int, str]]  # the last complete (iteration, its directory) there
    exists: bool  # the directory exists where this looks (the storage may be mounted elsewhere only)

    def line(self) -> str:
        """``step train: checkpoint /pfs/ckpt: iteration 60 already there (/pfs/ckpt/iter_0000060) …``"""
        head = f"step {self.step}: checkpoint {self.dir}: "
        if self.found is not None:
            return (head + f"iteration {self.found[0]} already there ({self.found[1]}): a retry is told it and a "
                    "script loading from this directory continues from it (another run's? give each run its own "
                    "directory, e.g. ${run.id} in checkpoint.dir)")
        if self.exists:
            return head + "none (no complete iteration there)"
        return head + "none (the directory does not exist on this machine)"


def seen(step: str, spec: Checkpoint) -> Seen:
    """What is in ``spec.dir`` now, for step ``step``."""
    return Seen(step, spec.dir, last_complete(spec), os.path.isdir(spec.dir))
