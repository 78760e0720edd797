"""Step timeouts inside the job: kill a step that runs too long or stops printing (exit 124).

A hung NCCL collective looks like a process that is alive and silent; ``hangTimeout`` catches
it by the time since the last byte on stdout/stderr, ``timeout`` by the time since the start.
The wrapped command runs in its own process group with its output passed through unchanged;
on expiry the group gets SIGTERM, then SIGKILL after a grace period, and the watchdog exits 124
(as coreutils' ``timeout`` does), which ``retries``/``retryOnExitCodes`` then see. SIGTERM and
SIGINT sent to the watchdog (a stopped job) go to the group too. Standard library only: this
runs in training images.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import List, Optional

TIMED_OUT = 124
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


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run(command: List[str], timeout: Optional[float], hang_timeout: Optional[float], grace: float = GRACE,
        poll: float = 0.2) -> int:
    """Run ``command``; its exit code, or 124 after a timeout."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    start = time.monotonic()
    seen = [start]
    pumps = [threading.Thread(target=_pump, args=(proc.stdout.fileno(), 1, seen), daemon=True),  # type: ignore
             threading.Thread(target=_pump, args=(proc.stderr.fileno(), 2, seen), daemon=True)]  # type: ignore
    for pump in pumps:
        pump.start()

    def forward(signum: int, _frame: object) -> None:
        _killpg(proc.pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    why = ""
    while proc.poll() is None:
        now = time.monotonic()
        if timeout is not None and now - start > timeout:
            why = f"killed after {_human(timeout)} (timeout)"
        elif hang_timeout is not None and now - seen[0] > hang_timeout:
            why = f"no output for {_human(hang_timeout)} (hangTimeout)"
        if why:
            break
        time.sleep(poll)
    if why:
        # worded for people and for the failure catalogue (signatures step-timeout, step-hang)
        print(f"job-chain watchdog: {why}; stopping the step (exit code {TIMED_OUT})", file=sys.stderr, flush=True)
        _killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            _killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for pump in pumps:
        pump.join(1.0)
    if why:
        return TIMED_OUT
    code = proc.returncode
    return code if code >= 0 else 128 - code


def _human(seconds: float) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
