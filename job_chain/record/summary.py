"""A summary per run: what ``runs``, the console and :meth:`ChainSession.summaries` list, without
working out a status for every run each time.

``FILE.runs/.summaries/RUN.json`` holds a copy of the run's ``run.json``, what a look at the run
said of it (outcome, why, the steps failed or going, GPU-hours, parameters: the fields
:func:`job_chain.status.summary.fields` decides) and its *basis*: the modification time of the
run's directory when that look began. Every fact about a run is a file created or renamed into its
directory (a step's submission and end, the run's stop, a resume's revision), so a directory whose
time differs from the basis changed since: its summary is stale and the next reader works it out
again and writes it. Kept outside the run's directory, a summary does not change what it is dated by;
a run copied or restored into ``FILE.runs/`` by hand has none (or one whose basis does not match) and
is worked out once, like any other.

:func:`usable` is the one rule for when a summary stands in for a look at the run.
"""

from __future__ import annotations

import os
import stat
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from job_chain.record import layout
from job_chain.record.records import RunRecords, run_start
from job_chain.util.files import read_json_dict, write_private

VERSION = 1
SETTLE_NS = 2_000_000_000  # a basis this recent is not trusted: a coarse clock may hide a write in its tick


class Listed(NamedTuple):
    """One run as the listing found it: ``run`` its ``run.json`` (None: damaged), ``fields`` what its
    summary says when :func:`usable` (None: it must be looked at)."""

    run_id: str
    run: Optional[Dict[str, Any]]
    fields: Optional[Dict[str, Any]]


def _path(records: RunRecords, run_id: str, folder: str = layout.SUMMARIES) -> str:
    """The run's file in ``folder`` of ``FILE.runs/``: its summary, or (``layout.LOOKS``) its kept look."""
    return os.path.join(records.root, folder, layout.summary_name(run_id))


def basis(records: RunRecords, run_id: str) -> Optional[int]:
    """The run directory's modification time (ns) now; None when it is gone."""
    try:
        return os.stat(records.directory(run_id)).st_mtime_ns
    except OSError:
        return None


def usable(data: Optional[Dict[str, Any]], run_id: str, mtime_ns: Optional[int]) -> bool:
    """Whether a summary stands in for a look at the run: it is of this version and run, its basis is
    the run directory's time now, and the run it describes cannot change without its record changing
    (it ended, and it runs a frozen chain: a run recorded before runs were frozen runs the file as it
    is now; a running one moves in the API)."""
    if not data or data.get("version") != VERSION or mtime_ns is None or data.get("basis") != mtime_ns:
        return False
    run, fields = data.get("run"), data.get("status")
    if not isinstance(run, dict) or run.get("id") != run_id or not isinstance(fields, dict):
        return False
    revision = run.get("revision")
    return fields.get("outcome") in ("succeeded", "failed", "stopped") and isinstance(revision, int) and revision >= 1


def keep(records: RunRecords, run_id: str, run: Dict[str, Any], fields: Dict[str, Any],
         before: Optional[int], whole: Optional[Callable[[], Dict[str, Any]]] = None) -> None:
    """Write the run's summary from a look that began when its directory's time was ``before``, and
    for an ended run the look itself (``whole()``, see :func:`kept_look`) with the same basis.

    The basis is kept only when nothing changed the directory during the look and that time is not
    too recent to tell (else the next reader looks again, once). Best effort: an unwritable record
    (a job's view, a read-only copy) loses only this."""
    after = basis(records, run_id)
    settled = before is not None and after is not None and time.time_ns() - before > SETTLE_NS and (
        after == before or _only_a_looks_own(records, run_id, before))
    if settled:
        before = after
    data = {"version": VERSION, "basis": before if settled else None, "run": run, "status": fields}
    if whole is not None and usable(data, run_id, before):
        _write(records, layout.LOOKS, run_id, {"version": VERSION, "basis": before, "look": whole()})
    if _read(records, run_id) == data:
        return  # a run watched every second: its summary is written when what it says changes
    _write(records, layout.SUMMARIES, run_id, data)
    records.summary_memo.pop(run_id, None)


def _write(records: RunRecords, folder: str, run_id: str, data: Dict[str, Any]) -> None:
    import json

    try:
        path = _path(records, run_id, folder)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        write_private(path, json.dumps(data, separators=(",", ":"), ensure_ascii=True),
                      sync=False)  # a cache: one lost in a crash is worked out again
    except (OSError, ValueError, TypeError):
        pass


def kept_look(records: RunRecords, run_id: str, now: Optional[int]) -> Optional[Dict[str, Any]]:
    """The last look at the run, whole (what :func:`keep` was given), when it stands in for a new
    one: the run's summary does (:func:`usable`) and the look has the same basis, the run
    directory's time ``now`` (:func:`basis`, taken by the caller). A 5,000-step run that ended is
    then shown from one file; a run that changed since is looked at again."""
    if not usable(_read(records, run_id), run_id, now):
        return None
    data = read_json_dict(_path(records, run_id, layout.LOOKS))
    if data is None or data.get("version") != VERSION or data.get("basis") != now:
        return None
    look = data.get("look")
    return look if isinstance(look, dict) else None


def _only_a_looks_own(records: RunRecords, run_id: str, since: int) -> bool:
    """Whether every file changed in the run's directory after ``since`` is one a look writes itself
    (what it knew of the jobs, why an attempt failed, an inline run's outputs, the end of a run it
    told: ``session/look.tell_a_silent_end``): a run that ended long ago and is looked at for the
    first time is then worked out once, not twice."""
    try:
        with os.scandir(records.directory(run_id)) as entries:
            for entry in entries:
                if entry.stat(follow_symlinks=False).st_mtime_ns <= since or entry.name == layout.ATTEMPTS_CACHE \
                        or layout.told(entry.name):
                    continue
                fact = layout.parse_fact(entry.name)
                if fact is None or fact[0] not in (layout.FAILURE, layout.OUTPUTS):
                    return False
    except OSError:
        return False
    return True


def forget(records: RunRecords, run_id: str) -> None:
    for path in (_path(records, run_id), _path(records, run_id, layout.LOOKS)):
        try:
            os.unlink(path)
        except OSError:
            pass
    records.summary_memo.pop(run_id, None)


def _read(records: RunRecords, run_id: str) -> Optional[Dict[str, Any]]:
    """The run's summary file, parsed once per version of it (a console rereads only what changed)."""
    path = _path(records, run_id)
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        return None
    memo: Dict[str, Tuple[int, Optional[Dict[str, Any]]]] = records.summary_memo
    cached = memo.get(run_id)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    data = read_json_dict(path)
    memo[run_id] = (stamp, data)
    return data


def listing(records: RunRecords) -> List[Listed]:
    """Every run directory in ``FILE.runs/`` (also one copied there by hand), newest first (by
    :func:`~job_chain.record.records.run_start`): one listing, and per run a look at its directory's
    time and its summary; its ``run.json`` is read only when the summary cannot stand in."""
    records.check_root()
    try:
        names = os.listdir(records.root)
    except OSError:
        return []
    out: List[Listed] = []
    for name in names:
        if not layout.is_run_id(name):
            continue
        try:
            st = os.stat(os.path.join(records.root, name))
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue
        data = _read(records, name)
        if data is not None and usable(data, name, st.st_mtime_ns):
            out.append(Listed(name, data["run"], data["status"]))
            continue
        run = records.get_run(name)
        out.append(Listed(name, run if run is not None and run.get("id") == name else None, None))
    out.sort(key=lambda item: (run_start(item.run, item.run_id) or 0.0, item.run_id), reverse=True)
    return out
