"""Helpers for the web-console tests: the console served in-process over real HTTP, and Chromium."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, List

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


class Console:
    """``create_app`` on a free loopback port, in a thread (uvicorn), for route and browser tests.

    Without ``token`` it is ``--no-token`` (route tests call it with plain requests); the tests of
    the token, and the browser (which opens ``token_url`` first, as a user does), use one.
    """

    def __init__(self, paths: List[str], *, local: bool = False, guard: Any = None, token: bool = False) -> None:
        import uvicorn

        from job_chain.ui.app import create_app
        from job_chain.ui.catalog import Catalog
        from job_chain.ui.security import Guard
        from job_chain.ui.server import bind_socket

        sock = bind_socket("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        # route tests: no token and NOT read-only, a guard `job-chain ui` never makes (--no-token is
        # read-only: test_ui_routes checks that); the token's own tests and the browser use one
        loopback = {f"{h}:{self.port}" for h in ("127.0.0.1", "localhost", "[::1]")}
        self.guard = guard or (Guard.for_bind("127.0.0.1", self.port) if token else Guard(None, loopback, self.port))
        self.catalog = Catalog(paths, local=local, rescan=0.5)
        self.url = f"http://127.0.0.1:{self.port}"
        self.token_url = self.url + (f"/?token={self.guard.token}" if self.guard.token else "/")
        config = uvicorn.Config(create_app(self.catalog, self.guard), log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the console did not start"
            time.sleep(0.02)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def chromium_available() -> bool:
    return os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)


def chromium(profile: Path) -> Any:
    """Headless Chromium driven by Debian's chromedriver (no download, no network)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,1000", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    # the browser's clock is Beijing's, as most of AIHC's users' are: a page showing local time
    # where it says UTC is caught (issue 29 item 13, the charts)
    service = Service(CHROMEDRIVER, env=dict(os.environ, TZ="Asia/Shanghai"))
    return webdriver.Chrome(service=service, options=options)


def start_run(chain: Path, server: Any, *extra: str) -> str:
    """Start a run with the real CLI (no --follow) and return its run id."""
    from chain_helpers import cli, latest_run

    cli("run", str(chain), *extra, server=server, check=True)
    return latest_run(chain)


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
