"""What a loaded chain is: its steps (AIHC create bodies plus chain settings) and where it lives."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

SETTINGS_KEY = "jobChain"  # per-job chain settings, stripped before submission


@dataclass(frozen=True)
class FailureRule:
    """A user's own failure signature (``jobChain.failureRules``): tried before the built-in ones."""

    name: str  # how the cause names it: ``failureRules[0]`` unless the rule says
    cls: str
    pattern: str
    explanation: str = ""


@dataclass(frozen=True)
class Checkpoint:
    """Where a step saves Megatron-style checkpoints (``jobChain.checkpoint``): ``dir/tracker`` names the
    last complete iteration, whose directory is ``dir/iter_0000200``."""

    dir: str
    tracker: str = "latest_checkpointed_iteration.txt"


@dataclass(frozen=True)
class CacheSettings:
    """``jobChain.cache``: reuse an earlier run's success of this step when its key matches
    (docs/caching.md). ``paths`` must all exist for a hit; ``version`` is part of the key."""

    version: str = ""
    paths: Tuple[str, ...] = ()


def point_display(group: str, point: Dict[str, str]) -> str:
    """A matrix point as people see it: ``train[lr=1e-4,seed=1]``."""
    return f"{group}[{','.join(f'{k}={v}' for k, v in point.items())}]"


def display_group(display: str) -> str:
    """The matrix a point's display belongs to (``train`` for ``train[lr=1e-4,seed=1]``); any
    other step's display is its own group."""
    return display.split("[", 1)[0] if display.endswith("]") else display


@dataclass
class Step:
    """One step: the body AIHC receives (command = the user's script) and chain settings."""

    index: int
    body: Dict[str, Any]
    script: str
    script_origin: str  # "inline" or the script file's path, for messages
    script_runner: str = ""  # "bash"/"sh" (`bash X`, `sh X`), or "": the script's `#!` line, else bash
    retries: int = 0
    depends_on: Tuple[int, ...] = ()  # indexes of the steps that must succeed first
    run_on: Optional[str] = None  # "failure" | "always": an exit handler, run once after the run ended
    timeout: Optional[float] = None  # seconds of running before the step is killed (exit 124)
    hang_timeout: Optional[float] = None  # seconds without output before the step is killed (exit 124)
    retry_on: Optional[Tuple[int, ...]] = None  # exit codes that may be retried (plus 124); None: any
    metrics: Dict[str, str] = field(default_factory=dict)  # training-curve name -> regex (jobChain.metrics)
    retry_budgets: Optional[Dict[str, int]] = None  # retries per failure class; None: ``retries`` for any failure
    failure_rules: Tuple[FailureRule, ...] = ()
    checkpoint: Optional[Checkpoint] = None
    cache: Optional[CacheSettings] = None  # jobChain.cache: None, the step always runs
    # the run's view of the step (a frozen revision); a chain loaded from a file has the defaults
    settings_raw: Dict[str, Any] = field(default_factory=dict, repr=False)  # jobChain as written, frozen as is
    first_attempt: int = 1  # attempts before this one ran an earlier revision of the step (resume --rerun)
    excluded: Optional[str] = None  # why the step does not run in this run (before --start, added upstream)
    renamed_from: Optional[str] = None  # resume --rename OLD=NEW: its name in earlier revisions (its outputs)
    changed_in: int = 1  # the revision whose content the step runs: part of its client token
    removed_in: int = 0  # the revision that removed (or renamed) a step that had run: it stays as history, excluded
    # a point of a matrix (jobChain.matrix): the step it was expanded from, and its values
    group: str = ""  # the matrix step's name ("train"); "" for an ordinary step
    point: Dict[str, str] = field(default_factory=dict)  # {"lr": "1e-4", "seed": "1"}
    max_parallel: Optional[int] = None  # the matrix's maxParallel: points active at once

    @property
    def is_handler(self) -> bool:
        return self.run_on is not None

    @property
    def name(self) -> str:
        """The step's identity: its AIHC job name, in records, labels, tokens and commands."""
        return str(self.body.get("name", ""))

    @property
    def display(self) -> str:
        """How people see the step: ``train[lr=1e-4,seed=1]`` for a matrix point, else its name."""
        return point_display(self.group, self.point) if self.group else self.name

    def mount_paths(self) -> List[str]:
        return [str(d.get("mountPath")) for d in self.body.get("datasources") or [] if d.get("mountPath")]


@dataclass
class Chain:
    """A chain file after validation. ``api_config`` may hold secrets: never print it."""

    path: str
    pool: str
    steps: List[Step]
    api_config: Dict[str, Any] = field(default_factory=dict, repr=False)
    scrips_path: Optional[str] = None
    config_path: Optional[str] = None
    warnings: List[str] = field(default_factory=list)
    notify: List[Dict[str, Any]] = field(default_factory=list)  # webhooks: {"url", "on", "format"}
    graph: bool = False  # True when some job names dependsOn (else each step follows the previous one)
    revision: int = 0  # a run's frozen revision (1 at start, +1 per resume that changed it); 0: read from a file
    digest: str = ""  # sha256 of the frozen revision's content
    params: Dict[str, str] = field(default_factory=dict)  # the values ${params.X} stands for (a run's: resolved)
    params_set: Dict[str, str] = field(default_factory=dict)  # the values --param gave (a run keeps them)
    max_running: Optional[int] = None  # steps of the run active at once (top-level maxRunning)
    cache_dir: Optional[str] = None  # top-level cacheDir: where cached steps' entries live (else FILE.runs/.cache)
    engine: str = "aihc"  # where its jobs run: "aihc" (AIHC or the local server) or "slurm"
    slurm: Dict[str, Any] = field(default_factory=dict)  # sbatch long options for every step (docs/slurm.md)
    outputs: Dict[str, Dict[str, str]] = field(default_factory=dict)  # inline runs: outputs carried along
    began: Optional[float] = None  # inline runs: the API's createdAt of the run's first job (snapshots carry it)
    first_job: bool = False  # inline runs: this snapshot is the run's first job's (so it knows no began yet)
    inputs: Dict[str, Optional[str]] = field(default_factory=dict, repr=False, compare=False)  # scripts.same_inputs
    _cached: Optional[Tuple[Any, ...]] = field(default=None, init=False, repr=False, compare=False)
    _pools: Optional[Tuple[Any, ...]] = field(default=None, init=False, repr=False, compare=False)  # slots.py

    def _maps(self) -> Tuple[Dict[int, Step], Dict[int, List[Step]], Dict[str, Step]]:
        """(index -> step, index -> dependents, name -> step), built once: status and advance ask per
        step, and a linear search each time made a 500-step look quadratic."""
        if self._cached is None or self._cached[0] is not self.steps or self._cached[1] != len(self.steps):
            by_index = {s.index: s for s in self.steps}
            waiting: Dict[int, List[Step]] = {}
            for step in self.steps:
                for dep in step.depends_on:
                    waiting.setdefault(dep, []).append(step)
            self._cached = (self.steps, len(self.steps), by_index, waiting, {s.name: s for s in self.steps})
        return self._cached[2], self._cached[3], self._cached[4]

    def engine_restarts(self, step: Step) -> int:
        """How many times the engine restarts a failed job of ``step`` itself, the same attempt,
        before job-chain sees the failure: AIHC's ``faultTolerance`` (:func:`job_chain.aihc.spec.restart_limit`);
        0 on Slurm, which ignores it."""
        if self.engine != "aihc":
            return 0
        from job_chain.aihc.spec import restart_limit

        return restart_limit(step.body)

    def step(self, index: int) -> Optional[Step]:
        """The step at this position (its display number)."""
        return self._maps()[0].get(index)

    def named(self, name: str) -> Optional[Step]:
        """The step with this name: how records, labels and commands know a step."""
        return self._maps()[2].get(name)

    def find(self, key: Union[int, str]) -> Optional[Step]:
        """The step people mean: its name, its display name (``train[lr=1e-4]``), a matrix's name
        (its first point), or its number (``2`` or ``"2"``: names never are all digits)."""
        if isinstance(key, int) or key.isdigit():
            return self.step(int(key))
        found = self.named(key)
        if found is None:
            found = next((s for s in self.steps if s.display == key or s.group == key), None)
        return found

    def points(self, group: str) -> List[Step]:
        """The points of matrix ``group``, in order."""
        return [s for s in self.steps if s.group == group]

    def resolve(self, key: str) -> Optional[Step]:
        """The step a record or label names: by name, or by position for runs recorded before
        steps were known by name (their labels hold the index)."""
        found = self.named(key)
        if found is None and key.isdigit():
            found = self.step(int(key))
        return found

    def dependents(self, index: int) -> List[Step]:
        """The steps that wait for step ``index``."""
        return list(self._maps()[1].get(index, ()))

    @property
    def handlers(self) -> List[Step]:
        return [s for s in self.steps if s.is_handler]

    @property
    def length(self) -> int:
        """Number of steps in the whole chain (snapshots keep the original numbering)."""
        return (self.steps[-1].index + 1) if self.steps else 0

    @property
    def directory(self) -> str:
        return os.path.dirname(os.path.abspath(self.path))

    @property
    def cluster_config_path(self) -> str:
        """Where jobs read this chain file: ``config_path``, else the file's absolute path."""
        return self.config_path or os.path.abspath(self.path)

    @property
    def secrets(self) -> List[str]:
        """The api_config's secret key and session token (never shown)."""
        return [v for v in (self.api_config.get("sk"), self.api_config.get("sessionToken")) if isinstance(v, str) and v]
