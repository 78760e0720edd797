"""Fault injection for the local server: a fraction of API requests fails the way clouds fail.

Why: job-chain must survive 5xx answers, throttling and dropped connections, and above all a
create that fails *after* the job was committed (a retry without a client token then makes a
duplicate). ``job-chain local serve --inject-faults RATE [--fault-seed S]`` places
:class:`FaultInjector` between the request-id and the auth middleware, where a cloud's gateway
sits: faults hit signed and unsigned requests alike, of both API styles (v1 ``/api/v1/…``, v2
``/?action=…``). ``/healthz`` and the web-terminal websocket are never faulted. With a seed, the
same sequence of requests meets the same faults.

:func:`kill_pod` (``job-chain local fault JOB SIGNATURE``) makes a running pod die the way a real
failure does: a catalogue signature's line in its log, then SIGABRT to its training processes.

A dropped connection is a cut-off answer: the status line and headers arrive, the body stops
half-way and the connection closes, so the client sees a connection error (an ASGI app cannot
close a connection before answering).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from job_chain.local.errors import error_body
from job_chain.local.routes import request_id_of, send_json

log = logging.getLogger("job_chain.local.faults")

# What uvicorn logs (at ERROR) when an app leaves an answer unfinished: a cut-off on purpose here.
_UNFINISHED = "ASGI callable returned without completing response."


@dataclass(frozen=True)
class Fault:
    """One way a request fails. ``after``: the server did the work, then the answer was lost."""

    name: str
    after: bool
    status: Optional[int] = None  # None: the connection drops
    code: str = ""
    message: str = ""


FAULTS: Tuple[Fault, ...] = (
    Fault("503 before", False, 503, "ServiceUnavailable",
          "the service is temporarily unavailable, please retry (injected fault)"),
    Fault("500 before", False, 500, "InternalError",
          "we encountered an internal error, please retry (injected fault)"),
    Fault("429 before", False, 429, "TooManyRequests",
          "request rate exceeded, please slow down and retry (injected fault)"),
    Fault("drop before", False),
    Fault("503 after", True, 503, "ServiceUnavailable",
          "the service is temporarily unavailable, please retry (injected fault)"),
    Fault("drop after", True),
)


class _HideCutOffErrors(logging.Filter):
    """Keep uvicorn from reporting the answers this module cuts off as server errors."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _UNFINISHED


class FaultInjector:
    """ASGI middleware: fail ``rate`` (0..1) of API requests, drawn from ``random.Random(seed)``.

    Each API request draws twice (fault or not, then which fault), so a seed replays the same
    faults for the same order of requests. Every injected fault is logged at INFO: method, path,
    request id and kind, never the query string or headers.
    """

    def __init__(self, app: ASGIApp, rate: float, seed: Optional[int] = None) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"fault rate must be between 0 and 1, got {rate}")
        self.app = app
        self.rate = rate
        self.seed = seed
        self.random = random.Random(seed)  # only the event loop's thread draws: no lock needed
        logging.getLogger("uvicorn.error").addFilter(_HideCutOffErrors())
        log.info("injecting faults into %.0f%% of API requests (seed %s)", rate * 100,
                 "none" if seed is None else seed)

    def draw(self) -> Optional[Fault]:
        """The fault for the next API request, or None."""
        roll, pick = self.random.random(), self.random.randrange(len(FAULTS))
        return FAULTS[pick] if roll < self.rate else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not is_api(scope):
            await self.app(scope, receive, send)
            return
        fault = self.draw()
        if fault is None:
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        what = f"{scope['method']} {scope['path']} (request {request_id})"
        if not fault.after:
            log.info("injected fault %s: %s", fault.name, what)
            if fault.status is None:
                error = error_body("ServiceUnavailable", "connection dropped (injected fault)", request_id)
                await _cut_off(send, 503, [(b"content-type", b"application/json")], _json_bytes(error))
            else:
                await _error(send, fault, request_id)
            return

        answer: List[Message] = []

        async def keep(message: Message) -> None:
            answer.append(message)

        await self.app(scope, receive, keep)
        start = next((m for m in answer if m["type"] == "http.response.start"), None)
        status = start["status"] if start else 0
        log.info("injected fault %s: %s, after the server answered %s", fault.name, what, status)
        if fault.status is None and start is not None:  # cut the real answer off half-way
            body = b"".join(m.get("body", b"") for m in answer if m["type"] == "http.response.body")
            await _cut_off(send, status, list(start.get("headers") or []), body)
        else:  # the answer replaced by an error (a 503 if there was no answer to cut)
            await _error(send, fault if fault.status is not None else FAULTS[0], request_id)


def is_api(scope: Scope) -> bool:
    """An API request of either style: v1 (``/api/v1/…``) or v2 (``/?action=Name``, Baidu's
    action style). Everything else (``/healthz``, the web terminal) is never faulted."""
    if scope["type"] != "http":
        return False
    if scope["path"].startswith("/api/"):
        return True
    return scope["path"] == "/" and any(key == b"action" for key, _, _ in
                                        (pair.partition(b"=") for pair in scope.get("query_string", b"").split(b"&")))


def _json_bytes(body: Dict[str, str]) -> bytes:
    return json.dumps(body).encode("utf-8")


async def _error(send: Send, fault: Fault, request_id: str) -> None:
    await send_json(send, fault.status or 503, error_body(fault.code, fault.message, request_id),
                    request_id)


async def _cut_off(send: Send, status: int, headers: List[Tuple[bytes, bytes]], body: bytes) -> None:
    """Announce the whole ``body``, send half of it, then end: uvicorn closes the connection."""
    declared = max(len(body), 1)
    kept = [(k, v) for k, v in headers if k.lower() not in (b"content-length", b"connection",
                                                             b"transfer-encoding")]
    kept += [(b"content-length", str(declared).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": kept})
    await send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})


# -- a pod that dies the way a real failure does ---------------------------------------------------
def kill_pod(state_dir: str, job_id: str, signature_name: str, pod: Optional[str] = None) -> str:
    """Make one running pod of ``job_id`` die with a catalogue signature; return the pod's name.

    Like the real thing: the signature's line (``NCCL WARN NET/IB : Got completion from peer …``)
    goes into the pod's log, then the pod's deepest processes — its training processes — get
    SIGABRT, as NCCL and CUDA abort on fatal errors. The step's script sees its command die;
    job-chain's tail then runs as it would in a cluster. Raises ValueError (a message for the user).
    """
    import signal

    import psutil

    from job_chain.failures.signatures import SIGNATURES, VERDICT
    from job_chain.local import store as st
    from job_chain.local.pod_process import pod_paths

    usable = {s.name: s for s in SIGNATURES if s.tier != VERDICT}
    if signature_name not in usable:
        raise ValueError(f"no signature {signature_name!r}; choose one of: {', '.join(sorted(usable))}")
    database = os.path.join(state_dir, "state.db")
    if not os.path.exists(database):
        raise ValueError(f"no local server state in {state_dir}")
    with contextlib.closing(st.Store(database, read_only=True)) as store:
        pods = store.pods(job_id)
    if not pods:
        raise ValueError(f"no job {job_id} on the local server in {state_dir}")
    running = [p for p in pods if p["status"] == st.RUNNING and p["pid"] and (pod is None or p["name"] == pod)]
    if not running:
        names = ", ".join(f"{p['name']} ({p['status']})" for p in pods)
        raise ValueError(f"job {job_id} has no running pod{' ' + pod if pod else ''} to kill; its pods: {names}")
    name, pid, create_time = running[0]["name"], running[0]["pid"], running[0]["create_time"]
    try:
        leader = psutil.Process(pid)
        if create_time and abs(leader.create_time() - create_time) > 1.0:
            raise psutil.NoSuchProcess(pid)
        leaves = [p for p in leader.children(recursive=True) if not p.children()]
    except psutil.Error:
        raise ValueError(f"pod {name} of job {job_id} has no live process") from None
    if not leaves:
        raise ValueError(f"pod {name} of job {job_id} runs nothing that can be killed")
    with open(pod_paths(state_dir, job_id, name)[1], "a", encoding="utf-8") as log_file:
        log_file.write(usable[signature_name].example + "\n")
    for process in leaves:
        try:
            process.send_signal(signal.SIGABRT)
        except psutil.Error:
            pass
    log.info("injected pod death %s: job %s pod %s (%d processes)", signature_name, job_id, name, len(leaves))
    return str(name)
