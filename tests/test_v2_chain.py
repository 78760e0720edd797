"""Chains speaking the OpenAPI v2 (``"api_config": {"version": "v2"}``) on the real local
server: the hello and dag examples end to end, exactly once, every create a v2 CreateJob; the
dry run prints the v2 request; the client maps v2 answers back (in-process, milliseconds)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict, List

import pytest
from chain_helpers import EXAMPLE_USER, EXAMPLES, cli_here, labels, latest_run, run_jobs, wait_outcome
from conftest import LocalServer

from job_chain.engine.jobs import LABEL_RUN, LABEL_STEP


def example(tmp_path: Path, name: str, server: LocalServer, version: str = "v2") -> Path:
    """examples/NAME copied onto the storage its steps mount (tmp_path/pfs, its data dir: as on AIHC,
    the pods must see the chain file's record), its pool the server's, API ``version``."""
    demo = tmp_path / "pfs" / name
    shutil.copytree(EXAMPLES / name, demo)
    chain = demo / "chain_info.json"
    text = chain.read_text().replace(f"/tmp/job-chain-{name}", str(tmp_path / "pfs"))
    data = json.loads(text.replace("your-resource-pool-id", server.pool))
    data["api_config"]["version"] = version
    chain.write_text(json.dumps(data, indent=2))
    return chain


def created_through(server: LocalServer, run_id: str) -> List[str]:
    """The API version of every job of the run, as the server recorded its create."""
    with server.db() as conn:
        rows = conn.execute("SELECT spec, api FROM jobs").fetchall()
    return [row["api"] for row in rows
            if {x["key"]: x["value"] for x in json.loads(row["spec"]).get("labels") or []}.get(LABEL_RUN) == run_id]


def step_names(chain: Path) -> List[str]:
    return [job["name"] for job in json.loads(chain.read_text())["jobs"]]


def test_hello_runs_over_v2_each_step_once(tmp_path: Path, local_server: LocalServer) -> None:
    chain = example(tmp_path, "hello", local_server)
    done = cli_here("run", str(chain), "--follow", server=local_server)
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = latest_run(chain)
    jobs = run_jobs(local_server, run_id)
    assert sorted(labels(j)[LABEL_STEP] for j in jobs) == sorted(step_names(chain)) and len(jobs) == 3
    assert all(j["status"] == "Succeeded" for j in jobs)
    assert created_through(local_server, run_id) == ["v2", "v2", "v2"]  # the run and its tail
    assert (tmp_path / "pfs" / EXAMPLE_USER / "result.txt").read_text().strip() == "5050"
    status = json.loads(cli_here("status", str(chain), "--json", server=local_server, check=True).stdout)
    assert status["outcome"] == "succeeded"
    logs = cli_here("logs", str(chain), "--step", "2", server=local_server, check=True)
    assert "5050" in logs.stdout


def test_dag_example_runs_over_v2_each_step_once(tmp_path: Path, local_server: LocalServer) -> None:
    chain = example(tmp_path, "dag", local_server)
    cli_here("run", str(chain), server=local_server, check=True)
    wait_outcome(chain, local_server, "succeeded", timeout=90)
    run_id = latest_run(chain)
    steps = sorted(labels(j)[LABEL_STEP] for j in run_jobs(local_server, run_id))
    assert steps == sorted(step_names(chain)[:6])  # every step once; the failure handler never
    assert set(created_through(local_server, run_id)) == {"v2"}


def test_dry_run_prints_the_v2_request(tmp_path: Path, local_server: LocalServer) -> None:
    """``run --dry-run --api-version v2`` shows the job's queue as ``queueID`` (issue 21)."""
    chain = example(tmp_path, "hello", local_server)
    done = cli_here("run", str(chain), "--dry-run", server=local_server, check=True)
    head, second, rest = done.stdout.split("\n", 2)
    assert head.startswith("POST ")
    assert "/?action=CreateJob&resourcePoolId=pool-local&queueID=default&clientToken=" in head
    assert second == "X-API-Version: v2"
    body = json.loads(rest)
    assert body["jobType"] == "PyTorchJob" and "command" in body and "command" not in body["jobSpec"]
    assert body["dataSources"][0]["type"] == "pfs" and "datasources" not in body
    v1 = cli_here("run", str(chain), "--dry-run", "--api-version", "v1", server=local_server, check=True)
    assert "/api/v1/aijobs?resourcePoolId=" in v1.stdout.split("\n", 1)[0]
    env = cli_here("run", str(chain), "--dry-run", server=local_server, check=True, AIHC_API_VERSION="v1")
    assert "/api/v1/aijobs?" in env.stdout.split("\n", 1)[0]
    assert run_jobs(local_server) == []


def test_a_bad_version_is_one_line(tmp_path: Path, local_server: LocalServer) -> None:
    chain = example(tmp_path, "hello", local_server, version="v3")
    done = cli_here("run", str(chain), "--dry-run", server=local_server)
    assert done.returncode != 0 and "api_config.version" in done.stderr and "Traceback" not in done.stderr
    env = cli_here("jobs", "list", "--pool", local_server.pool, server=local_server, AIHC_API_VERSION="2")
    assert env.returncode == 2 and "env AIHC_API_VERSION must be \"v1\" or \"v2\"" in env.stderr


def test_credentials_file_can_choose_v2(tmp_path: Path, local_server: LocalServer) -> None:
    from job_chain.aihc.connect import connect

    creds = dict(local_server.creds(), api_config={"version": "v2"})
    path = tmp_path / "creds.json"
    path.write_text(json.dumps(creds))
    client = connect(credentials_file=str(path))
    assert client.api_version == "v2"
    job = client.create_job(local_server.pool, {"name": "by-creds", "jobSpec": {"image": "local", "command": "true"}})
    assert local_server.wait_status(job["jobId"], "Succeeded")["name"] == "by-creds"
    assert client.get_job(local_server.pool, job["jobId"])["status"] == "Succeeded"
    assert connect(credentials_file=str(path), api_version="v1").api_version == "v1"


# -- the mapping, in-process ----------------------------------------------------------------
V1_BODY: Dict[str, Any] = {
    "name": "m", "queue": "q", "priority": "high", "jobFramework": "PyTorchJob",
    "jobSpec": {"command": "echo hi", "image": "img", "replicas": 2, "envs": [{"name": "A", "value": "1"}]},
    "labels": [{"key": "k", "value": "v"}], "datasources": [{"type": "pfs", "name": "p", "mountPath": "/m"}],
    "faultTolerance": True,
}


def test_create_body_maps_to_v2_and_back() -> None:
    from job_chain.aihc import v2

    mapped = v2.create_to_v2(V1_BODY)
    assert mapped["command"] == "echo hi" and "command" not in mapped["jobSpec"]
    assert mapped["jobType"] == "PyTorchJob" and mapped["dataSources"] == V1_BODY["datasources"]
    assert v2.create_from_v2(mapped) == V1_BODY


@pytest.mark.parametrize(("text", "unix"), [("2025-05-13 02:22:40", 1747102960), (1747102960, 1747102960),
                                            (None, None), ("1747102960", 1747102960)])
def test_log_times_are_read_in_both_spellings(text: Any, unix: Any) -> None:
    """The 2026 page's unix seconds (what job-chain sends) and the SDK's ``yyyy-MM-dd HH:mm:ss``."""
    from job_chain.aihc import v2

    assert v2.log_time_back(text) == unix


def test_v2_client_satisfies_the_jobs_protocol() -> None:
    import inspect

    from job_chain.aihc.api import JobsAPI
    from job_chain.aihc.client_v2 import AIHCClientV2

    for name, member in inspect.getmembers(JobsAPI, inspect.isfunction):
        if name.startswith("_"):
            continue
        ours = inspect.signature(getattr(AIHCClientV2, name))
        wanted = inspect.signature(member)
        assert list(wanted.parameters)[:len(wanted.parameters)] == [
            p for p in ours.parameters if p in wanted.parameters], name


@pytest.mark.parametrize("status", ["Scheduled", "Pending", "Running", "Restarting"])
def test_v2_statuses_that_are_still_going_keep_a_step_going(status: str) -> None:
    from job_chain.engine.states import is_success, is_terminal

    assert not is_terminal(status) and not is_success(status)  # e.g. v2's Scheduled


def test_v2_list_answer_maps_back_with_pages() -> None:
    from job_chain.aihc import v2

    answer = {"requestId": "r", "totalCount": 3, "jobs": [{
        "jobId": "job-x", "name": "n", "status": "Scheduled", "createdAt": "2025-05-13T02:18:51Z",
        "finishedAt": "", "queue": "default", "jobSpec": {"image": "img"}, "dataSources": [{"type": "pfs"}],
        "labels": [{"key": "job-chain/run", "value": "r1"}]}]}
    mapped = v2.list_from_v2(answer, 2, 1)
    assert mapped["total"] == 3 and mapped["pageNo"] == 2 and mapped["pageSize"] == 1
    job = mapped["jobs"][0]
    assert job["jobId"] == "job-x" and job["status"] == "Scheduled" and job["image"] == "img"
    assert job["createdAt"] == "2025-05-13T02:18:51Z" and job["datasources"] == [{"type": "pfs"}]
    assert job["labels"] == [{"key": "job-chain/run", "value": "r1"}]


def test_describe_job_is_read_flat_and_nested_as_job_item() -> None:
    """Issue 30 item 5: DescribeJob's page gives the answer as ``job: JobItem`` and its example flat;
    a nested answer read as flat had no status, so a run never ended and ``--follow`` never returned."""
    from job_chain.aihc.engine import job_of
    from job_chain.aihc.v2 import job_from_v2

    item = {"jobId": "job-abcdefghijkl", "name": "train", "status": "Succeeded", "queueId": "default",
            "createdAt": "2026-01-14T08:00:00Z", "finishedAt": "2026-01-14T09:00:00Z",
            "labels": [{"key": "job-chain/run", "value": "r1"}],
            "podList": {"pods": [{"objectMeta": {"name": "train-master-0"}, "podStatus": {"podPhase": "Succeeded"}}]}}
    flat = job_from_v2(dict(item, requestId="req-1"))
    nested = job_from_v2({"requestId": "req-1", "job": item})
    assert nested == flat and nested["status"] == "Succeeded" and nested["queue"] == "default"
    job = job_of(nested)
    assert job.status == "Succeeded" and job.finished is not None and job.run_id == "r1"
    assert [(p.name, p.phase) for p in job.pods] == [("train-master-0", "Succeeded")]
