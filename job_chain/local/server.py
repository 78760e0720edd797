"""Run the local AIHC server in the foreground: state, keys, executor, sampler, uvicorn.

``state_dir`` holds ``state.db`` (SQLite), ``credentials.json`` (0600: host, ak, sk),
``server.json`` (pid, url; written once listening), ``server.lock`` and ``jobs/`` (pod dirs,
logs, exit codes). SIGTERM/SIGINT stop the server, never the pods: the next server adopts them.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from typing import Any, Dict, Optional, Sequence, Tuple

from job_chain.errors import JobChainError, UsageError
from job_chain.files import write_json_private

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
        ("lock", "server.lock"), ("log", "server.log"))}


def _keys(state_dir: str, ak: Optional[str], sk: Optional[str]) -> Tuple[str, str]:
    """Given keys, else the pair kept in credentials.json, else a new random pair."""
    if bool(ak) != bool(sk):
        raise UsageError("pass both --ak and --sk, or neither (a key pair is generated)")
    if ak and sk:
        return ak, sk
    try:
        with open(paths(state_dir)["credentials"], encoding="utf-8") as handle:
            data = json.load(handle)
        if data.get("ak") and data.get("sk"):
            return str(data["ak"]), str(data["sk"])
    except (OSError, ValueError, AttributeError):
        pass
    return secrets.token_hex(16), secrets.token_hex(32)


def _lock(state_dir: str) -> Any:
    """Hold ``server.lock`` for the process lifetime: one server per state dir."""
    import fcntl

    handle = open(paths(state_dir)["lock"], "a+")  # noqa: SIM115 (held until exit)
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise JobChainError(f"another local server is already using {state_dir}") from None
    return handle


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise JobChainError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    return sock


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    state_dir: Optional[str] = None,
    ak: Optional[str] = None,
    sk: Optional[str] = None,
    max_running: Optional[int] = None,
    stop_grace: float = 10.0,
    sample_interval: float = 5.0,
    middleware: Sequence[Tuple[Any, Dict[str, Any]]] = (),
) -> None:
    """Serve until SIGTERM/SIGINT. Pods keep running after the server stops.

    ``middleware``: extra ASGI (class, kwargs) pairs placed between request-id and auth
    (the slot meant for fault injection).
    """
    import uvicorn

    from job_chain.local.backend import Backend
    from job_chain.local.executor import Executor
    from job_chain.local.metrics import Sampler
    from job_chain.local.routes import create_app
    from job_chain.local.store import Store

    ak = ak or os.environ.pop(AK_ENV, None)
    sk = sk or os.environ.pop(SK_ENV, None)
    os.environ.pop(AK_ENV, None)
    os.environ.pop(SK_ENV, None)
    state_dir = default_state_dir(state_dir)
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    files = paths(state_dir)
    lock = _lock(state_dir)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    log = logging.getLogger("job_chain.local")

    sock = _listen(host, port)
    actual_port = sock.getsockname()[1]
    url_host = "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)
    url = f"http://{url_host}:{actual_port}"
    access_key, secret_key = _keys(state_dir, ak, sk)
    write_json_private(files["credentials"], {"host": url, "ak": access_key, "sk": secret_key})

    store = Store(files["db"])
    executor = Executor(store, state_dir, url, files["credentials"], max_running=max_running,
                        stop_grace=stop_grace)
    sampler = Sampler(store, executor, interval=sample_interval)
    backend = Backend(store, executor, state_dir, url)
    app = create_app(backend, {access_key: secret_key}, middleware=middleware)
    executor.start()
    sampler.start()

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            timeout_keep_alive=30, backlog=2048)
    server = uvicorn.Server(config)

    def announce() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.005)
        if server.started:
            write_json_private(files["server"], {
                "pid": os.getpid(), "url": url, "state_dir": state_dir,
                "credentials_file": files["credentials"], "started_at": time.time(),
            })
            log.info("local AIHC server listening on %s (state %s)", url, state_dir)

    threading.Thread(target=announce, name="announce", daemon=True).start()
    try:
        server.run(sockets=[sock])
    finally:
        executor.close()
        sampler.close()
        try:
            with open(files["server"], encoding="utf-8") as handle:
                if json.load(handle).get("pid") == os.getpid():
                    os.unlink(files["server"])
        except (OSError, ValueError):
            pass
        lock.close()
        log.info("local AIHC server stopped; running pods were left for the next server")
