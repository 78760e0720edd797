"""Every file name in a chain file's run record, ``FILE.runs/RUN/``, and how to read one back.

A new kind of file is added here and nowhere else: the rest of the code asks
:class:`~job_chain.record.records.RunRecords` (or a module of :mod:`job_chain.record`) for the fact,
never for a path. Imported by every hop, so it holds names and patterns only (``re``, nothing else).

``FILE.runs/`` holds one directory per run (named by its id, :func:`is_run_id`), the start
:data:`LOCK`, :data:`FILE_CHECK` (the chain file's last check: the digests of what it read, the runs it
matched), :data:`SUMMARIES` (one summary per run, :func:`summary_name`: what ``runs`` and the
console list, :mod:`job_chain.record.summary`), :data:`LOOKS` (the last look at an ended run, whole: what
``status`` shows of it while its record is unchanged) and the cached steps' entries (:data:`CACHE_DIR`,
``<key>.json``: :mod:`job_chain.record.cache`). A run's directory holds:

* once per run: :data:`RUN` (where and how it started, its revision, round and epoch),
  ``revision-N.json`` (:func:`revision_name`, the chain frozen at each revision),
  :data:`CREDENTIALS` (what the run's jobs connect with), :data:`STOPPED`,
  :data:`START_FAILED` and :data:`ATTEMPTS_CACHE` (the finished attempts a look knew);
* per attempt of a step, ``KIND-<step>-attempt-N.json`` (:func:`fact_name`), one kind of
  :data:`KINDS`: its submission (``step``), the script's exit (``exit``), every replica succeeded
  (``succeeded``), why it failed (``failure``), the advance gave up (``advance-failed``), the
  step's outputs (``outputs``), the plan its success follows (``lean``) and, for a step whose
  earlier success was reused (``jobChain.cache``), where it came from (``cached``);
* for ``maxParallel``/``maxRunning``: ``slot.P.E.S.G``, ``free.P.E.S.G`` and ``claim.E.STEP``
  (:mod:`job_chain.record.slots` has the protocol);
* ``notified-rR-EVENT-WHAT.json``, once per round and event (:func:`notified_name`);
* :data:`NOTIFY_SECRETS` (the values of the ``{"env": NAME}`` of ``notify``, read at run/resume,
  0600) and ``notify-failed-N.json`` (:func:`notify_failed_name`: why target N first failed).

``FILE.runs/`` also holds, per bot, the times of the messages sent to it (and its lock):
:func:`rate_names`, shared by every run of the file and every process that sends.
"""

from __future__ import annotations

import re
from typing import Iterable, List, Match, Optional, Pattern, Tuple

RUNS_SUFFIX = ".runs"  # FILE's runs are kept in FILE.runs/
LOCK = ".lock"  # in FILE.runs/: held while a run is checked for and recorded
SUMMARIES = ".summaries"  # in FILE.runs/: RUN.json per run, outside the run's directory (whose mtime dates it)
LOOKS = ".looks"  # in FILE.runs/: RUN.json, the last look at an ended run kept whole, dated as its summary is
FILE_CHECK = ".file-check.json"  # in FILE.runs/: what the chain file was found to be (session/chainfile.py)
SLURM_DIR = ".slurm"  # in FILE.runs/: the Slurm engine's keys, scripts, node logs and exit codes (slurm/engine.py)


class _Later:
    """A pattern compiled on first use: every hop imports this module, few use most of its names."""

    def __init__(self, source: str, prefix: str = "") -> None:
        self.source = source
        self.prefix = prefix  # the literal text every name it matches starts with
        self.compiled: Optional[Pattern[str]] = None

    def fullmatch(self, text: str) -> Optional[Match[str]]:
        if self.compiled is None:
            self.compiled = re.compile(self.source)
        return self.compiled.fullmatch(text)

    def among(self, names: Iterable[str]) -> List[Tuple[str, Match[str]]]:
        """(name, match) of each of ``names`` it matches, in name order; a name not starting with
        its prefix is not matched (a long run's directory holds 15,000 files of other kinds)."""
        found = ((name, self.fullmatch(name)) for name in names if name.startswith(self.prefix))
        return sorted((name, match) for name, match in found if match is not None)


_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def is_run_id(name: object) -> bool:
    """Whether ``name`` may name a run's directory: ``[A-Za-z0-9][A-Za-z0-9._-]{0,99}``, checked
    without a regex (every hop checks its run's id; compiling a pattern costs a fresh python ~0.2 ms)."""
    return isinstance(name, str) and 0 < len(name) <= 100 and name[0] not in "._-" and _ID_CHARS.issuperset(name)


RUN = "run.json"
CREDENTIALS = "credentials.json"
STOPPED = "stopped.json"
START_FAILED = "start-failed.json"
ATTEMPTS_CACHE = "attempts.json"
NOTIFY_SECRETS = "notify-secrets.json"
NOTIFY_FAILED = _Later(r"notify-failed-(\d+)\.json", "notify-failed-")
REVISION = _Later(r"revision-(\d+)\.json", "revision-")

# a step is named by its AIHC job name (or, in runs recorded before names, its index)
STEP = r"[a-z0-9][-a-z0-9]{0,62}"
SUBMISSION, EXIT, SUCCEEDED, FAILURE, ADVANCE_FAILED, OUTPUTS, PLAN, CACHED = (
    "step", "exit", "succeeded", "failure", "advance-failed", "outputs", "lean", "cached")
KINDS = (SUBMISSION, EXIT, SUCCEEDED, FAILURE, ADVANCE_FAILED, OUTPUTS, PLAN, CACHED)
CACHE_DIR = ".cache"  # in FILE.runs/: cached steps' entries (unless the chain's cacheDir says elsewhere)
CACHE_ENTRY = _Later(r"([0-9a-f]{64})\.json")  # an entry, named by its key
_STEP_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")  # STEP's, which parse_fact checks by hand
# a kind's first word → the kinds that start with it, in KINDS' order (which parse_fact tries)
_KINDS_BY_WORD = {word: tuple(k for k in KINDS if k.partition("-")[0] == word)
                  for word in {k.partition("-")[0] for k in KINDS}}

SLOT = _Later(r"slot\.([a-z0-9-]+)\.(\d+)\.(\d+)\.(\d+)")  # pool, epoch, slot, generation
FREE = _Later(r"free\.([a-z0-9-]+)\.(\d+)\.(\d+)\.(\d+)")  # the same, given back
CLAIM = _Later(rf"claim\.(\d+)\.({STEP})")  # epoch, step


def summary_name(run_id: str) -> str:
    """The summary of run ``run_id``, in :data:`SUMMARIES`."""
    return f"{run_id}.json"


def revision_name(number: int) -> str:
    return f"revision-{number}.json"


def fact_name(kind: str, step: str, attempt: int) -> str:
    """The file of one fact (``kind``, one of :data:`KINDS`) about ``attempt`` of ``step``."""
    return f"{kind}-{step}-attempt-{attempt}.json"


def parse_fact(name: str) -> Optional[Tuple[str, str, int]]:
    """(kind, step, attempt) of a per-attempt file name, or None for any other file: what
    ``(KIND)-(STEP)-attempt-(\\d+)\\.json`` matches in full, read without a regex (every hop lists its
    run's files; compiling the pattern cost each ~0.4 ms)."""
    head, found, number = name[:-5].rpartition("-attempt-") if name.endswith(".json") else ("", "", "")
    if not found or not number.isdecimal():  # \d: any Unicode decimal digit, as int() reads them
        return None
    for kind in _KINDS_BY_WORD.get(head.partition("-")[0], ()):  # (a run's 15,000 files: not each kind for each)
        step = head[len(kind) + 1:]
        if (head.startswith(kind + "-") and 0 < len(step) <= 63 and step[0] != "-"
                and _STEP_CHARS.issuperset(step)):
            return kind, step, int(number)
    return None


def slot_name(pool: str, epoch: int, slot: int, generation: int) -> str:
    return f"slot.{pool}.{epoch}.{slot}.{generation}"


def free_name(pool: str, epoch: int, slot: int, generation: int) -> str:
    return f"free.{pool}.{epoch}.{slot}.{generation}"


def claim_name(epoch: int, step: str) -> str:
    return f"claim.{epoch}.{step}"


def notified_name(round_: int, event: str, step: Optional[str]) -> str:
    """Created once by whoever sends ``event`` (about ``step``, or the run) in resume round ``round_``."""
    return f"notified-r{round_}-{event}-{'run' if step is None else step}.json"


def notified_prefix(round_: int) -> str:
    """What every :func:`notified_name` of round ``round_`` starts with."""
    return f"notified-r{round_}-"


def told(name: str) -> bool:
    """Whether ``name`` is a notification's claim or a target's failure: what telling a run's end writes
    (a summary says nothing of them)."""
    return name.startswith("notified-r") or NOTIFY_FAILED.fullmatch(name) is not None


def notify_failed_name(target: int) -> str:
    """Created once, when notify target ``target`` (its index in ``notify``) first fails."""
    return f"notify-failed-{target}.json"


def rate_names(bot: str) -> Tuple[str, str]:
    """(state, lock) file names in ``FILE.runs/`` of the bot whose key is ``bot`` (hex)."""
    return f".notify-rate-{bot}.json", f".notify-rate-{bot}.lock"
