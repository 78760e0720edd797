"""The local server's layers, in-process: HTTP (routes*, wire, auth), state (store, schema) and
execution (executor, lifecycle, process, pod_process) stay apart, and a v2 answer or a pool view
reads the state it needs once (counted with SQLite's statement trace, no server, no process)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

from job_chain.local.backend import Backend
from job_chain.local.backend_v2 import BackendV2
from job_chain.local.executor import Executor
from job_chain.local.store import Store

POOL = "cce-layers"


@pytest.fixture()
def local(tmp_path: Path) -> Iterator[Tuple[Store, Backend]]:
    """A Backend over a real Store and an Executor that never starts (no process runs)."""
    store = Store(str(tmp_path / "state.db"))
    store.configure([(POOL, None)], [(POOL, "default", None), (POOL, "q2", 2)])
    executor = Executor(store, str(tmp_path))
    yield store, Backend(store, executor, str(tmp_path), "http://127.0.0.1:9")
    store.close()


def traced(store: Store) -> List[str]:
    """The SQL statements the store runs from now on."""
    statements: List[str] = []
    store._db.set_trace_callback(statements.append)
    return statements


def create(backend: Backend, name: str, queue: str = "default", cpus: str = "") -> str:
    spec = {"image": "local", "command": "true", "replicas": 2, "imageConfig": {"username": "u", "password": "p"}}
    if cpus:
        spec["resources"] = [{"name": "cpu", "quantity": cpus}]
    return str(backend.create_job(POOL, {"name": name, "queue": queue, "jobSpec": spec}, None)["jobId"])


@pytest.mark.parametrize("need_detail", [False, True])
def test_describe_job_reads_the_job_row_once(local: Tuple[Store, Backend], need_detail: bool) -> None:
    store, backend = local
    job_id = create(backend, "once")
    statements = traced(store)
    answer = BackendV2(backend).call("DescribeJob", {"resourcePoolId": POOL},
                                     {"jobId": job_id, "needDetail": need_detail})
    job_reads = [s for s in statements if s.startswith("SELECT * FROM jobs WHERE id=")]
    pod_reads = [s for s in statements if s.startswith("SELECT * FROM pods")]
    assert len(job_reads) == 1, statements
    assert len(pod_reads) == (1 if need_detail else 0), statements  # pods only when asked for
    assert answer["jobSpec"]["imageConfig"] == {"username": "u", "password": ""}
    assert ("podList" in answer) is need_detail
    if need_detail:
        assert [p["objectMeta"]["name"] for p in answer["podList"]["pods"]] == ["once-master-0", "once-worker-0"]


def test_pool_and_queue_views_read_the_jobs_once_for_every_queue(local: Tuple[Store, Backend]) -> None:
    store, backend = local
    for name, queue, status in (("a", "default", "Pending"), ("b", "default", "Running"), ("c", "q2", "Scheduled"),
                                ("d", "q2", "Stopping"), ("e", "q2", "Succeeded"), ("f", "q2", "Pending")):
        store.set_job(create(backend, name, queue, cpus="500m" if name in "acdef" else ""), status=status)
    statements = traced(store)
    v1 = backend.pools.list_queues(POOL, None, None)["queues"]
    v2 = BackendV2(backend).call("DescribeQueues", {"resourcePoolId": POOL}, None)["queues"]
    pools = backend.pools.list_pools(None, None)["resourcePools"]
    job_reads = [s for s in statements if " FROM jobs" in s]
    assert len(job_reads) == 3, job_reads  # one per answer, not one per queue
    assert [(q["name"], q["pending"], q["inqueue"], q["running"]) for q in v1] == [("default", 1, 0, 1),
                                                                                    ("q2", 1, 1, 1)]
    assert [(q["queueName"], q["pendingJobs"], q["inqueueJobs"], q["runningJobs"]) for q in v2] == [
        ("default", 1, 0, 1), ("q2", 1, 1, 1)]
    # what the active jobs asked for (2 replicas of 500m each): c and d in q2; a, e, f hold nothing
    assert [q["allocated"] for q in v1] == [{"cpu": "0", "memory": "0"}, {"cpu": "2", "memory": "0"}]
    assert v2[1]["allocated"]["milliCPUcores"] == "2000"
    assert pools[0]["status"]["nodeCount"] == {"total": 1, "used": 1}


def test_a_read_only_store_looks_without_creating_or_writing(tmp_path: Path) -> None:
    import sqlite3

    with pytest.raises(sqlite3.Error):
        Store(str(tmp_path / "none" / "state.db"), read_only=True)
    assert not (tmp_path / "none").exists()  # nothing created for a state that is not there
    store = Store(str(tmp_path / "state.db"))
    job, _ = store.create_job(POOL, "look", {"jobSpec": {}}, "normal", "default", None, 2)
    reader = Store(str(tmp_path / "state.db"), read_only=True)
    try:
        assert [p["name"] for p in reader.pods(job["id"])] == ["look-master-0", "look-worker-0"]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            reader.set_job(job["id"], status="Failed")
    finally:
        reader.close()
        store.close()


def test_kill_pod_reads_the_pods_through_the_store(tmp_path: Path) -> None:
    from job_chain.local.faults import kill_pod

    store = Store(str(tmp_path / "state.db"))
    job, _ = store.create_job(POOL, "kp", {"jobSpec": {}}, "normal", "default", None, 2)
    store.set_pod(job["id"], "kp-master-0", status="Succeeded")
    store.close()
    with pytest.raises(ValueError, match=r"no job pytorchjob-nope on the local server"):
        kill_pod(str(tmp_path), "pytorchjob-nope", "ecc-uncorrectable")
    with pytest.raises(ValueError, match=r"has no running pod to kill; its pods: kp-master-0 \(Succeeded\), "
                                         r"kp-worker-0 \(Pending\)"):
        kill_pod(str(tmp_path), job["id"], "ecc-uncorrectable")


def test_a_job_launched_at_delay_0_is_not_read_back(local: Tuple[Store, Backend]) -> None:
    """Pending → Scheduled → Running at once: the row just written is handed on, not read again
    (the two states and their events stay). Real pods (``true``), waited for with a deadline."""
    store, backend = local
    job_id = create(backend, "launch")
    pending = store.next_pending()
    assert pending is not None and pending["id"] == job_id
    launcher, statements = threading.get_ident(), []  # the pods' waiter threads read on their own
    store._db.set_trace_callback(lambda sql: statements.append(sql) if threading.get_ident() == launcher else None)
    backend.executor._launch(pending)
    store._db.set_trace_callback(None)
    assert [s for s in statements if s.startswith("SELECT * FROM jobs")] == []
    assert sum(s.startswith("UPDATE jobs SET status='Scheduled'") for s in statements) == 1
    assert sum(s.startswith("UPDATE jobs SET status='Running'") for s in statements) == 1
    deadline = time.monotonic() + 30
    while (store.get_job(job_id) or {}).get("status") != "Succeeded":
        assert time.monotonic() < deadline, store.get_job(job_id)
        time.sleep(0.02)
    job = store.get_job(job_id) or {}
    assert job["master_port"] and job["scheduled_at"] <= job["started_at"] <= job["finished_at"]
    reasons = [e["reason"] for e in reversed(store.events(job_id, None, None, None))]
    assert reasons[:4] == ["JobScheduled", "SuccessfulCreatePod", "SuccessfulCreatePod", "Started"], reasons
    pods = store.pods(job_id)
    assert [p["status"] for p in pods] == ["Succeeded", "Succeeded"]
    assert {e["value"] for p in pods for e in p["env"] if e["name"] == "MASTER_PORT"} == {str(job["master_port"])}


def test_a_pod_is_stamped_running_when_its_process_started_not_after_psutil_read_it(
        local: Tuple[Store, Backend], monkeypatch: pytest.MonkeyPatch) -> None:
    """``started_at`` (what a hop's end is measured to) is taken as soon as the process runs;
    reading its create time from /proc comes after. Real pods (``true``)."""
    import psutil

    store, backend = local
    job_id = create(backend, "stamp")
    read_at: List[float] = []
    real = psutil.Process

    def process(pid: int) -> psutil.Process:
        read_at.append(time.time())
        return real(pid)

    monkeypatch.setattr(psutil, "Process", process)
    pending = store.next_pending()
    assert pending is not None and pending["id"] == job_id
    backend.executor._launch(pending)
    pods = store.pods(job_id)
    assert len(read_at) == len(pods) == 2
    assert all(pod["started_at"] is not None for pod in pods)
    assert [pod["started_at"] <= read for pod, read in zip(pods, read_at)] == [True, True], (pods, read_at)
    assert all(abs(pod["create_time"] - pod["started_at"]) < 5 for pod in pods)  # psutil's time, read after
    deadline = time.monotonic() + 30
    while (store.get_job(job_id) or {}).get("status") != "Succeeded":
        assert time.monotonic() < deadline, store.get_job(job_id)
        time.sleep(0.02)
