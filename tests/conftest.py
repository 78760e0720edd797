"""Shared fixtures: a real local AIHC server over real HTTP on a free loopback port.

Use ``local_server`` (fresh server, function scope) or ``local_server_factory(**options)``
for several/differently configured servers::

    def test_x(local_server):
        client = local_server.client()            # job_chain.aihc.AIHCClient
        job = client.create_job(local_server.pool, body)
        local_server.wait_status(job["jobId"], "Succeeded")
        local_server.kill(); local_server.start()  # or .restart() (graceful)

Options of the factory: ``max_running``, ``stop_grace`` (default 2), ``sample_interval``
(default 0.5), ``extra_args``. Teardown stops the server and SIGKILLs leftover pod groups.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import pytest

from job_chain.local.process import ServerProcess

POOL = "pool-local"


class LocalServer(ServerProcess):
    """One ``job-chain local serve`` subprocess (see job_chain.local.process) plus test helpers."""

    def __init__(self, state_dir: Path, max_running: Optional[int] = None, stop_grace: float = 2.0,
                 sample_interval: float = 0.5, extra_args: Iterable[str] = ()) -> None:
        options = ["--sample-interval", str(sample_interval), "--stop-grace", str(stop_grace), *extra_args]
        if max_running:
            options += ["--max-running", str(max_running)]
        super().__init__(state_dir, options)
        self.pool = POOL

    def sdk(self, ak: Optional[str] = None, sk: Optional[str] = None) -> Any:
        """The official SDK's v1 ``AIHCClient`` pointed at this server."""
        from baidubce.auth.bce_credentials import BceCredentials
        from baidubce.bce_client_configuration import BceClientConfiguration
        from baidubce.services.aihc.aihc_client import AIHCClient

        config = BceClientConfiguration(credentials=BceCredentials(ak or self.ak, sk or self.sk),
                                        endpoint=self.url)
        return AIHCClient(config)

    def sdk_v2(self, ak: Optional[str] = None, sk: Optional[str] = None) -> Any:
        """The official SDK's v2 ``AihcClient`` (jobs, pools, queues) pointed at this server."""
        from baidubce.auth.bce_credentials import BceCredentials
        from baidubce.bce_client_configuration import BceClientConfiguration
        from baidubce.services.aihc.aihc_client import AihcClient

        config = BceClientConfiguration(credentials=BceCredentials(ak or self.ak, sk or self.sk),
                                        endpoint=self.url)
        return AihcClient(config)

    def wait_status(self, job_id: str, statuses: Union[str, Iterable[str]], timeout: float = 15.0,
                    pool: Optional[str] = None) -> Dict[str, Any]:
        """Poll the job until its status is one of ``statuses``; return the job detail."""
        wanted = {statuses} if isinstance(statuses, str) else set(statuses)
        client = self.client()
        deadline = time.monotonic() + timeout
        job: Dict[str, Any] = {}
        while time.monotonic() < deadline:
            job = client.get_job(pool or self.pool, job_id)
            if job["status"] in wanted:
                return job
            time.sleep(0.03)
        raise AssertionError(f"job {job_id} is {job.get('status')}, wanted {sorted(wanted)}")


def job_body(name: str, command: str, replicas: int = 1, **extra: Any) -> Dict[str, Any]:
    """A minimal valid create body."""
    spec = {"image": "local", "command": command, "replicas": replicas}
    spec.update(extra.pop("jobSpec", {}))
    return dict({"name": name, "jobSpec": spec}, **extra)


def store_page(store: Any, *query: Any) -> Tuple[int, List[Dict[str, Any]]]:
    """A page of a local server's :class:`~job_chain.local.store.Store` (``query``: what ``list_rows``
    takes), its rows as job dicts: what the backend's views are made from."""
    from job_chain.local.store import listed_job

    total, rows = store.list_rows(*query)
    return total, [listed_job(row) for row in rows]


def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """Modules marked ``slow`` (the drills and the fuzz) first, then the others by their number of
    tests, most first; each module's tests in their own order. pytest-xdist's ``--dist loadscope``
    hands modules out in this order with ``--no-loadscope-reorder`` (``make test``); by count
    alone, as xdist orders them, a module of few long tests was handed out late (the fuzz: 5 tests,
    a minute or more on a busy machine, 61st of 83 modules) and ran on after the others had ended."""
    modules: Dict[str, List[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def weight(tests: List[pytest.Item]) -> Any:
        return (not any(test.get_closest_marker("slow") for test in tests), -len(tests))

    items[:] = [item for tests in sorted(modules.values(), key=weight) for item in tests]


@pytest.fixture(scope="session", autouse=True)
def no_real_aihc_keys() -> Iterator[None]:
    """A user's AIHC_HOST/AIHC_AK/AIHC_SK (which rank above JOB_CHAIN_CREDENTIALS) never reach a test:
    every request a test makes goes to a local server on loopback."""
    import os

    names = ("AIHC_HOST", "AIHC_AK", "AIHC_SK", "AIHC_SESSION_TOKEN", "AK", "SK", "AIHC_API_VERSION")
    saved = {name: os.environ.pop(name) for name in names if name in os.environ}
    yield
    os.environ.update(saved)


@pytest.fixture(scope="session", autouse=True)
def private_run_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Runs started by tests are indexed in a temporary place, never in the user's data dir."""
    import os

    from job_chain.record.index import INDEX_ENV

    old = os.environ.get(INDEX_ENV)
    os.environ[INDEX_ENV] = str(tmp_path_factory.mktemp("run-index"))
    yield
    if old is None:
        os.environ.pop(INDEX_ENV, None)
    else:
        os.environ[INDEX_ENV] = old


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """job-chain's API client retries as it does (the same errors, as many times), without waiting
    its jittered back-off between tries (0.15 s doubling up to 8 s): for tests whose calls go to a
    port nobody answers, where the wait is all that the retries would cost."""
    from job_chain.aihc import client

    monkeypatch.setattr(client._RetryPolicy, "get_delay_before_next_retry_in_millis", lambda *args: 0.0)


@pytest.fixture
def local_server_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., LocalServer]]:
    servers: List[LocalServer] = []

    def make(**options: Any) -> LocalServer:
        server = LocalServer(tmp_path_factory.mktemp("local-aihc"), **options)
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        server.cleanup()


@pytest.fixture
def local_server(local_server_factory: Callable[..., LocalServer]) -> LocalServer:
    """A fresh local server (stop grace 2 s, samples every 0.5 s)."""
    return local_server_factory()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """One server for a whole test module, for tests that need no special configuration."""
    server = LocalServer(tmp_path_factory.mktemp("local-aihc-shared"))
    server.start()
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real Slurm cluster (munged, slurmctld, two slurmd on loopback; ``tests/slurm_cluster.py``)
    for this test process — under pytest-xdist one per worker that needs it, on its own free ports
    and temporary directory — stopped by PID at the end whatever happens.

    Slurm missing fails the test (``make test`` installs it): a Slurm test is never skipped in
    silence. Only a run as a user other than root, where slurmd cannot run jobs, skips them — with
    the reason in the summary (``pytest -rs``) and on stderr.
    """
    import os
    import sys

    import slurm_cluster

    if os.geteuid() != 0:
        reason = ("SLURM TESTS SKIPPED: they start slurmctld/slurmd, which need root (CI runs as root); "
                  "run the suite as root to include them")
        print(f"\n*** {reason} ***", file=sys.stderr)
        pytest.skip(reason)
    why = slurm_cluster.require()
    if why:
        pytest.fail(why, pytrace=False)
    cluster = slurm_cluster.SlurmCluster(tmp_path_factory.mktemp("slurm"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
