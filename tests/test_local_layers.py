"""The local server's layers, in-process: HTTP (routes*, wire, auth), state (store, schema) and
execution (executor, lifecycle, process, pod_process) stay apart, and a v2 answer or a pool view
reads the state it needs once (counted with SQLite's statement trace, no server, no process)."""

from __future__ import annotations

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
    executor = Executor(store, str(tmp_path), "http://127.0.0.1:9", str(tmp_path / "credentials.json"))
    yield store, Backend(store, executor, str(tmp_path), "http://127.0.0.1:9")
    store.close()


def traced(store: Store) -> List[str]:
    """The SQL statements the store runs from now on."""
    statements: List[str] = []
    store._db.set_trace_callback(statements.append)
    return statements


def create(backend: Backend, name: str, queue: str = "default") -> str:
    body = {"name": name, "queue": queue, "jobSpec": {"image": "local", "command": "true", "replicas": 2,
                                                      "imageConfig": {"username": "u", "password": "p"}}}
    return str(backend.create_job(POOL, body, None)["jobId"])


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
