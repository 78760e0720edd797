"""A run's cost is the run's: what ``status`` asks the API grows with the run's own jobs, not with
the other jobs of the pool (real local server, real HTTP, calls counted on job-chain's own client)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Dict

from chain_helpers import RECORDED_RUN as RUN
from chain_helpers import diamond_jobs, recorded_run
from conftest import LocalServer, job_body

from job_chain import ChainSession
from job_chain.aihc.client import AIHCClient
from job_chain.aihc.credentials import Credentials
from job_chain.hop.advance import advance
from job_chain.submit.create import submit_step

STEPS = 12


class Counting(AIHCClient):
    """job-chain's client, counting the list pages and job reads it sends (from any thread)."""

    calls: Dict[str, int]
    lock = threading.Lock()

    def count(self, what: str) -> None:
        with self.lock:
            self.calls[what] = self.calls.get(what, 0) + 1

    def list_jobs(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        self.count("list")
        return super().list_jobs(*args, **kwargs)

    def get_job(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        self.count("get")
        return super().get_job(*args, **kwargs)

    def create_job(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        self.count("create")
        return super().create_job(*args, **kwargs)


def counting(server: LocalServer) -> Counting:
    creds = server.creds()
    client = Counting(Credentials(server.url, creds["ak"], creds["sk"]), max_retries=2)
    client.calls = {}
    return client


def test_status_asks_for_the_runs_own_jobs_whatever_else_the_pool_holds(tmp_path: Path,
                                                                         local_server_factory: Any) -> None:
    server: LocalServer = local_server_factory(max_running=1)
    client = counting(server)
    client.create_job(server.pool, job_body("blocker", "sleep 120"))  # everything after it waits, no process
    path = tmp_path / "chain_info.json"
    chain, records = recorded_run(path, server.pool, [{"name": f"s{i}", "jobSpec": {"command": "true",
                                                                                  "image": "local"}}
                                                      for i in range(STEPS)], endpoint=server.url)
    for step in chain.steps:  # every step submitted and waiting: a look must read each of them
        submit_step(client, chain, step.name, RUN, 1, records=records, mode="job")
    session = ChainSession.from_file(str(path), client=client)

    def look() -> Dict[str, int]:
        client.calls = {}
        assert [s.status for s in session.status(RUN).steps] == ["Pending"] * STEPS
        return dict(client.calls)

    assert look() == {"list": 1}  # the run alone in its pool: one page holds all of it
    for i in range(60):  # others fill more than a page, newer than every job of the run
        client.create_job(server.pool, job_body(f"other-{i}", "true"))
    busy = look()
    assert busy == {"list": 1, "get": STEPS}  # the first page did not pay its way: the rest by id
    for i in range(60, 120):
        client.create_job(server.pool, job_body(f"other-{i}", "true"))
    assert look() == busy  # twice the pool, the same questions


def test_a_join_in_a_busy_pool_asks_the_api_for_nothing_but_its_create(tmp_path: Path,
                                                                       local_server_factory: Any) -> None:
    """The branches of a → (b, c) → d decide from the run record (in-process advances, counted)."""
    server: LocalServer = local_server_factory(max_running=1)
    client = counting(server)
    client.create_job(server.pool, job_body("blocker", "sleep 120"))
    for i in range(60):  # a busy pool: more than a page of other jobs, all newer than the run
        client.create_job(server.pool, job_body(f"other-{i}", "true"))
    chain, records = recorded_run(tmp_path / "chain_info.json", server.pool, diamond_jobs(), server=server,
                                  submitted="abc", succeeded="a")

    def finish(step: str) -> Dict[str, int]:
        client.calls = {}
        assert advance(chain, client, run_id=RUN, step=step, attempt=1, exit_code=0, records=records,
                       resume_hint="job-chain resume") == 0
        return dict(client.calls)

    assert finish("b") == {}  # c has not reported: not ready, nothing asked
    assert finish("c") == {"create": 1}  # sees b's marker: d is ready
    assert records.submission(RUN, "d", 1) is not None
