"""The in-memory API (tests/memory_api.py) answers as the local server does where the library
depends on it: each check runs the same calls on both, the local server over real HTTP."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterator, Tuple

import pytest
from conftest import LocalServer, job_body
from memory_api import MemoryAPI

from job_chain.aihc.engine import event_of, job_of
from job_chain.aihc.errors import AIHCError
from job_chain.status.types import attempt_of, explain


class Backend:
    """One API under test and how a test ends one of its jobs with an exit code."""

    def __init__(self, api: Any, pool: str, finish: Callable[[str, int], None], gate: Path) -> None:
        self.api, self.pool, self.finish, self.gate = api, pool, finish, gate

    def body(self, name: str, **labels: str) -> Any:
        """A job that runs until :meth:`finish` ends it (on the local server: its exit code from a file)."""
        gate = self.gate / name
        command = f'while [ ! -e {gate} ]; do sleep 0.05; done; exit "$(cat {gate})"'
        return job_body(name, command, labels=[{"key": k, "value": v} for k, v in labels.items()])


@pytest.fixture(params=["memory", "local"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "memory":
        memory = MemoryAPI()
        yield Backend(memory, "pool-local", lambda job_id, code: memory.finish(job_id, code), tmp_path)
        return
    server: LocalServer = request.getfixturevalue("shared_server")

    def finish(job_id: str, code: int) -> None:
        name = server.client().get_job(server.pool, job_id)["name"]
        (tmp_path / name).write_text(str(code))
        server.wait_status(job_id, ["Succeeded", "Failed"], timeout=30)

    yield Backend(server.client(), server.pool, finish, tmp_path)


def refused(call: Callable[[], Any]) -> Tuple[Any, Any]:
    with pytest.raises(AIHCError) as caught:
        call()
    return caught.value.status, caught.value.code


def test_a_client_token_names_one_request(backend: Backend) -> None:
    api, pool = backend.api, backend.pool
    body = backend.body("tok-a")
    first = api.create_job(pool, body, client_token="tok-1")
    assert api.create_job(pool, body, client_token="tok-1") == first  # again: the same job
    other = backend.body("tok-b")
    assert refused(lambda: api.create_job(pool, other, client_token="tok-1")) == (403, "IdempotentParameterMismatch")
    assert refused(lambda: api.create_job("pool-other", body, client_token="tok-1")) == (
        403, "IdempotentParameterMismatch")
    one, two = (api.create_job(pool, other)["jobId"] for _ in range(2))  # no token: two jobs
    assert len({first["jobId"], one, two}) == 3 and first["jobName"] == "tok-a"
    listed = [j["jobId"] for j in api.iter_jobs(pool) if j["jobId"] in (first["jobId"], one, two)]
    assert listed == [two, one, first["jobId"]]  # newest first
    for job_id in (first["jobId"], one, two):
        backend.finish(job_id, 0)


def test_jobs_read_back_with_their_labels_pods_times_and_how_they_ended(backend: Backend) -> None:
    api, pool = backend.api, backend.pool
    labels = {"job-chain/run": "r1", "job-chain/step": "train", "job-chain/attempt": "2"}
    job_id = api.create_job(pool, backend.body("ends", **labels), client_token="tok-ends")["jobId"]
    assert refused(lambda: api.get_job(pool, "pytorchjob-nope")) == (404, "NoSuchJob")
    assert refused(lambda: api.stop_job(pool, "pytorchjob-nope")) == (404, "NoSuchJob")
    backend.finish(job_id, 3)
    job = api.get_job(pool, job_id)
    assert {x["key"]: x["value"] for x in job["labels"]}.items() >= labels.items()
    assert [p["objectMeta"]["name"] for p in job["podList"]["pods"]] == ["ends-master-0"]
    item = attempt_of(job_of(job), "r1")  # as the AIHC engine reads it
    assert item is not None and (item.step, item.attempt, item.job_id, item.status) == ("train", 2, job_id, "Failed")
    assert item.started is not None and item.finished is not None and item.finished >= item.started
    assert abs(item.finished.timestamp() - time.time()) < 60  # cut to the second, in UTC
    explained = explain(item, [event_of(e) for e in api.job_events(pool, job_id)["events"]])
    assert explained.exit_code == 3 and "is failed because 1 Master replica(s) failed" in explained.reason
    assert api.stop_job(pool, job_id) == {"jobId": job_id}  # stopping an ended job: harmless
    assert api.get_job(pool, job_id)["status"] == "Failed"


def test_a_stop_is_idempotent(backend: Backend) -> None:
    api, pool = backend.api, backend.pool
    body = backend.body("stopped")
    body["jobSpec"]["replicas"] = 2
    job_id = api.create_job(pool, body)["jobId"]
    pods = [p["objectMeta"]["name"] for p in api.get_job(pool, job_id)["podList"]["pods"]]
    assert pods == ["stopped-master-0", "stopped-worker-0"]
    end = time.monotonic() + 30
    while {p["podStatus"]["podPhase"] for p in api.get_job(pool, job_id)["podList"]["pods"]} != {"Running"}:
        assert time.monotonic() < end  # (a stop while the local server launches the pods is another matter)
        time.sleep(0.05)
    assert api.stop_job(pool, job_id) == {"jobId": job_id}
    assert api.stop_job(pool, job_id) == {"jobId": job_id}
    while api.get_job(pool, job_id)["status"] != "Stopped":
        assert time.monotonic() < end
        time.sleep(0.05)
    events = api.job_events(pool, job_id)["events"]
    assert any(e["reason"] == "JobStopped" for e in events)
