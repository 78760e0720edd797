"""Serve the console: bind the socket first (so the printed URL is the one that answers), print
the URL (with its token) as the first line of stdout, then run uvicorn until Ctrl-C."""

from __future__ import annotations

import socket
import sys
from typing import Callable, List, Optional

from job_chain.aihc.endpoint import is_loopback
from job_chain.errors import UsageError
from job_chain.ui.catalog import Catalog
from job_chain.ui.security import Guard, refuse_no_token_off_loopback

DEFAULT_PORT = 8780


def bind_socket(bind: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bind, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {bind}:{port}: {exc.strerror or exc}; pass --port N "
                         "(0: any free port) or another --bind") from None
    sock.listen(128)
    return sock


def url_for(bind: str, port: int, token: Optional[str]) -> str:
    if is_loopback(bind):
        host = "127.0.0.1" if bind == "localhost" else bind
    elif bind in ("0.0.0.0", "::", ""):
        host = socket.gethostname()  # listening everywhere: the name others reach this machine by
    else:
        host = bind
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}/" + (f"?token={token}" if token else "")


def serve(paths: List[str], *, local: bool, bind: str, port: int, token: bool = True,
          echo: Callable[[str], None] = print) -> None:
    """Run the console in this process until interrupted; ``token=False`` is ``--no-token``."""
    import uvicorn

    from job_chain.ui.app import create_app

    if not token:
        refuse_no_token_off_loopback(bind)  # before anything listens
    sock = bind_socket(bind, port)
    port = sock.getsockname()[1]
    guard = Guard.for_bind(bind, port, token=token)
    app = create_app(Catalog(paths, local=local), guard)
    echo(url_for(bind, port, guard.token))
    sys.stdout.flush()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
