"""The run record kept beside the chain file: one directory per run, one file per fact.

``chain_info.json`` gets ``chain_info.json.runs/<run-id>/``; :mod:`job_chain.record.layout` names
every file in it. Each fact is written atomically with mode 0600, once per (step, attempt) where it
is about an attempt, so replicas, retries and the local ``run`` never rewrite each other's files.
In job mode every job's tail reports here, so joins are decided from these files
(:mod:`job_chain.hop.readiness`); the API stays the source of truth for job statuses.

:class:`RunRecords` is the one way into a run's directory: everything outside this package asks
it for a fact, never for a path. Per attempt it keeps what only the advancing job knows: the
script's own exit code, the last complete checkpoint when it ended and when the advance that ended
the job finished (``exit``); every replica succeeded (``succeeded``); the advance gave up
(``advance-failed``); why the attempt failed (``failure``, written once, by whoever classified it
first — the advancing job, or ``status`` for a run whose job could not — so every later reader
agrees with the decision that was taken).
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

from job_chain.aihc.names import is_job_id
from job_chain.errors import RecordUnwritable, RunNotFound, UsageError
from job_chain.record import layout
from job_chain.record.layout import ADVANCE_FAILED, CACHED, EXIT, FAILURE, SUBMISSION, SUCCEEDED, fact_name
from job_chain.util.files import create_private, read_json_dict, write_json_private

if TYPE_CHECKING:  # a job advancing a chain reads the record without the status types
    from job_chain.rules.facts import RunFacts
    from job_chain.spec.model import Chain

Key = Tuple[str, int]  # (step name, attempt)
Listed = Dict[str, Dict[Key, str]]  # kind (layout.KINDS) -> (step, attempt) -> file name


def new_run_id() -> str:
    """Sortable, label-safe, unique enough: ``20261122-113045-9f3a``."""
    import secrets

    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def as_placed(chain: Chain, local: bool) -> Chain:
    """``chain`` as a run on the local server sees it: its pods run on this machine, so they read
    this installation and the record beside the file, not the ``config_path``/``scrips_path`` the
    file names for the cluster. A run elsewhere sees the chain unchanged. (Part of rule 7, and what a
    new run freezes.)"""
    if not local:
        return chain
    from dataclasses import replace

    return replace(chain, config_path=None, scrips_path=None)


def run_started(run_id: str) -> Optional[float]:
    """When a run began (unix seconds), read from its id; None for an id not made by new_run_id.

    Inline runs have no record to ask, and a job list is only walked back to the run's start.
    """
    import calendar

    try:
        return float(calendar.timegm(time.strptime(run_id[:15], "%Y%m%d-%H%M%S")))
    except ValueError:
        return None


def run_start(run: Optional[Mapping[str, Any]], run_id: str) -> Optional[float]:
    """When a run started (unix seconds): ``started`` in its ``run.json`` (``run``), else the time
    in its id; None when neither says. The one answer for the hop, ``status`` and the Python API's
    :class:`~job_chain.session.runs.Run`: it bounds every walk of the pool, so a record without
    ``started`` (hand-made, or damaged) must not make a walk go back to 1970."""
    started = (run or {}).get("started")
    if isinstance(started, (int, float)) and not isinstance(started, bool) and started > 0:
        return float(started)
    return run_started(run_id)


def latest_listed(listing: Listed, firsts: Mapping[str, int]) -> Dict[str, int]:
    """Step name -> the highest attempt the record's listing names for it (its submission, its exit
    or its success marker), for the steps of ``firsts`` only and their attempts from ``firsts[step]``
    (the revision's first attempt) on. What a join is decided from (:mod:`job_chain.hop.readiness`,
    a planned join) and where a slot's hand-on starts the next attempt: a tail whose submission was
    never recorded still names its attempt by its exit."""
    latest: Dict[str, int] = {}
    for kind in (SUBMISSION, EXIT, SUCCEEDED, CACHED):
        for name, attempt in listing[kind]:
            first = firsts.get(name)
            if first is not None and attempt >= first and attempt > latest.get(name, 0):
                latest[name] = attempt
    return latest


class StartFacts:
    """What the record says of a run's start (read once by a look): why its first steps could not be
    submitted (None: they were, or are being), and whether the API refused its first create outright.
    (Not a named tuple: every hop imports this module, and a named tuple costs a fresh python ~0.3 ms.)"""

    __slots__ = ("failed", "refused")

    def __init__(self, failed: Optional[str] = None, refused: bool = False) -> None:
        self.failed, self.refused = failed, refused

    def never_created(self, submissions: List[Dict[str, Any]]) -> bool:
        """The first create was refused outright and nothing was submitted since (``submissions``:
        the run's): nothing of the run exists in the API."""
        return self.refused and not submissions


class RecordDamaged(UsageError):
    """A run directory whose ``run.json`` cannot be read: never taken for "no run"."""


class RunRecords:
    """Run records for one chain file (``config_path`` in the cluster, the file path locally)."""

    def __init__(self, chain_path: str) -> None:
        self.chain_path = chain_path
        self.root = os.path.abspath(chain_path) + layout.RUNS_SUFFIX
        self._frozen: Dict[Tuple[str, int], Any] = {}
        self._revision_facts: Dict[Tuple[str, int], Dict[str, Any]] = {}  # each thawed revision's (never changes)
        self._read_revisions: Dict[Tuple[str, int], Dict[str, Any]] = {}  # decoded, not thawed yet (run_placed)
        self.summary_memo: Dict[str, Any] = {}  # record/summary.py's parsed summaries, by run

    def _dir(self, run_id: str) -> str:
        if not isinstance(run_id, str) or not layout.is_run_id(run_id):
            raise RunNotFound(f"{run_id!r} is not a run id (run ids look like 20261122-113045-9f3a)"
                              + self._known_hint(), self.run_ids())
        return os.path.join(self.root, run_id)

    def directory(self, run_id: str) -> str:
        """The run's directory, for tests and tools that look at the files themselves; the code asks
        for facts (a file's name is :mod:`~job_chain.record.layout`'s business)."""
        return self._dir(run_id)

    def writable(self, run_id: str) -> bool:
        """Whether facts can be written into the run's directory here (not a read-only mount)."""
        return os.access(self._dir(run_id), os.W_OK)

    def _path(self, run_id: str, name: str) -> str:
        return os.path.join(self._dir(run_id), name)

    def slurm_dir(self) -> str:
        """The Slurm engine's directory for this chain's runs (on the filesystem every node sees)."""
        return os.path.join(self.root, layout.SLURM_DIR)

    def check_root(self) -> None:
        if os.path.lexists(self.root) and not os.path.isdir(self.root):
            raise UsageError(f"{self.root} is not a directory: job-chain keeps the runs of {self.chain_path} "
                             "there; move that file away")

    def _known_hint(self) -> str:
        known = self.run_ids()
        if not known:
            return f"; no run of {self.chain_path} is recorded here"
        shown = ", ".join(known[:5]) + (f" and {len(known) - 5} more" if len(known) > 5 else "")
        import shlex

        return f"; known runs (newest first): {shown} (job-chain runs {shlex.quote(self.chain_path)} lists them)"

    # -- one file, one listing (names from record.layout; for this package's modules) -------------
    def read(self, run_id: str, name: str) -> Optional[Dict[str, Any]]:
        """The JSON object in the run's file ``name``; None when missing or damaged."""
        return read_json_dict(self._path(run_id, name))

    def write(self, run_id: str, name: str, data: Any, *, compact: bool = False, sync: bool = True) -> bool:
        """Write one fact; False (not an error) when the record is not writable here (a job's view).
        ``compact``: for the tail and caches, not for people (no indent, ASCII, at the json module's C speed).
        ``sync=False``: a cache, worked out again when a crash loses it (not flushed to the disk first)."""
        if compact:
            import json

            return self._write_bytes(run_id, name, json.dumps(data, separators=(",", ":")).encode("ascii"), sync=sync)
        try:
            os.makedirs(self._dir(run_id), mode=0o700, exist_ok=True)
            write_json_private(self._path(run_id, name), data)
            return True
        except OSError:
            return False

    def _write_bytes(self, run_id: str, name: str, raw: bytes, *, sync: bool) -> bool:
        from job_chain.util.files import write_private

        try:
            os.makedirs(self._dir(run_id), mode=0o700, exist_ok=True)
            write_private(self._path(run_id, name), raw, sync=sync)
            return True
        except OSError:
            return False

    def must_write(self, run_id: str, name: str, data: Any) -> bool:
        """Write a fact the run cannot go on without (an exit, a success marker): RecordUnwritable
        (with the system's reason: no space left, read-only) when it cannot be written."""
        try:
            os.makedirs(self._dir(run_id), mode=0o700, exist_ok=True)
            write_json_private(self._path(run_id, name), data)
        except OSError as exc:
            why = exc.strerror or str(exc) or type(exc).__name__
            raise RecordUnwritable(f"cannot write {self._path(run_id, name)}: {why}") from None
        return True

    def create(self, run_id: str, name: str, data: Dict[str, Any]) -> bool:
        """Create ``name`` with ``data`` unless it exists: True for exactly one caller (slots, claims).
        Not writable here: OSError (a slot must never be taken for granted)."""
        import json

        return create_private(self._path(run_id, name), json.dumps(data))

    def remove(self, run_id: str, name: str) -> None:
        """Remove ``name``; one already gone is not an error (any other OSError is)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(run_id, name))

    def names(self, run_id: str) -> Optional[List[str]]:
        """Every file name in the run's directory, from one listing; None when it cannot be listed."""
        try:
            return os.listdir(self._dir(run_id))
        except OSError:
            return None

    def listed(self, run_id: str, names: Optional[List[str]] = None) -> Listed:
        """Every per-attempt file of the run by kind, from one listing (no file is opened): what a
        join is decided from (:mod:`~job_chain.hop.readiness`, a planned join). ``names``: the
        listing, when the caller has just made it (:meth:`names`)."""
        out: Listed = {kind: {} for kind in layout.KINDS}
        for name in (self.names(run_id) or []) if names is None else names:
            found = layout.parse_fact(name)
            if found is not None:
                out[found[0]][(found[1], found[2])] = name
        return out

    def _entries(self, run_id: str, kind: str, listing: Optional[Listed] = None,
                 known: Optional[Mapping[Key, Dict[str, Any]]] = None, fast: bool = False) -> List[Dict[str, Any]]:
        """The JSON object of each file of ``kind``, with its step and attempt (``known``: those already
        read, by step and attempt, whose files are not read again; ``fast``: as read_json_dict's)."""
        out = []
        directory = self._dir(run_id) + os.sep  # (once, not once per file: a long run has thousands)
        for (step, attempt), name in (listing or self.listed(run_id))[kind].items():
            read = (known or {}).get((step, attempt))
            entry = dict(read) if read is not None else read_json_dict(directory + name, fast=fast)
            if entry is not None:
                entry["step"], entry["attempt"] = step, attempt
                out.append(entry)
        return out

    # -- runs --------------------------------------------------------------------------------
    def create_run(self, run_id: str, **meta: Any) -> Dict[str, Any]:
        self.check_root()
        run = {"id": run_id, "started": time.time(), **meta}
        os.makedirs(self._dir(run_id), mode=0o700, exist_ok=True)
        write_json_private(self._path(run_id, layout.RUN), run)
        return run

    def update_run(self, run_id: str, **changes: Any) -> Dict[str, Any]:
        """Rewrite ``run.json`` with ``changes`` (resume: the round, the mode, a new revision)."""
        run = dict(self.require_run(run_id))
        run.update(changes)
        write_json_private(self._path(run_id, layout.RUN), run)
        return run

    def delete_run(self, run_id: str) -> None:
        """Forget a run: its directory and everything in it (its summary and kept look, outside it,
        are :func:`job_chain.record.summary.forget`'s)."""
        import shutil

        shutil.rmtree(self._dir(run_id), ignore_errors=True)

    def claim_run_id(self, make: Callable[[], str]) -> str:
        """A new run's id from ``make``, its directory made here and now (``mkdir``: exactly one caller
        gets each id): two runs started in the same second whose random parts meet get two ids. Called
        under :meth:`start_lock`, which made the root."""
        for _ in range(100):
            run_id = make()
            try:
                os.mkdir(self._dir(run_id), 0o700)
            except FileExistsError:
                continue
            except OSError as exc:
                raise RecordUnwritable(f"cannot make the run's directory under {self.root}: "
                                       f"{exc.strerror or exc}") from None
            return run_id
        raise RecordUnwritable(f"no free run id under {self.root} after 100 tries (is {make} random?)")

    def get_run(self, run_id: str) -> Optional[Dict[str, Any]]:
        return self.read(run_id, layout.RUN)

    def require_run(self, run_id: str) -> Dict[str, Any]:
        """The recorded run, or :class:`RunNotFound` listing the runs that exist."""
        run = self.get_run(run_id)
        if run is None:
            if os.path.isdir(self._dir(run_id)):
                raise RecordDamaged(self.damaged_message(run_id))
            raise RunNotFound(f"no run {run_id} of {self.chain_path} is recorded" + self._known_hint(), self.run_ids())
        return run

    def damaged_message(self, run_id: str) -> str:
        import shlex

        return (f"the record of run {run_id} is damaged ({self._path(run_id, layout.RUN)} is missing or "
                f"not JSON): delete it with 'job-chain runs {shlex.quote(self.chain_path)} --delete {run_id}'")

    def damaged(self) -> List[str]:
        """Run directories whose ``run.json`` cannot be read (newest first)."""
        try:
            names = os.listdir(self.root)
        except OSError:
            return []
        return sorted((n for n in names if layout.is_run_id(n) and os.path.isdir(os.path.join(self.root, n))
                       and self.get_run(n) is None), reverse=True)

    def runs(self) -> List[Dict[str, Any]]:
        """Every recorded run, newest first (by :func:`run_start`)."""
        self.check_root()
        try:
            names = os.listdir(self.root)
        except OSError:
            return []
        found = [r for r in (self.get_run(n) for n in names if layout.is_run_id(n))
                 if r and isinstance(r.get("id"), str)]
        return sorted(found, key=lambda r: (run_start(r, r["id"]) or 0.0, r["id"]), reverse=True)

    def run_ids(self) -> List[str]:
        try:
            return [r["id"] for r in self.runs()]
        except UsageError:
            return []

    def latest_run(self) -> Optional[Dict[str, Any]]:
        return next(iter(self.runs()), None)

    def file_check(self) -> Optional[Dict[str, Any]]:
        """The chain file's last check (:mod:`job_chain.session.chainfile`); None when there is none."""
        return read_json_dict(os.path.join(self.root, layout.FILE_CHECK))

    def keep_file_check(self, data: Dict[str, Any]) -> None:
        """Keep the chain file's check; a cache: not writable here loses only time."""
        import json

        from job_chain.util.files import write_private

        if not os.path.isdir(self.root):
            return
        try:
            write_private(os.path.join(self.root, layout.FILE_CHECK), json.dumps(data, separators=(",", ":")),
                          sync=False)
        except (OSError, ValueError, TypeError):
            pass

    @contextlib.contextmanager
    def start_lock(self) -> Iterator[None]:
        """Held while a run is checked for and recorded: two starts never both pass "no run is going"."""
        import fcntl

        self.check_root()
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(self.root, layout.LOCK), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def record_start_failure(self, run_id: str, message: str, *, refused: bool) -> None:
        """The run's first steps could not be submitted: its outcome is failed, not "unknown" for ever.

        ``refused``: the API said no, so nothing was created (a look at the run needs no API call);
        otherwise (interrupted, gave up) a create may have been stored, and the API decides.
        """
        self.write(run_id, layout.START_FAILED, {"message": message, "refused": refused, "at": time.time()})

    def start_facts(self, run_id: str) -> StartFacts:
        """What :meth:`record_start_failure` kept, if anything (:class:`StartFacts`)."""
        entry = self.read(run_id, layout.START_FAILED)
        if entry is None:
            return StartFacts()
        return StartFacts(str(entry.get("message") or "it could not be started"), entry.get("refused") is True)

    # -- the frozen chain ------------------------------------------------------------------------
    def freeze(self, run_id: str, frozen: Dict[str, Any], *, revision: int, reason: str,
               changes: Optional[List[Dict[str, Any]]] = None) -> str:
        """Keep revision ``revision`` of the run's chain; return its digest. Never overwrites one."""
        from job_chain.spec.frozen import digest

        value = digest(frozen)
        path = self._path(run_id, layout.revision_name(revision))
        if os.path.exists(path):
            raise UsageError(f"run {run_id} already has a revision {revision}")
        os.makedirs(self._dir(run_id), mode=0o700, exist_ok=True)
        write_json_private(path, {"revision": revision, "created": time.time(), "reason": reason,
                                  "changes": changes or [], "digest": value, "chain": frozen})
        return value

    def revisions(self, run_id: str, names: Optional[List[str]] = None) -> List[Dict[str, Any]]:
        """Each revision's facts (number, when, why, what changed, digest), oldest first; no chain.
        ``names``: the run's listing, when the caller has just made it. A revision thawed by
        :meth:`frozen` is not read again (a 5,000-step chain is most of its file)."""
        out = []
        for name, found in layout.REVISION.among(self.names(run_id) or [] if names is None else names):
            data = self._revision_facts.get((run_id, int(found.group(1)))) or self.read(run_id, name) or {}
            out.append({k: data.get(k) for k in ("revision", "created", "reason", "changes", "digest")})
        return sorted(out, key=lambda r: int(r.get("revision") or 0))

    def frozen(self, run_id: str, run: Optional[Dict[str, Any]] = None,
               revision: Optional[int] = None) -> Optional[Any]:
        """The chain the run runs now (its current revision, or ``revision``), or None for a run
        recorded before runs were frozen. Raises :class:`RecordDamaged` when the copy cannot be read."""
        from job_chain.spec.frozen import FrozenDamaged, thaw

        run = run if run is not None else self.require_run(run_id)
        number = revision if revision is not None else run.get("revision")
        if not isinstance(number, int) or number < 1:
            return None
        if (run_id, number) not in self._frozen:
            data = self._revision(run_id, number)
            try:
                chain = thaw(data["chain"], self.chain_path, revision=number, digest_=str(data.get("digest") or ""))
            except (FrozenDamaged, KeyError, TypeError) as exc:
                raise self._damaged(run_id, number, exc) from None
            self._frozen[(run_id, number)] = chain
            self._revision_facts[(run_id, number)] = {k: v for k, v in data.items() if k != "chain"}
            self._read_revisions.pop((run_id, number), None)
        return self._frozen[(run_id, number)]

    def _revision(self, run_id: str, number: int) -> Dict[str, Any]:
        """Revision ``number``'s file, decoded (kept until :meth:`frozen` thaws it)."""
        if (run_id, number) not in self._read_revisions:
            data = read_json_dict(self._path(run_id, layout.revision_name(number)))
            if data is None:
                raise self._damaged(run_id, number, "missing or not JSON")
            self._read_revisions[(run_id, number)] = data
        return self._read_revisions[(run_id, number)]

    def _damaged(self, run_id: str, number: int, why: Any) -> RecordDamaged:
        path = self._path(run_id, layout.revision_name(number))
        return RecordDamaged(f"the frozen chain of run {run_id} ({path}) is damaged: {why}")

    def save_credentials(self, run_id: str, carried: Dict[str, Any]) -> None:
        """What the run's jobs connect with (0600, atomic; never in a job's command or environment,
        which on AIHC hold neither a host nor keys): the host and key pair ``run`` (or the last
        ``resume``) used, however they were given, or for a local run the local server's own
        credentials file (``credentialsFile``). See :meth:`carried`."""
        self.write(run_id, layout.CREDENTIALS, {k: v for k, v in carried.items() if isinstance(v, str)})

    def credentials(self, run_id: str) -> Dict[str, Any]:
        """The record's credentials ({} when none were saved: a run recorded before runs carried
        them); what a run's clients start from is decided with it in :meth:`api_config`."""
        return self.read(run_id, layout.CREDENTIALS) or {}

    # -- what a run runs with (rules 7 and 8) -----------------------------------------------------
    # Asked by the finishing job's tail (job_chain.hop.entry.load_run, the planned hop in hop/lean.py)
    # and by the session steering the run (job_chain.session), which used to decide them each with its
    # own code, and the API config with opposite precedence: a host written only in the chain file was
    # used by the session and ignored by the run's jobs. Both sides call these two.
    def run_chain(self, run_id: str, load_file: Callable[[], Chain],
                  run: Optional[Mapping[str, Any]] = None) -> Chain:
        """Rule 7, the chain a run runs: its frozen copy (the revision ``run.json`` names now); for a
        run recorded before runs were frozen, the chain file as it is now (``load_file()``, which
        raises the file's problem; the tail never loads the loader otherwise), :func:`as_placed` for
        where the run runs.

        ``run`` is the run's ``run.json`` when the caller has just read it (read here otherwise, so a
        long-lived caller sees a revision a resume added meanwhile). :class:`RecordDamaged` when the
        frozen copy cannot be read: a damaged run is never silently run from its file.
        """
        record = dict(run) if run is not None else self.require_run(run_id)
        frozen = self.frozen(run_id, record)
        if frozen is not None:
            return frozen
        return as_placed(load_file(), bool(record.get("local")))

    def run_placed(self, run_id: str, load_file: Callable[[], Chain]) -> Tuple[str, Optional[str]]:
        """Of :meth:`run_chain`'s chain, what a client for the run needs: (engine, API version), from the
        frozen copy without thawing its steps (a look at a long run asks the API for its jobs first,
        and thaws while the API answers)."""
        record = self.require_run(run_id)
        number = record.get("revision")
        if isinstance(number, int) and number >= 1 and (run_id, number) not in self._frozen:
            from job_chain.spec.frozen import placed

            data = self._revision(run_id, number)
            if not isinstance(data.get("chain"), dict):
                raise self._damaged(run_id, number, "no chain in it")
            return placed(data["chain"])
        chain = self.run_chain(run_id, load_file, record)
        return chain.engine, chain.api_config.get("version")

    def api_config(self, run_id: str, version: Optional[str] = None,
                   file_config: Optional[Callable[[], Mapping[str, Any]]] = None) -> Dict[str, Any]:
        """Rule 8, a run's API config (host, keys, version), in this precedence:

        1. the record's credentials (``credentials.json``: what ``run`` or the last ``resume``
           connected with, :meth:`save_credentials`), taken whole: host and keys as they were then;
        2. only when the record holds no key: the chain file's ``api_config`` as it is now
           (``file_config()``; default: read from the file, tolerantly — it may be broken or gone
           while its runs go on);
        3. the API ``version`` is the one of the chain the run runs (rule 7: the frozen copy's, none
           when it was frozen without one; the planned hop passes its plan's, made from that copy),
           never the file's now nor the copy's.

        Why this order: a run's jobs must work on AIHC from what its record carries, whatever happens
        to the file later, and the session must steer the run where its jobs go. So a host (or key)
        written into the file after the run started is ignored by both while the record has keys,
        rather than keys saved at start being sent to a host written later. Explicit choices are not
        part of this for the session: its ``--host/--ak/--sk/--credentials``, the environment and a
        credentials file come before ``api_config`` in
        :func:`~job_chain.aihc.credentials.resolve_credentials`, so they still win; a local run takes
        only the version from here (its host and keys are the local server's). A run's jobs take the
        record's credentials before anything else (:func:`~job_chain.aihc.credentials.carried_credentials`).
        """
        saved = self.credentials(run_id)
        if saved.get("ak"):
            chosen: Mapping[str, Any] = saved
        elif file_config is not None:
            chosen = file_config()
        else:
            from job_chain.aihc.credentials import file_api_config

            chosen = file_api_config(self.chain_path)
        config = {k: v for k, v in chosen.items() if k != "version" and isinstance(v, str)}
        if version:
            config["version"] = version
        return config

    # -- submissions -------------------------------------------------------------------------
    def record_submission(self, run_id: str, step: str, attempt: int, job_id: str, job_name: str,
                          revision: int = 0, resume: Optional[Tuple[int, str]] = None,
                          mode: Optional[str] = None, cache: Optional[Dict[str, Any]] = None) -> bool:
        """Note a created job (the revision of the chain it ran, the checkpoint a retry was told to
        resume from); False (not an error) when the record is not writable here. ``mode "job"``: its
        own tail reports to this record (so a join can be decided from the record:
        :mod:`~job_chain.hop.readiness`)."""
        entry: Dict[str, Any] = {"step": step, "attempt": attempt, "jobId": job_id, "jobName": job_name,
                                 "submitted": time.time(), "revision": revision}
        if resume is not None:
            entry["resumeFrom"] = {"iteration": resume[0], "checkpoint": resume[1]}
        if mode:
            entry["mode"] = mode
        if cache:
            entry["cache"] = cache
        return self.write(run_id, fact_name(SUBMISSION, step, attempt), entry)

    def submission(self, run_id: str, step: str, attempt: int) -> Optional[Dict[str, Any]]:
        """The recorded submission; None when absent or its job id is not one (a planted file)."""
        entry = self.read(run_id, fact_name(SUBMISSION, step, attempt))
        return entry if entry is not None and is_job_id(entry.get("jobId")) else None

    def submissions(self, run_id: str, listing: Optional[Listed] = None,
                    known: Optional[Mapping[Key, Dict[str, Any]]] = None, fast: bool = False) -> List[Dict[str, Any]]:
        """Every recorded submission (``listing``: the run's, when the caller has just made it;
        ``known``: submissions already read, by step and attempt, whose files are not read again;
        ``fast``: a look, which reads thousands of them, decodes them with :mod:`job_chain.util.jsonio`)."""
        entries = [e for e in self._entries(run_id, SUBMISSION, listing, known, fast)
                   if is_job_id(e.get("jobId"))]
        return sorted(entries, key=lambda e: (float(e.get("submitted") or 0), e["step"], e["attempt"]))

    def claim_cached(self, run_id: str, step: str, attempt: int, data: Dict[str, Any]) -> bool:
        """Take (``step``, ``attempt``) as reusing a cached success (``data``: where from): True for
        exactly one caller, False when someone did already. Not writable here: OSError."""
        return self.create(run_id, fact_name(CACHED, step, attempt), data)

    def cached(self, run_id: str, listing: Optional[Listed] = None) -> List[Dict[str, Any]]:
        """The run's attempts that reused a cached success, each with its step and attempt."""
        return self._entries(run_id, CACHED, listing)

    def first_job_id(self, run_id: str) -> Optional[str]:
        """The run's first job: a job list walked newest first can stop there."""
        entries = self.submissions(run_id)
        return entries[0]["jobId"] if entries else None

    # -- the script's exit, success, gave up ---------------------------------------------------
    def record_exit(self, run_id: str, step: str, attempt: int, exit_code: int,
                    checkpoint_iteration: Optional[int] = None, checkpoint_saved: Optional[float] = None) -> bool:
        """The user script's own exit code (the job's may differ: 75 when advancing failed), the last
        complete checkpoint then and when it was saved (its tracker's time)."""
        entry: Dict[str, Any] = {"exitCode": exit_code, "at": time.time()}
        if checkpoint_iteration is not None:
            entry["checkpointIteration"] = checkpoint_iteration
            if checkpoint_saved is not None:
                entry["checkpointSaved"] = checkpoint_saved
        return self.must_write(run_id, fact_name(EXIT, step, attempt), entry)

    def record_advance_end(self, run_id: str, step: str, attempt: int, planned: bool = False) -> bool:
        """When the advance that ends this job finished: the job's end, to the millisecond (GPU-hours);
        ``planned``: it followed the plan made when the job was submitted (:mod:`~job_chain.submit.plans`)."""
        entry = self.exit_entry(run_id, step, attempt)
        if entry is None:
            return False
        entry["ended"] = time.time()
        if planned:
            entry["planned"] = True
        return self.write(run_id, fact_name(EXIT, step, attempt), entry)

    def exit_entry(self, run_id: str, step: str, attempt: int) -> Optional[Dict[str, Any]]:
        return self.read(run_id, fact_name(EXIT, step, attempt))

    def script_exit(self, run_id: str, step: str, attempt: int) -> Optional[int]:
        code = (self.exit_entry(run_id, step, attempt) or {}).get("exitCode")
        return code if isinstance(code, int) and not isinstance(code, bool) else None

    def record_succeeded(self, run_id: str, step: str, attempt: int) -> bool:
        """Step ``step`` succeeded (every replica): written before its job looks at the others.

        Two predecessors of a join that finish together each write this first and read the
        other's second, so at least one of them sees both and submits the join — which holds only
        if the marker is durable: when it cannot be written, RecordUnwritable (never False).
        """
        return self.must_write(run_id, fact_name(SUCCEEDED, step, attempt), {"at": time.time()})

    def succeeded(self, run_id: str, step: str, attempt: int) -> bool:
        return os.path.exists(self._path(run_id, fact_name(SUCCEEDED, step, attempt)))

    def record_advance_failure(self, run_id: str, step: str, attempt: int, message: str) -> bool:
        return self.write(run_id, fact_name(ADVANCE_FAILED, step, attempt), {"message": message, "at": time.time()})

    def advance_failure(self, run_id: str, step: str, attempt: int) -> Optional[str]:
        entry = self.read(run_id, fact_name(ADVANCE_FAILED, step, attempt))
        return str(entry.get("message") or "advance gave up") if entry is not None else None

    def clear_advance_failures(self, run_id: str) -> None:
        for name in self.listed(run_id)[ADVANCE_FAILED].values():
            with contextlib.suppress(OSError):
                self.remove(run_id, name)

    # -- why it failed ---------------------------------------------------------------------------
    def record_failure(self, run_id: str, step: str, attempt: int, data: Dict[str, Any]) -> Dict[str, Any]:
        """Keep why ``attempt`` failed unless someone already did; return what is kept (theirs, if first).

        Written beside, then linked into place: the link fails when the file exists, so two
        replicas (or a replica and ``status``) never keep different causes. Not writable here:
        ``data`` itself.
        """
        name = fact_name(FAILURE, step, attempt)
        existing = self.read(run_id, name)
        if existing is not None:
            return existing
        import json

        try:  # \u escapes: any text
            create_private(self._path(run_id, name), json.dumps(dict(data, at=time.time()), indent=2) + "\n")
        except OSError:
            return data
        return self.read(run_id, name) or data

    def failure(self, run_id: str, step: str, attempt: int) -> Optional[Dict[str, Any]]:
        return self.read(run_id, fact_name(FAILURE, step, attempt))

    # -- what status knew ------------------------------------------------------------------------
    def attempts_cache(self, run_id: str) -> Dict[str, Any]:
        """The attempts the last look at the run knew (job id -> what :mod:`job_chain.status.look`
        kept); {} when there is none or it is damaged (a look asks the API again)."""
        return read_json_dict(self._path(run_id, layout.ATTEMPTS_CACHE), fast=True) or {}

    def keep_attempts_cache(self, run_id: str, data: Dict[str, Any]) -> bool:
        """Keep what a look knew; False (not an error) where the record is not writable. Compact
        (:func:`job_chain.util.jsonio.dumps`): a cache no one reads by eye, of every job of the run (a
        5,000-step run's took ~150 ms indented, ~30 ms compact, ~2 ms by orjson)."""
        from job_chain.util.jsonio import dumps

        return self._write_bytes(run_id, layout.ATTEMPTS_CACHE, dumps(data), sync=False)

    # -- everything at once ------------------------------------------------------------------------
    def facts(self, run_id: str, run: Optional[Dict[str, Any]] = None,
              keys: Optional[Iterable[Key]] = None,
              submissions: Optional[List[Dict[str, Any]]] = None, names: Optional[List[str]] = None,
              start: Optional[StartFacts] = None) -> RunFacts:
        """What the record knows, about the (step, attempt) ``keys`` only (None: every exit and gave-up).

        A 500-step run has 1,000 such files; a look at it needs the few that did not succeed.
        ``submissions`` (when the caller read them already) gives each attempt's submission time
        and the checkpoint a retry was told to resume from; ``start``, the run's start (likewise).
        """
        run = run if run is not None else (self.get_run(run_id) or {})
        start = start if start is not None else self.start_facts(run_id)
        from job_chain.rules.facts import RunFacts

        facts = RunFacts(started=run_start(run, run_id), stopped=self.is_stopped(run_id),
                         round=self.round(run_id, run), start_failed=start.failed,
                         notify_failed=[e["message"] for e in self.notify_failures(run_id, names)])
        if keys is None:
            self._all_exits(run_id, facts)
        else:
            self.attempt_facts(run_id, facts, keys)
        for entry in submissions if submissions is not None else self.submissions(run_id):
            key = (entry["step"], entry["attempt"])
            if isinstance(entry.get("submitted"), (int, float)):
                facts.submitted[key] = float(entry["submitted"])
            resume = entry.get("resumeFrom")
            if isinstance(resume, dict) and isinstance(resume.get("iteration"), int):
                facts.resumed[key] = (resume["iteration"], str(resume.get("checkpoint") or ""))
        return facts

    def attempt_facts(self, run_id: str, facts: RunFacts, keys: Iterable[Key]) -> None:
        """Add to ``facts`` what the record knows about each (step, attempt) of ``keys``: its exit
        code, whether it succeeded, why an advance gave up, why it failed, its checkpoint, its end."""
        for key in set(keys):
            entry = self.exit_entry(run_id, *key)
            if entry is not None:
                code, iteration, ended = entry.get("exitCode"), entry.get("checkpointIteration"), entry.get("ended")
                if isinstance(code, int) and not isinstance(code, bool):
                    facts.script_exit[key] = code
                if isinstance(iteration, int) and not isinstance(iteration, bool):
                    facts.checkpoints[key] = iteration
                    saved = entry.get("checkpointSaved")
                    if isinstance(saved, (int, float)) and not isinstance(saved, bool):
                        facts.checkpoint_saved[key] = float(saved)
                if isinstance(ended, (int, float)) and not isinstance(ended, bool):
                    facts.ended[key] = float(ended)
            if self.succeeded(run_id, *key):
                facts.succeeded.add(key)
            gave_up = self.advance_failure(run_id, *key)
            if gave_up is not None:
                facts.advance_failed[key] = gave_up
            recorded = self.failure(run_id, *key)
            if recorded is not None:
                from job_chain.failures.classify import Failure  # (a run that failed nowhere never imports it)

                failure = Failure.from_record(recorded)
                if failure is not None:
                    facts.failures[key] = failure

    def _all_exits(self, run_id: str, facts: RunFacts) -> None:
        """Every exit code and gave-up message of the run (when no keys are given), from one listing."""
        listing = self.listed(run_id)
        for e in self._entries(run_id, EXIT, listing):
            if isinstance(e.get("exitCode"), int):
                facts.script_exit[(e["step"], e["attempt"])] = int(e["exitCode"])
        for e in self._entries(run_id, ADVANCE_FAILED, listing):
            facts.advance_failed[(e["step"], e["attempt"])] = str(e.get("message") or "advance gave up")
        facts.succeeded |= {key for key in facts.script_exit if key in listing[SUCCEEDED]}

    # -- notifications and rounds ------------------------------------------------------------
    def claim_notification(self, run_id: str, round_: int, event: str, step: Optional[str]) -> bool:
        """Whether this caller sends ``event`` (about ``step``, or the run) in resume round ``round_``:
        True for exactly one caller, so a notification goes out at most once."""
        try:
            os.makedirs(self._dir(run_id), mode=0o700, exist_ok=True)
            fd = os.open(self._path(run_id, layout.notified_name(round_, event, step)),
                         os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return False
        except OSError:
            return True  # not writable here: cannot deduplicate, so send (best effort)
        os.close(fd)
        return True

    def notified(self, run_id: str, round_: int) -> bool:
        """Whether any notification was claimed in round ``round_`` (the round's end was told)."""
        prefix = layout.notified_prefix(round_)
        return any(name.startswith(prefix) for name in self.names(run_id) or [])

    def save_notify_secrets(self, run_id: str, values: Dict[str, str]) -> None:
        """The values of the variables ``notify`` names, read at run/resume (0600, atomic); an
        OSError when they cannot be kept (the run must not start without them)."""
        os.makedirs(self._dir(run_id), mode=0o700, exist_ok=True)
        write_json_private(self._path(run_id, layout.NOTIFY_SECRETS), dict(values))

    def notify_secrets(self, run_id: str) -> Dict[str, str]:
        """NAME -> value of every ``{"env": NAME}`` of the run's ``notify`` ({} when none was kept)."""
        saved = self.read(run_id, layout.NOTIFY_SECRETS) or {}
        return {str(k): v for k, v in saved.items() if isinstance(v, str)}

    def record_notify_failure(self, run_id: str, target: int, message: str) -> bool:
        """Keep why notify target ``target`` failed, the first time only: True for that one caller."""
        import json

        try:
            return create_private(self._path(run_id, layout.notify_failed_name(target)),
                                  json.dumps({"target": target, "message": message, "at": time.time()}))
        except OSError:
            return False

    def notify_failures(self, run_id: str, names: Optional[List[str]] = None) -> List[Dict[str, Any]]:
        """Each target that failed, with why (``target``, ``message``, ``at``), in target order
        (``names``: the run's listing, when the caller has just made it)."""
        found = []
        for name, match in layout.NOTIFY_FAILED.among(self.names(run_id) or [] if names is None else names):
            entry = self.read(run_id, name)
            if entry is not None:
                found.append({"target": int(match.group(1)), "message": str(entry.get("message") or "failed"),
                              "at": entry.get("at")})
        return sorted(found, key=lambda e: e["target"])

    def reserve_send(self, bot: str, windows: Any, now: float, max_wait: float) -> Optional[float]:
        """When a message to ``bot`` may go (see :func:`job_chain.record.ratelimit.reserve`)."""
        from job_chain.record.ratelimit import reserve

        state, lock = layout.rate_names(bot)
        return reserve(os.path.join(self.root, state), os.path.join(self.root, lock), windows, now, max_wait)

    def round(self, run_id: str, run: Optional[Dict[str, Any]] = None) -> int:
        """How many times the run was resumed: exit handlers and notifications happen once per round."""
        value = (run if run is not None else self.get_run(run_id) or {}).get("round", 0)
        return value if isinstance(value, int) and value >= 0 else 0

    # -- stopping ----------------------------------------------------------------------------
    def mark_stopped(self, run_id: str) -> None:
        write_json_private(self._path(run_id, layout.STOPPED), {"stopped": time.time()})

    def clear_stopped(self, run_id: str) -> None:
        for name in (layout.STOPPED, layout.START_FAILED):
            self.remove(run_id, name)

    def is_stopped(self, run_id: str) -> bool:
        return os.path.exists(self._path(run_id, layout.STOPPED))
