"""The lean hop: a step of a plain line submits the next one from a plan made when it was submitted.

A linear hop needs nothing of the chain but the next step's create request — yet building that
request means thawing the frozen chain, which loads the model, the graph, parameters, matrices
and slots: most of what a hop's fresh Python imports beyond the SDK. So whoever submits a step
that a plain line follows (``run``, ``resume``, a full hop) also writes, beside its submission,
``lean-<step>-attempt-<n>.json``: for that step and the next few of its line, the exact request
(body, client token, attempt) its success submits, made by the same code that submits it, under
the run's current revision.

The step's tail (:mod:`job_chain.hop`) then does what the full advance does on that path and no
more: record the exit and the success, create the next job with the planned token, record the
submission, and pass the rest of the plan on to it. Whenever anything differs from the plan's
assumptions — another revision, a non-zero exit, outputs written, a stopped run, any error — it
returns without deciding, and the full advance runs from the start; every step of it is
idempotent (facts rewritten, the same client token), so nothing is created twice.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict, Optional

if TYPE_CHECKING:
    from job_chain.record.records import RunRecords

from job_chain.record.plans import read_plan, remove_plan, write_plan
from job_chain.util.log import log


# -- following a plan (in the finishing job) ----------------------------------------------------------
def follow(config_path: str, run_id: str, step: str, attempt: int, outputs_file: Optional[str]) -> Optional[int]:
    """Advance (``step``, ``attempt``), which exited 0, by its plan; the job's exit code, or None
    when the full advance must decide (no plan, or anything the plan did not foresee).
    """
    from job_chain.record.records import RunRecords

    records = RunRecords(config_path)
    own = read_plan(records, run_id, step, attempt)
    if own is None:
        return None
    run = records.get_run(run_id) or {}
    steps = own["steps"]
    first = steps[0]
    if run.get("revision") != own.get("revision") or first.get("step") != step:
        return None  # the run changed since the plan was made (resume with changes, a rerun)
    if outputs_file and _has_content(outputs_file):
        return None  # outputs are kept by the full advance
    recorded = records.record_exit(run_id, step, attempt, 0)
    if records.is_stopped(run_id):
        return None
    if recorded:
        records.note_own_job(run_id, step, attempt)
    records.record_succeeded(run_id, step, attempt)  # durably, before looking at the others
    name, number = str(first["next"]), int(first["attempt"])
    if first.get("needs"):
        ready = join_ready(records, run_id, first["needs"])
        if ready is None:
            return None
        if not ready:
            log(f"step {step} succeeded; its dependents also wait for {', '.join(first['needs'])}")
            return _done(records, run_id, step, attempt)
    done = records.submission(run_id, name, number)
    if done:
        log(f"step {name} was already submitted as job {done['jobId']}")
    else:
        from job_chain.aihc.connect import connect

        client = connect(api_config=records.api_config(run_id, own.get("version")),
                         api_config_origin=f"{config_path} api_config")
        result = client.create_job(own["pool"], first["body"], client_token=first["token"])
        job_id, job_name = result.get("jobId", ""), result.get("jobName") or first["body"].get("name", "")
        records.record_submission(run_id, name, number, job_id, job_name, int(own["revision"]), mode="job")
        write_plan(records, run_id, name, number, int(own["revision"]), own.get("version"), own["pool"], steps[1:])
        log(f"step {name} submitted job {job_id}")
        if records.is_stopped(run_id):  # stop raced with this submit
            client.stop_job(own["pool"], job_id)
            log(f"run {run_id} was stopped meanwhile; stopped job {job_id} again")
    return _done(records, run_id, step, attempt)


def _done(records: RunRecords, run_id: str, step: str, attempt: int) -> int:
    """The job ends now (its end, for GPU-hours); its plan has served (a second tail of the same
    attempt finds none and takes the full advance, which finds every step of it done)."""
    records.record_advance_end(run_id, step, attempt, planned=True)
    remove_plan(records, run_id, step, attempt)
    return 0


def join_ready(records: RunRecords, run_id: str, needs: Dict[str, int]) -> Optional[bool]:
    """Whether every other step a join needs has succeeded (its latest attempt from ``needs[name]``
    on has a succeeded marker): True; False when one has not but its tail is still to report —
    it is not submitted yet (a split is still creating its siblings), or submitted in job mode,
    or reporting (its script exited 0, its marker is next) — so it will see this step's marker
    when it writes its own; None for anything else (a failure, a step submitted where no tail
    reports here, or one not submitted in a run where something failed — it may never be, and the
    full advance says how the run ended): the full advance decides."""
    from job_chain.util.files import read_json_dict

    facts = records.listed(run_id)
    troubled = bool(facts["failure"] or facts["advance-failed"])  # a step failed, or a create gave up
    seen: Dict[str, Dict[int, set]] = {}  # step -> attempt -> kinds of fact
    for kind in ("step", "exit", "succeeded"):
        for name, number in facts[kind]:
            if name in needs and number >= needs[name]:
                seen.setdefault(name, {}).setdefault(number, set()).add(kind)
    ready = True
    for name in needs:
        attempts = seen.get(name)
        if not attempts:  # not submitted yet: whoever submits it (a split still creating), its tail reports here
            if troubled:
                return None
            ready = False
            continue
        latest = max(attempts)
        kinds = attempts[latest]
        if "succeeded" in kinds:
            continue
        if "exit" in kinds:  # its tail is running: between its exit and its marker when it exited 0
            entry = read_json_dict(os.path.join(records.directory(run_id), facts["exit"][(name, latest)])) or {}
            if entry.get("exitCode") != 0:
                return None  # it failed (or is unreadable): the full advance decides
        else:
            entry = read_json_dict(os.path.join(records.directory(run_id), facts["step"][(name, latest)])) or {}
            if entry.get("mode") != "job":
                return None
        ready = False
    return ready


def _has_content(path: str) -> bool:
    try:
        return os.path.getsize(path) > 0
    except OSError:
        return False

