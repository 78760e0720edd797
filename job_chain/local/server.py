"""Run the local AIHC server in the foreground: state, keys, executor, sampler, uvicorn.

``state_dir`` holds ``state.db`` (SQLite), ``credentials.json`` (0600: host, ak, sk),
``server.json`` (0600: pid, url, instance; written once listening), ``server.lock`` and
``jobs/`` (pod dirs, logs, exit codes). SIGTERM/SIGINT stop the server, never the pods: the next server adopts them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import socket
import threading
import time
from typing import Any, BinaryIO, Dict, List, Optional, Sequence, Tuple
from urllib.parse import urlsplit

from job_chain.errors import JobChainError, UsageError
from job_chain.local import HANG_MINUTE
from job_chain.util.files import read_json_dict, write_json_private

STATE_DIR_ENV = "JOB_CHAIN_LOCAL_DIR"
AK_ENV, SK_ENV = "JOB_CHAIN_LOCAL_AK", "JOB_CHAIN_LOCAL_SK"


def default_state_dir(state_dir: Optional[str] = None) -> str:
    """--state-dir, else env JOB_CHAIN_LOCAL_DIR, else the user data dir's ``local``."""
    if state_dir:
        return os.path.abspath(os.path.expanduser(state_dir))
    if os.environ.get(STATE_DIR_ENV):
        return os.path.abspath(os.path.expanduser(os.environ[STATE_DIR_ENV]))
    import platformdirs

    return os.path.join(platformdirs.user_data_dir("job-chain"), "local")


def paths(state_dir: str) -> Dict[str, str]:
    return {name: os.path.join(state_dir, file) for name, file in (
        ("credentials", "credentials.json"), ("server", "server.json"), ("db", "state.db"),
        ("lock", "server.lock"), ("log", "server.log"), ("jobs", "jobs"))}


# What the server keeps in its state dir, and of which kind: anything else there is refused
# at startup (a server that ran on a broken layout would hang jobs or hide from `local stop`).
_FILES = ("credentials", "server", "db", "lock", "log")
_DIRS = ("jobs",)


def prepare_state_dir(state_dir: str) -> Dict[str, str]:
    """Create ``state_dir`` (0700, also when it existed as 0755), check its layout; its paths."""
    if os.path.exists(state_dir) and not os.path.isdir(state_dir):
        raise JobChainError(f"the local server's state dir {state_dir} is not a directory; "
                            "move it away or pass another --state-dir")
    try:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
        os.chmod(state_dir, 0o700)
    except OSError as exc:
        raise JobChainError(f"cannot use {state_dir} as the local server's state dir: "
                            f"{exc.strerror}; pass another --state-dir") from None
    files = paths(state_dir)
    for name in _FILES:
        for path in (files[name],) + ((files[name] + "-wal", files[name] + "-shm") if name == "db" else ()):
            if os.path.lexists(path) and not os.path.isfile(path):
                raise JobChainError(f"{path} is not a regular file (the local server keeps a file "
                                    f"there); move it away (mv {path} {path}.bak) and start again")
    for name in _DIRS:
        if os.path.lexists(files[name]) and not os.path.isdir(files[name]):
            raise JobChainError(f"{files[name]} is not a directory (the local server keeps its "
                                f"job directories there); move it away (mv {files[name]} "
                                f"{files[name]}.bak) and start again")
    return files


def open_private_log(path: str) -> BinaryIO:
    """``server.log`` for appending, mode 0600 (also when it existed with another mode)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


def _credentials(state_dir: str) -> Dict[str, Any]:
    """The state dir's credentials.json; {} when missing or damaged (a new key pair is made)."""
    return read_json_dict(paths(state_dir)["credentials"]) or {}


def recorded_port(state_dir: str) -> Optional[int]:
    """The port of the host in credentials.json: where this state dir's jobs reach their server."""
    host = _credentials(state_dir).get("host")
    try:
        return urlsplit(host).port if isinstance(host, str) and host else None
    except ValueError:
        return None


def keep_keys(state_dir: str, ak: str, sk: str) -> None:
    """Put a given key pair into credentials.json, where the next server takes it from.

    Why: ``local start`` hands ``--ak/--sk`` to its server through this private file, never
    through the server's environment or command line (which jobs and ``ps`` can read).
    """
    host = _credentials(state_dir).get("host")
    write_json_private(paths(state_dir)["credentials"],
                       {"host": host if isinstance(host, str) else "", "ak": ak, "sk": sk})


def _keys(state_dir: str, ak: Optional[str], sk: Optional[str]) -> Tuple[str, str]:
    """Given keys, else the pair kept in credentials.json, else a new random pair."""
    if bool(ak) != bool(sk):
        raise UsageError("pass both --ak and --sk, or neither (a key pair is generated)")
    if ak and sk:
        return ak, sk
    data = _credentials(state_dir)
    if data.get("ak") and data.get("sk"):
        return str(data["ak"]), str(data["sk"])
    return secrets.token_hex(16), secrets.token_hex(32)


_POOL_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
PoolConfig = Tuple[List[Tuple[str, Optional[int]]], List[Tuple[str, str, Optional[int]]]]


def _capacity(option: str, text: str, value: str) -> Optional[int]:
    if value == "":
        return None
    if not value.isdigit() or not 0 < int(value) <= 100000:
        raise UsageError(f"{option} {text}: the capacity after ':' must be a whole number from 1 "
                         f"to 100000, e.g. {option} {text.split(':')[0]}:4")
    return int(value)


def pool_config(pools: Sequence[str] = (), queues: Sequence[str] = ()) -> PoolConfig:
    """``--pool ID[:N]`` and ``--queue [POOL/]NAME[:N]`` as (pools, queues) for the store.

    N: how many jobs may run at once in the pool or queue (none: a pool is unlimited, a queue
    takes --max-running). A queue without POOL/ belongs to every pool; a pool without a queue
    gets ``default``. No --pool at all: any pool id and queue name are accepted (as before).
    """
    out_pools: List[Tuple[str, Optional[int]]] = []
    for text in pools:
        ident, _, cap = text.partition(":")
        if not _POOL_ID.fullmatch(ident):
            raise UsageError(f"--pool {text}: the pool id must be lower-case letters, digits and "
                             "'-' (at most 64), e.g. --pool cce-local:8")
        if ident in [p for p, _ in out_pools]:
            raise UsageError(f"--pool {ident} is given twice; give each pool once")
        out_pools.append((ident, _capacity("--pool", text, cap)))
    if queues and not out_pools:
        raise UsageError("--queue needs the pool it belongs to: add --pool ID (e.g. --pool cce-local:8)")
    out_queues: List[Tuple[str, str, Optional[int]]] = []
    ids = [p for p, _ in out_pools]
    for text in queues:
        head, _, cap = text.partition(":")
        pool, _, name = head.rpartition("/")
        if pool and pool not in ids:
            raise UsageError(f"--queue {text}: pool {pool} is not among the --pool options ({', '.join(ids)})")
        if not _QUEUE_NAME.fullmatch(name):
            raise UsageError(f"--queue {text}: the queue name must be letters, digits, '_' and '-' "
                             "(at most 64), e.g. --queue default:4")
        capacity = _capacity("--queue", text, cap)
        for owner in [pool] if pool else ids:
            if any(q[0] == owner and q[1] == name for q in out_queues):
                raise UsageError(f"--queue {text}: pool {owner} already has a queue {name}")
            out_queues.append((owner, name, capacity))
    for ident in ids:
        if not any(q[0] == ident for q in out_queues):
            out_queues.append((ident, "default", None))
    return out_pools, out_queues


def open_store(path: str) -> Any:
    """The :class:`Store` in ``path``, or one line saying the file is no state database."""
    import sqlite3

    from job_chain.local.store import Store

    store = None
    try:
        store = Store(path)
        store.count_by_status()  # a database of another shape fails here
        return store
    except sqlite3.DatabaseError as exc:
        if store is not None:
            store.close()
        raise JobChainError(
            f"{path} is not a job-chain state database or is damaged ({exc}); move it away "
            f"(mv {path} {path}.broken) and start again: the jobs recorded in it are then "
            "forgotten") from None


def _lock(state_dir: str, wait: float = 1.0) -> Any:
    """Hold ``server.lock`` for the process lifetime: one server per state dir.

    Waits ``wait`` seconds for the lock, since a dying server may still hold it for a moment.
    """
    import fcntl

    handle = open(paths(state_dir)["lock"], "a+")  # noqa: SIM115 (held until exit)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except OSError:
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
    handle.close()
    info = read_json_dict(paths(state_dir)["server"]) or {}
    try:
        who = f" (pid {int(info['pid'])}, {info['url']})"
    except (ValueError, TypeError, KeyError):
        who = ""
    raise JobChainError(f"another local server{who} is already running in {state_dir}; use it, "
                        f"or stop it first: job-chain local stop --state-dir {state_dir}")


def _listen(host: str, port: int, state_dir: str, recorded: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if recorded:
            raise JobChainError(
                f"cannot listen on {host}:{port} ({exc.strerror}), the port the jobs of {state_dir} "
                f"expect their server on (the host in {paths(state_dir)['credentials']}); free that "
                "port (if another job-chain server holds it: job-chain local stop --state-dir ITS_DIR) "
                "and start again, or pass --port N to move this server (jobs running now then lose "
                "their server)") from None
        raise JobChainError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    return sock


IDLE_TIMEOUT = 5  # seconds a connection may sit without a complete request head
MAX_HEAD = 64 * 1024  # bytes of request line + headers; more is refused


_HEAD_END = re.compile(rb"\r?\n\r?\n")


def head_size(pending: bytes) -> int:
    """Bytes of the request head at the start of ``pending`` (all of it while the head is not complete)."""
    end = _HEAD_END.search(pending, 0, MAX_HEAD + 8)
    return end.end() if end else len(pending)


def _protocol() -> Any:
    """uvicorn's h11 protocol with a deadline on each request head.

    Why: uvicorn times out idle connections only *between* requests, so a connection that
    never completes its first request (or trickles its headers) stays open for ever. Here the
    keep-alive timer is also armed when a connection opens and data no longer disarms it: only
    a complete request head does. h11 (unlike httptools) also bounds the head's size.
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11Protocol(H11Protocol):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler)

        def data_received(self, data: bytes) -> None:
            self.conn.receive_data(data)  # the timer is disarmed by handle_events on a request
            if self.conn.their_state is h11.IDLE and head_size(self.conn.trailing_data[0]) > MAX_HEAD:
                # h11 checks its bound only while a head is incomplete, so a head that arrived whole in
                # one or two reads passed at 80-128 KiB: the documented MAX_HEAD, exactly
                self.send_400_response(f"request line and headers over {MAX_HEAD // 1024} KiB")
                return
            self.handle_events()

        def timeout_keep_alive_handler(self) -> None:
            if not self.transport.is_closing():
                self.transport.close()

    return BoundedH11Protocol


def serve(
    host: str = "127.0.0.1",
    port: Optional[int] = None,
    state_dir: Optional[str] = None,
    ak: Optional[str] = None,
    sk: Optional[str] = None,
    max_running: Optional[int] = None,
    stop_grace: float = 10.0,
    sample_interval: float = 5.0,
    middleware: Sequence[Tuple[Any, Dict[str, Any]]] = (),
    pools: Sequence[str] = (),
    queues: Sequence[str] = (),
    schedule_delay: float = 0.0,
    hang_minute: float = HANG_MINUTE,
) -> None:
    """Serve until SIGTERM/SIGINT. Pods keep running after the server stops.

    ``port``: None means the port recorded in credentials.json (where running jobs expect
    their server), else a free one. ``middleware``: extra ASGI (class, kwargs) pairs placed
    between request-id and auth (the slot meant for fault injection).
    """
    import uvicorn

    from job_chain.local.backend import Backend
    from job_chain.local.executor import Executor
    from job_chain.local.metrics import Sampler
    from job_chain.local.routes import create_app

    # the keys must not reach the jobs: they inherit this process's environment
    ak = ak or os.environ.pop(AK_ENV, None)
    sk = sk or os.environ.pop(SK_ENV, None)
    os.environ.pop(AK_ENV, None)
    os.environ.pop(SK_ENV, None)
    pools_and_queues = pool_config(pools, queues)  # a mistake here is one line before anything starts
    state_dir = default_state_dir(state_dir)
    files = prepare_state_dir(state_dir)
    lock = _lock(state_dir)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    log = logging.getLogger("job_chain.local")

    recorded = recorded_port(state_dir) if port is None else None
    sock = _listen(host, recorded or port or 0, state_dir, recorded=bool(recorded))
    actual_port = sock.getsockname()[1]
    url_host = "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)
    url = f"http://{url_host}:{actual_port}"
    access_key, secret_key = _keys(state_dir, ak, sk)
    write_json_private(files["credentials"], {"host": url, "ak": access_key, "sk": secret_key})

    store = open_store(files["db"])
    store.configure(*pools_and_queues)
    executor = Executor(store, state_dir, max_running=max_running,
                        stop_grace=stop_grace, schedule_delay=schedule_delay, hang_minute=hang_minute)
    sampler = Sampler(store, executor, interval=sample_interval)
    backend = Backend(store, executor, state_dir, url, default_capacity=max_running)
    app = create_app(backend, {access_key: secret_key}, middleware=middleware)
    executor.start()
    sampler.start()

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            http=_protocol(), h11_max_incomplete_event_size=MAX_HEAD,
                            timeout_keep_alive=IDLE_TIMEOUT, backlog=2048)
    server = uvicorn.Server(config)

    def announce() -> None:
        import psutil

        while not server.started and not server.should_exit:
            time.sleep(0.005)
        if not server.started:
            return
        try:  # private: the instance is what /healthz echoes, the pid is for `local stop` only
            write_json_private(files["server"], {
                "pid": os.getpid(), "create_time": psutil.Process().create_time(), "url": url,
                "instance": backend.instance, "state_dir": state_dir,
                "credentials_file": files["credentials"], "started_at": time.time(),
            })
        except OSError as exc:  # unseen by `local stop`, a server must not keep running
            log.error("cannot write %s (%s); stopping", files["server"], exc.strerror)
            server.should_exit = True
            return
        log.info("local AIHC server listening on %s (state %s)", url, state_dir)

    threading.Thread(target=announce, name="announce", daemon=True).start()
    try:
        server.run(sockets=[sock])
    finally:
        executor.close()
        sampler.close()
        if (read_json_dict(files["server"]) or {}).get("pid") == os.getpid():
            with contextlib.suppress(OSError):
                os.unlink(files["server"])
        lock.close()
        log.info("local AIHC server stopped; running pods were left for the next server")
