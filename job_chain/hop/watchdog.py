"""Step timeouts inside the job: kill a step that runs too long or stops printing (exit 124).

A hung NCCL collective looks like a process that is alive and silent; ``hangTimeout`` catches
it by the time since the last byte on stdout/stderr, ``timeout`` by the time since the start.
The wrapped command's output passes through unchanged. On expiry the step's whole process tree
(:mod:`job_chain.util.proctree`: every process marked as started by this watchdog, wherever ``setsid``
took it, and everything below the command) gets SIGTERM, then SIGKILL after a grace period
whether or not its leader already exited, and the watchdog exits 124 (as coreutils' ``timeout``
does), which ``retries``/``retryOnExitCodes`` then see. SIGTERM and SIGINT sent to the watchdog
(a stopped job) go to the tree, and what is left of it after the grace period is killed. When
the command ends for whatever reason, whatever it left running is ended too, before the
watchdog exits: an attempt's orphan never writes beside the next attempt.

The command stays in the job's process group (no session of its own), so the pod's own stop
reaches it as well. Standard library only: this runs in training images.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import List, Optional

from job_chain.rules.retry import TIMED_OUT  # what a retry treats as a timeout
from job_chain.util import proctree

GRACE = 10.0


def _pump(source: int, sink: int, seen: List[float]) -> None:
    while True:
        try:
            chunk = os.read(source, 65536)
        except OSError:
            return
        if not chunk:
            return
        seen[0] = time.monotonic()
        try:
            os.write(sink, chunk)
        except OSError:
            pass


def run(command: List[str], timeout: Optional[float], hang_timeout: Optional[float], grace: float = GRACE,
        poll: float = 0.2) -> int:
    """Run ``command``; its exit code, or 124 after a timeout. Its process tree ends with it."""
    token = proctree.new_token()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=proctree.marked(os.environ, token))
    start = time.monotonic()
    seen = [start]
    pumps = [threading.Thread(target=_pump, args=(proc.stdout.fileno(), 1, seen), daemon=True),  # type: ignore
             threading.Thread(target=_pump, args=(proc.stderr.fileno(), 2, seen), daemon=True)]  # type: ignore
    for pump in pumps:
        pump.start()
    stopping: List[float] = []  # when a stop (TERM/INT) arrived

    def root() -> List[int]:  # once reaped, its pid may be another process's
        return [proc.pid] if proc.returncode is None else []

    def forward(signum: int, _frame: object) -> None:
        if not proctree.signal_tree([token], root(), signum) and proc.returncode is None:
            proc.send_signal(signum)  # no /proc here: the command itself, at least
        if not stopping:
            stopping.append(time.monotonic())

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    why = ""
    while proc.poll() is None:
        now = time.monotonic()
        if timeout is not None and now - start > timeout:
            why = f"killed after {_human(timeout)} (timeout)"
        elif hang_timeout is not None and now - seen[0] > hang_timeout:
            why = f"no output for {_human(hang_timeout)} (hangTimeout)"
        if why or (stopping and now - stopping[0] > grace):
            break
        time.sleep(poll)
    if why:
        # worded for people and for the failure catalogue (signatures step-timeout, step-hang)
        print(f"job-chain watchdog: {why}; stopping the step (exit code {TIMED_OUT})", file=sys.stderr, flush=True)
    # the whole tree, leader or not: SIGTERM (again, after a stop), up to `grace` for all of it, SIGKILL
    left = grace - (time.monotonic() - stopping[0]) if stopping and not why else grace
    proctree.end([token], root(), grace=max(0.0, left))
    if proc.poll() is None:  # no /proc here, so nothing was found: the command itself, at least
        proc.terminate()
        try:
            proc.wait(max(0.0, left))
        except subprocess.TimeoutExpired:
            proc.kill()
    code = proc.wait()
    for pump in pumps:
        pump.join(1.0)
    if why:
        return TIMED_OUT
    return code if code >= 0 else 128 - code


def _human(seconds: float) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
