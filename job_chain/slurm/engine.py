"""Slurm behind the engine seam: a step is one batch job, made with ``sbatch`` and read with
``scontrol``/``squeue``, stopped with ``scancel``. Nothing here does what Slurm does: Slurm queues,
allocates nodes and GPUs, launches the tasks (``srun``), enforces time limits and tells the states.

What Slurm forgets (a finished job leaves ``squeue``/``scontrol`` after ``MinJobAge``; ``sacct``
only exists with accounting) is kept in the engine's directory on the shared filesystem
(``FILE.runs/.slurm/``, given by the caller): the job each key created, each node's log and exit.

**Exactly once** (``docs/slurm.md``): :meth:`SlurmEngine.create` holds an exclusive ``flock`` on
the key's lock file while it looks for the key — its file, then, if the lock file says a creator ran
sbatch for it before, a job of that name known to Slurm (``squeue --name``, and ``sacct --name``
where accounting exists) — and only then writes that it runs sbatch (to the lock file, flushed to
disk), runs ``sbatch --job-name=KEY`` and writes the key's file. Two creators of one key wait for
each other; a creator killed between ``sbatch`` and its file leaves a job Slurm still names, which
the next creator finds; a key nobody ran sbatch for costs one Slurm command, the sbatch.

**A job Slurm ends** (TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY, a CANCELLED by someone else) dies
with its batch script, tail included. So each step's job is submitted with a *watcher*: a one-task
job ``--dependency=afternotok:JOB`` that runs the same advance told the job ended (the body's
``slurmEnded``); the job's tail cancels it when its advance is done (:meth:`SlurmEngine.release`),
and ``--kill-on-invalid-dep=yes`` ends it too when the job completed.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
from datetime import datetime
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple
from urllib.parse import quote, unquote

from job_chain.engine.errors import EngineError
from job_chain.engine.jobs import LABEL_ATTEMPT, LABEL_RUN, LABEL_STEP, Event, Job, Pod
from job_chain.engine.resources import gpus_per_replica
from job_chain.slurm.options import sbatch_words

ENGINE_ENV = "JOB_CHAIN_ENGINE"  # "slurm" in every job this engine submits: the in-job advance builds it
DIR_ENV = "JOB_CHAIN_SLURM_DIR"  # the engine's directory, for the in-job advance
WATCHED_ENV = "JOB_CHAIN_SLURM_WATCHED"  # in a watcher: the job it watches
WATCHER_OPTIONS = ("partition", "account", "qos", "reservation", "clusters", "cluster", "chdir", "wckey")
PAGE = 4 * 1024 * 1024  # bytes of log a page holds
TIMEOUT = 60.0  # seconds a Slurm command may take

# Slurm's job states in job-chain's words (engine/states.py); the reason is told as an event. CANCELLED is
# Stopped only when job-chain's stop cancelled the job, else Failed (SlurmEngine._job_of)
STATES = {
    "PENDING": "Pending", "CONFIGURING": "Pending", "REQUEUED": "Pending", "REQUEUE_HOLD": "Pending",
    "REQUEUE_FED": "Pending", "RESV_DEL_HOLD": "Pending", "SUSPENDED": "Running", "STOPPED": "Running",
    "RUNNING": "Running", "COMPLETING": "Running", "RESIZING": "Running", "SIGNALING": "Running",
    "STAGE_OUT": "Running", "COMPLETED": "Succeeded", "CANCELLED": "Stopped", "FAILED": "Failed",
    "TIMEOUT": "Failed", "NODE_FAIL": "Failed", "OUT_OF_MEMORY": "Failed", "PREEMPTED": "Failed",
    "BOOT_FAIL": "Failed", "DEADLINE": "Failed", "REVOKED": "Failed", "SPECIAL_EXIT": "Failed",
}
SAID = {  # what a job's end means, in the words of its event (and of docs/slurm.md)
    "TIMEOUT": "Slurm ended the job at its time limit (TIMEOUT)",
    "NODE_FAIL": "a node of the job failed (NODE_FAIL)",
    "OUT_OF_MEMORY": "the job ran out of memory (OUT_OF_MEMORY)",
    "PREEMPTED": "the job was preempted (PREEMPTED)",
    "CANCELLED": "the job was cancelled (CANCELLED)",
    "BOOT_FAIL": "a node of the job failed to boot (BOOT_FAIL)",
    "DEADLINE": "the job passed its deadline (DEADLINE)",
}
# the reasons of a FAILED job that say Slurm never started its batch script (squeue(1), JOB REASON CODES);
# any other FAILED job ran its script, which exited non-zero (NonZeroExitCode, RaisedSignal)
NOT_LAUNCHED = frozenset({"JobLaunchFailure", "SystemFailure", "NodeDown"})


def event_kind(state: str) -> str:
    """The kind of the event that tells a job's end: ``JobTimeout``, ``JobNodeFail``, … (a failure's cause
    when its log says nothing: ``failures/classify.VERDICT_EVENTS``)."""
    return "Job" + state.title().replace("_", "")


class SlurmError(EngineError):
    engine = "slurm"


def _transient(text: str) -> bool:
    """slurmctld not answering (restarting, overloaded): the same command may work later."""
    words = ("Unable to contact slurm controller", "Socket timed out", "Connection refused",
             "Zero Bytes were transmitted", "Slurm temporarily unable", "Transport endpoint",
             "communication connection failure", "Resource temporarily unavailable")
    return any(w.lower() in text.lower() for w in words)


def run_slurm(argv: List[str], *, stdin: Optional[str] = None, timeout: float = TIMEOUT) -> str:
    """A Slurm command's output; :class:`SlurmError` (retryable when slurmctld did not answer)."""
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} is not installed here: job-chain drives Slurm through its commands "
                         "(sbatch, squeue, scontrol, scancel); install the Slurm client", status=400) from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{argv[0]} did not answer in {timeout:g}s") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        text = said[-1] if said else f"exit code {done.returncode}"
        raise SlurmError(f"{argv[0]}: {text}", status=None if _transient(text) else 400)
    return done.stdout


def _seconds(text: Optional[str]) -> Optional[float]:
    """Slurm's local times (``2026-11-29T02:46:10``) as epoch seconds; None for Unknown/N/A/None."""
    if not text or not text[:1].isdigit():
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def comment_of(run_id: str, step: str, attempt: str) -> str:
    """The labels job-chain gives a job, as its Slurm comment (no spaces: scontrol's -o stays parsable)."""
    return ",".join(f"{k}={quote(v, safe='')}" for k, v in ((LABEL_RUN, run_id), (LABEL_STEP, step),
                                                            (LABEL_ATTEMPT, attempt)))


def labels_of(comment: str) -> Dict[str, str]:
    out = {}
    for part in (comment or "").split(","):
        key, eq, value = part.partition("=")
        if eq and key.startswith("job-chain/"):
            out[key] = unquote(value)
    return out


def parse_show(line: str) -> Dict[str, str]:
    """One job of ``scontrol -o show job``: ``Key=Value`` words (a value may hold spaces: then it
    runs to the next ``Key=``)."""
    out: Dict[str, str] = {}
    key = None
    for word in line.split(" "):
        name, eq, value = word.partition("=")
        if eq and name and (name[0].isupper() or name in ("AllocNode:Sid",)) and "/" not in name[:1]:
            key = name
            out[key] = value
        elif key is not None and word:
            out[key] += " " + word
    return out


def state_of(show: Mapping[str, str]) -> str:
    """The state word of a ``scontrol show job`` answer (``COMPLETED``; ``CANCELLED`` of
    ``CANCELLED by 0``; ``UNKNOWN`` when it says none)."""
    words = (show.get("JobState") or "").split()
    return words[0].rstrip("+") if words else "UNKNOWN"


def show_job(job_id: str) -> Dict[str, str]:
    """``scontrol -o show job``'s answer for one job; a :class:`SlurmError` when it says nothing."""
    lines = run_slurm(["scontrol", "-o", "show", "job", job_id]).strip().splitlines()
    if not lines:
        raise SlurmError(f"scontrol show job {job_id} answered nothing")
    return parse_show(lines[0])


class SlurmEngine:
    """The engine seam over a Slurm cluster's commands; ``state_dir`` on the filesystem every node
    sees (``FILE.runs/.slurm``). The pool is not used: where a job runs is its sbatch options'."""

    is_engine = True
    page_size = 1_000_000  # squeue answers every job at once

    def __init__(self, state_dir: str) -> None:
        self.state_dir = os.path.abspath(state_dir)

    def __repr__(self) -> str:
        return f"SlurmEngine({self.state_dir!r})"

    @property
    def endpoint(self) -> str:
        return f"slurm:{os.environ.get('SLURM_CONF') or 'default'}"

    def _path(self, *parts: str) -> str:
        return os.path.join(self.state_dir, *parts)

    def _ensure(self) -> None:
        for sub in ("keys", "logs", "exits", "scripts", "watchers", "stopped"):
            os.makedirs(self._path(sub), exist_ok=True)

    # -- create, once per key
    def create(self, pool: str, body: Dict[str, Any], key: str) -> Tuple[str, str]:
        self._ensure()
        from job_chain.util.files import write_private

        with open(self._path("keys", f"{key}.lock"), "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel if this process dies
            lock.seek(0)
            tried = bool(lock.read(1))  # a creator ran sbatch for this key before (its job may have no file)
            found, going = self._known(key, ask_slurm=tried)
            fresh = found is None
            if found is None:
                lock.write(f"sbatch by {os.getpid()}\n")  # durably, before the job exists: the next creator asks
                lock.flush()
                os.fsync(lock.fileno())
                found, going = self._sbatch(body, key), True
            if going and body.get("slurmEnded") and not os.path.exists(self._path("watchers", found)):
                self._watch(body, key, found, fresh)  # also for a job whose creator died before watching it
            write_private(self._path("keys", key), found)  # last: a key's file means its job is watched
        return found, key

    def _known(self, key: str, ask_slurm: bool = True) -> Tuple[Optional[str], bool]:
        """The job this key made — its file, else (``ask_slurm``: a creator ran sbatch for it) a job of
        that name Slurm still knows — and whether it may still need a watcher (found in Slurm's
        queue, not ended). A key no creator ever ran sbatch for costs no Slurm command."""
        try:
            with open(self._path("keys", key)) as f:
                recorded = f.read().strip()
            if recorded:
                return recorded, False
        except FileNotFoundError:
            pass
        if not ask_slurm:
            return None, False
        rows = [line.split() for line in run_slurm(["squeue", "-h", "-t", "all", f"--name={key}", "-o",
                                                    "%i %T"]).splitlines() if line.strip()]
        if not rows and self._accounting():
            rows = [[jid, "COMPLETED"] for jid in run_slurm(["sacct", "-n", "-X", "-P", f"--name={key}", "-o", "JobID",
                                                             "-S", "now-7days"]).split()]
        if rows:
            return rows[0][0], STATES.get(rows[0][-1]) in ("Pending", "Running")
        return None, False

    def _watch(self, body: Dict[str, Any], key: str, job_id: str, fresh: bool = True) -> None:
        """Submit the job's watcher: one task, after the job ends in any failed state (afternotok),
        with the step's partition, account and QoS; it runs ``body["slurmEnded"]``. A watcher that
        cannot be submitted is said, not fatal: the job runs, and a failure Slurm decides then waits
        for ``resume``, as without a watcher."""
        from job_chain.util.files import write_private
        from job_chain.util.log import log

        spec = body.get("jobSpec") or {}
        options = {k: v for k, v in dict(body.get("slurm") or {}).items() if k in WATCHER_OPTIONS}
        options.setdefault("chdir", os.path.dirname(os.path.dirname(self.state_dir)))
        script = ("#!/bin/bash\n# job-chain: job " + job_id + " ended without its tail (Slurm ended it): "
                  "advance from here\n" + self._exports(spec) + f"export {WATCHED_ENV}={job_id} RANK=0\n"
                  + str(body["slurmEnded"]) + "\n")
        argv = ["sbatch", "--parsable", f"--job-name=watch-{key}", f"--dependency=afternotok:{job_id}",
                "--kill-on-invalid-dep=yes", "--nodes=1", "--ntasks=1",
                f"--output={self._path('logs', f'{job_id}.watch.log')}", *sbatch_words(options)]
        try:
            known = [] if fresh else run_slurm(["squeue", "-h", "-t", "all", f"--name=watch-{key}", "-o", "%i"]).split()
            watcher = known[0] if known else run_slurm(argv, stdin=script).strip().split(";")[0]
        except SlurmError as exc:
            log(f"job {job_id} has no watcher ({exc.message}): if Slurm ends it (TIMEOUT, NODE_FAIL, PREEMPTED), "
                "nothing advances the run until 'job-chain resume' retries it")
            return
        write_private(self._path("watchers", job_id), watcher)

    def release(self, job_id: str) -> None:
        """The job's tail finished its advance (or the run was stopped): its watcher has nothing to do,
        and is cancelled while it waits."""
        try:
            with open(self._path("watchers", job_id)) as f:
                watcher = f.read().strip()
        except FileNotFoundError:
            return
        if watcher:
            try:
                run_slurm(["scancel", watcher])
            except SlurmError:  # ended already (kill-on-invalid-dep): nothing to cancel
                pass

    def verdict(self, job_id: str) -> Tuple[str, int]:
        """How Slurm ended a job: its state and an exit code (its own; else 128 + the signal that
        ended it; else 1), read as :meth:`job` reads it (a job Slurm forgot: what it left)."""
        show = self._shown(job_id)
        state = state_of(show)
        code, _, signal = (show.get("ExitCode") or "").partition(":")
        number = int(code) if code.isdigit() else 0
        if not number:
            number = 128 + int(signal) if signal.isdigit() and int(signal) else 1
        return state, number

    def _accounting(self) -> bool:
        try:
            run_slurm(["sacct", "-n", "-X", "-j", "0"], timeout=10)
        except SlurmError:
            return False
        return True

    def _sbatch(self, body: Dict[str, Any], key: str) -> str:
        spec = body.get("jobSpec") or {}
        replicas = int(spec.get("replicas") or 1)
        script = self._path("scripts", f"{key}.sh")
        from job_chain.util.files import write_private

        write_private(script, str(spec.get("command") or ""))
        labels = {str(x.get("key")): str(x.get("value")) for x in body.get("labels") or [] if isinstance(x, dict)}
        gpus = int(gpus_per_replica(body))
        options = dict(body.get("slurm") or {})
        options.setdefault("chdir", os.path.dirname(os.path.dirname(self.state_dir)))
        comment = comment_of(labels.get(LABEL_RUN, ""), labels.get(LABEL_STEP, ""), labels.get(LABEL_ATTEMPT, ""))
        argv = ["sbatch", "--parsable", f"--job-name={key}", f"--nodes={replicas}", "--ntasks-per-node=1",
                f"--output={self._path('logs', '%j.batch.log' if replicas > 1 else '%j.0.log')}",
                f"--comment={comment}",
                *([f"--gres=gpu:{gpus}"] if gpus else []), *sbatch_words(options)]
        answer = run_slurm(argv, stdin=self.batch_script(spec, script, replicas))
        return answer.strip().split(";")[0]

    def batch_script(self, spec: Mapping[str, Any], script: str, replicas: int) -> str:
        """The batch job: the step's environment, then its (wrapped) command on every node — under
        ``srun`` with more than one — each node's log and exit code kept in the engine's directory."""
        exports = self._exports(spec)
        logs, exits = shlex.quote(self._path("logs")), shlex.quote(self._path("exits"))
        node = ("export RANK=${SLURM_PROCID:-0} POD_NAME=$SLURM_JOB_ID-${SLURM_PROCID:-0}; "
                f"bash {shlex.quote(script)}; rc=$?; "
                f"echo $rc > {exits}/$SLURM_JOB_ID.${{SLURM_PROCID:-0}}; exit $rc")
        if replicas > 1:
            run = (f"srun --kill-on-bad-exit=0 --output={logs}/%j.%t.log --ntasks={replicas} "
                   f"--ntasks-per-node=1 bash -c {shlex.quote(node)}\n")
            first = "$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)"
        else:  # in the batch shell itself (no process more before the step's start); its output is the
            run = node.replace("; ", "\n") + "\n"  # batch job's: Slurm's own words too
            first = "$SLURM_JOB_NODELIST"  # one node: the list is its name
        return ("#!/bin/bash\n# job-chain: the step's command on each node; its log and exit code kept for job-chain\n"
                f"{exports}export WORLD_SIZE={replicas} MASTER_ADDR={first} "
                "MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000)) AIHC_JOB_NAME=$SLURM_JOB_NAME\n"
                f"{run}")

    def _exports(self, spec: Mapping[str, Any]) -> str:
        """The step's environment and the engine's, as ``export`` lines."""
        envs = {ENGINE_ENV: "slurm", DIR_ENV: self.state_dir}
        envs.update({str(e["name"]): str(e.get("value", "")) for e in spec.get("envs") or []
                     if isinstance(e, dict) and e.get("name")})
        return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in envs.items())

    # -- reading
    def job(self, pool: str, job_id: str) -> Job:
        return self._job_of(self._shown(job_id), pods=True)

    def _shown(self, job_id: str) -> Dict[str, str]:
        """What Slurm says of the job (``scontrol show job``), or, for a job it no longer shows (past
        MinJobAge), what is left: ``sacct``'s row where accounting exists, else its nodes' exit codes
        (a :class:`SlurmError` 404 when it left none). What :meth:`job` and :meth:`verdict` read."""
        try:
            return show_job(job_id)
        except SlurmError as exc:
            if "Invalid job id" not in exc.message:
                raise
        if self._accounting():
            rows = run_slurm(["sacct", "-n", "-X", "-P", "-j", job_id, "-o",
                              "JobID,JobName,State,Submit,Start,End,ExitCode,Comment,NNodes"]).splitlines()
            if rows:
                jid, name, state, sub, start, end, code, comment, nodes = (rows[0].split("|") + [""] * 9)[:9]
                return {"JobId": jid, "JobName": name, "JobState": state.split()[0] if state else "", "SubmitTime": sub,
                        "StartTime": start, "EndTime": end, "ExitCode": code, "Comment": comment, "NumNodes": nodes}
        exits = self._exits(job_id)
        if not exits:
            raise SlurmError(f"job {job_id} is not known to Slurm any more (MinJobAge) and left no exit code "
                             "in job-chain's directory", status=404)
        codes = list(exits.values())
        return {"JobId": job_id, "JobState": "COMPLETED" if all(c == 0 for c in codes) else "FAILED",
                "NumNodes": str(len(codes)), "ExitCode": f"{max(codes, key=abs)}:0"}

    def _exits(self, job_id: str) -> Dict[int, int]:
        out = {}
        try:
            names = os.listdir(self._path("exits"))
        except FileNotFoundError:
            return {}
        for name in names:
            jid, _, rank = name.partition(".")
            if jid == job_id and rank.isdigit():
                try:
                    with open(self._path("exits", name)) as f:
                        out[int(rank)] = int(f.read().strip() or "1")
                except (OSError, ValueError):
                    continue
        return out

    def _job_of(self, show: Mapping[str, str], *, pods: bool) -> Job:
        job_id = show.get("JobId", "")
        state = state_of(show)
        status = STATES.get(state, "Unknown")
        if state == "CANCELLED" and not os.path.exists(self._path("stopped", job_id)):
            status = "Failed"  # cancelled by someone else than job-chain's stop: a failure (slurm-cancelled)
        code_text = (show.get("ExitCode") or "").split(":")[0]
        exit_code = int(code_text) if code_text.lstrip("-").isdigit() and status not in ("Pending", "Running") else None
        labels = labels_of(show.get("Comment", ""))
        try:
            attempt: Optional[int] = int(labels[LABEL_ATTEMPT]) if labels.get(LABEL_RUN) else None
        except (KeyError, ValueError):
            attempt = None
        terminal = status not in ("Pending", "Running", "Unknown")
        started = _seconds(show.get("StartTime")) if status != "Pending" else None
        return Job(job_id, show.get("JobName", ""), status, _seconds(show.get("SubmitTime")), started,
                   _seconds(show.get("EndTime")) if terminal else None, exit_code,
                   labels.get(LABEL_RUN) or None, labels.get(LABEL_STEP) or None, attempt,
                   self._pods(job_id, status, int(show.get("NumNodes", "1").split("-")[0] or 1)) if pods else ())

    def _pods(self, job_id: str, status: str, nodes: int) -> Tuple[Pod, ...]:
        """One pod a node (rank = SLURM_PROCID): ended when its exit code is kept, else the job's phase."""
        exits = self._exits(job_id)
        out = []
        for rank in range(max(nodes, 1)):
            if rank in exits:
                phase = "Succeeded" if exits[rank] == 0 else "Failed"
                finished = os.path.getmtime(self._path("exits", f"{job_id}.{rank}"))
            else:
                phase = {"Stopped": "Failed", "Unknown": "Unknown"}.get(status, status)
                finished = None
            out.append(Pod(f"{job_id}-{rank}", rank, phase, finished))
        return tuple(out)

    def jobs(self, pool: str, expected: int = 0) -> Iterator[Job]:
        """Every job Slurm shows, newest first (without pods; one ``squeue`` answers all, whatever is ``expected``)."""
        fields = "%i|%j|%T|%V|%S|%e|%k|%D"
        rows = []
        for line in run_slurm(["squeue", "-h", "-t", "all", "-o", fields]).splitlines():
            parts = line.split("|")
            if len(parts) != 8 or not parts[0].isdigit():
                continue
            jid, name, state, sub, start, end, comment, nodes = parts
            rows.append({"JobId": jid, "JobName": name, "JobState": state, "SubmitTime": sub, "StartTime": start,
                         "EndTime": end, "Comment": comment, "NumNodes": nodes})
        for row in sorted(rows, key=lambda r: -int(r["JobId"])):
            yield self._job_of(row, pods=False)

    def stop(self, pool: str, job_id: str) -> None:
        """``scancel`` the job and its watcher (a stopped run advances no further); the job is kept
        as stopped by job-chain (its CANCELLED reads Stopped, anyone else's Failed)."""
        from job_chain.util.files import write_private

        self._ensure()
        write_private(self._path("stopped", job_id), "")
        run_slurm(["scancel", job_id])
        self.release(job_id)

    def events(self, pool: str, job_id: str) -> List[Event]:
        """What Slurm says of the job: its end (state and reason), or why it waits (:func:`events_of`)."""
        try:
            show = self._shown(job_id)
        except SlurmError:
            return []
        return events_of(show, bool(self._exits(job_id)))

    def log_page(self, pool: str, job_id: str, pod: str, *, max_lines: Optional[int] = None,
                 marker: Optional[str] = None, **params: Any) -> Tuple[List[str], Optional[str]]:
        """A page of one node's log: the file its task writes; ``marker`` is a byte offset."""
        rank = pod.rsplit("-", 1)[-1]
        path = self._path("logs", f"{job_id}.{rank}.log")
        start = int(marker) if marker and marker.isdigit() else 0
        try:
            with open(path, "rb") as f:
                if max_lines is not None and marker is None:  # the tail: the last max_lines lines
                    data = f.read()
                    lines = data.decode("utf-8", "replace").splitlines(keepends=True)
                    return ["".join(lines[-max_lines:])] if lines else [], None
                f.seek(start)
                data = f.read(PAGE)
        except FileNotFoundError:
            return [], None
        if not data:
            return [], None
        following = str(start + len(data)) if len(data) == PAGE else None
        return [data.decode("utf-8", "replace")], following


def events_of(show: Mapping[str, str], ran: bool) -> List[Event]:
    """A ``scontrol show job`` answer as the seam's events; ``ran``: a node of the job kept its script's
    exit code. A FAILED job whose script ran (its exit kept, or a reason other than
    :data:`NOT_LAUNCHED`) is told as the script's exit (``ExitedWithCode``: its cause is its log's, or
    ``unknown`` by its exit code, never the platform's); one Slurm never launched as ``FailedLaunch``
    with Slurm's reason (the ``platform`` cause, ``failures/classify.PLATFORM_EVENTS``); any other end
    by its state (:func:`event_kind`: Slurm's verdict, ``failures/classify.VERDICT_EVENTS``)."""
    state = state_of(show)
    reason = show.get("Reason", "None")
    when = _seconds(show.get("EndTime")) if STATES.get(state) in ("Failed", "Stopped", "Succeeded") else None
    said = f"; reason: {reason}" if reason not in ("None", "") else ""
    code = show.get("ExitCode", "?")
    if state == "FAILED" and (ran or reason not in NOT_LAUNCHED):
        return [Event("ExitedWithCode", "Warning", f"the job's batch script exited with code {code.partition(':')[0]} "
                      f"(FAILED){said}", when)]
    if state == "FAILED":
        return [Event("FailedLaunch", "Warning", f"Slurm could not launch the job's batch script (FAILED){said}; "
                      f"exit code {code}", when)]
    if state in SAID:
        return [Event(event_kind(state), "Warning", SAID[state] + said + f"; exit code {code}", when)]
    if state == "PENDING" and reason not in ("None", ""):
        return [Event("JobPending", "Normal", f"waiting in Slurm's queue: {reason}", None)]
    return []


def engine_from_env() -> Optional[SlurmEngine]:
    """The engine a job this engine submitted runs under (None outside one)."""
    if os.environ.get(ENGINE_ENV) == "slurm" and os.environ.get(DIR_ENV):
        return SlurmEngine(os.environ[DIR_ENV])
    return None
