"""`job-chain jobs …`: every endpoint as a command, against one real local server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List

import pytest
from click.testing import CliRunner, Result
from conftest import job_body

from job_chain.cli import cli


def jobs(server: Any, *args: str) -> Result:
    env = {"JOB_CHAIN_CREDENTIALS": server.credentials_file, "AIHC_RESOURCE_POOL_ID": server.pool,
           "AIHC_HOST": None, "AIHC_AK": None, "AIHC_SK": None}
    return CliRunner().invoke(cli, ["jobs", *args], env=env)


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def finished_job(shared_server: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    body = job_body("cli-done", "echo line-1; echo line-2; echo line-3", replicas=2,
                    jobSpec={"command": "echo line-1; echo line-2; echo line-3", "image": "img", "replicas": 2,
                             "envs": [{"name": "MY_ENV", "value": "x"}]})
    path = tmp_path_factory.mktemp("jobs") / "job.json"
    path.write_text(json.dumps(body))
    created = json.loads(ok(jobs(shared_server, "create", "-f", str(path), "--json")))
    shared_server.wait_status(created["jobId"], "Succeeded")
    return created["jobId"]


def test_list_shows_a_table_and_json(shared_server: Any, finished_job: str) -> None:
    table = ok(jobs(shared_server, "list"))
    assert "cli-done" in table and "Succeeded" in table and "AGE" in table
    listed = json.loads(ok(jobs(shared_server, "list", "--json")))
    assert finished_job in [j["jobId"] for j in listed]
    page = json.loads(ok(jobs(shared_server, "list", "--page", "1", "--page-size", "1", "--json")))
    assert len(page) == 1


def test_get_events_nodes_and_pod_commands(shared_server: Any, finished_job: str) -> None:
    detail = json.loads(ok(jobs(shared_server, "get", finished_job, "--json")))
    assert [p["objectMeta"]["name"] for p in detail["podList"]["pods"]] == ["cli-done-master-0", "cli-done-worker-0"]
    assert "cli-done-master-0" in ok(jobs(shared_server, "get", finished_job))
    assert "JobSucceeded" in ok(jobs(shared_server, "events", finished_job))
    assert "Started" in ok(jobs(shared_server, "pod-events", finished_job, "--pod", "cli-done-worker-0"))
    assert ok(jobs(shared_server, "nodes", finished_job)).strip()
    assert ok(jobs(shared_server, "logs", finished_job)) == "line-1\nline-2\nline-3\n"
    assert ok(jobs(shared_server, "logs", finished_job, "--tail", "1")) == "line-3\n"
    assert ok(jobs(shared_server, "webterminal", finished_job)).startswith("ws://127.0.0.1:")


def test_metrics_are_real_or_honestly_empty(shared_server: Any, finished_job: str) -> None:
    gpu = ok(jobs(shared_server, "metrics", finished_job, "--type", "GpuUsage"))
    assert "no" in gpu.lower() and "gpu" in gpu.lower()
    cpu = json.loads(ok(jobs(shared_server, "metrics", finished_job, "--type", "CpuTime", "--json")))
    assert {p["podName"] for p in cpu["podMetrics"]} == {"cli-done-master-0", "cli-done-worker-0"}
    bad = jobs(shared_server, "metrics", finished_job, "--type", "Bogus")
    assert bad.exit_code == 1 and "400" in bad.output


def test_clone_stop_priority_delete(shared_server: Any, finished_job: str) -> None:
    clone = json.loads(ok(jobs(shared_server, "clone", finished_job, "--name", "cli-clone", "--json")))
    shared_server.wait_status(clone["jobId"], "Succeeded")
    detail = json.loads(ok(jobs(shared_server, "get", clone["jobId"], "--json")))
    assert detail["command"].startswith("echo line-1") and len(detail["podList"]["pods"]) == 2
    envs = {e["name"]: e["value"] for e in detail["podList"]["pods"][0]["envs"]}
    assert envs["MY_ENV"] == "x"

    long_body = Path(shared_server.state_dir) / "long.json"
    long_body.write_text(json.dumps(job_body("cli-long", "sleep 30")))
    long_id = json.loads(ok(jobs(shared_server, "create", "-f", str(long_body), "--json")))["jobId"]
    assert "priority is now high" in ok(jobs(shared_server, "set-priority", long_id, "high"))
    assert json.loads(ok(jobs(shared_server, "get", long_id, "--json")))["priority"] == "high"
    ok(jobs(shared_server, "stop", long_id))
    shared_server.wait_status(long_id, "Stopped", timeout=20)
    ok(jobs(shared_server, "delete", long_id))
    gone = jobs(shared_server, "get", long_id)
    assert gone.exit_code == 1 and "404" in gone.output


@pytest.mark.parametrize("args, message", [
    (["get", "pytorchjob-nope"], "404"),
    (["set-priority", "x", "urgent"], "invalid value for 'PRIORITY': 'urgent'"),
    (["clone", "x", "--name", "Bad_Name"], "--name 'Bad_Name'"),
    (["create", "-f", "/nonexistent.json"], "no such file"),
])
def test_errors_are_one_line(shared_server: Any, args: List[str], message: str) -> None:
    result = jobs(shared_server, *args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output
    # exactly one error line, in the one style every error has
    assert sum("rror:" in line for line in result.output.splitlines()) == 1


def test_missing_pool_and_credentials_are_clear() -> None:
    result = CliRunner().invoke(cli, ["jobs", "list"], env={"JOB_CHAIN_CREDENTIALS": None, "AIHC_HOST": None,
                                                            "AIHC_RESOURCE_POOL_ID": None})
    assert result.exit_code == 2
    assert "no AIHC host" in result.output or "no resource pool" in result.output


def test_pool_and_credentials_from_a_chain_file(shared_server: Any, finished_job: str, tmp_path: Path) -> None:
    chain = tmp_path / "chain.json"
    chain.write_text(json.dumps({"resourcePoolId": shared_server.pool, "api_config": {
        "host": shared_server.url, "ak": shared_server.ak, "sk": shared_server.sk}, "jobs": []}))
    result = CliRunner().invoke(cli, ["jobs", "list", "--chain", str(chain), "--json"],
                                env={"JOB_CHAIN_CREDENTIALS": None, "AIHC_RESOURCE_POOL_ID": None,
                                     "AIHC_HOST": None, "AIHC_AK": None, "AIHC_SK": None})
    assert finished_job in [j["jobId"] for j in json.loads(ok(result))]


def test_metrics_over_v2_take_the_pages_times_and_a_bad_step_is_one_line(shared_server: Any, finished_job: str) -> None:
    """Issue 30 item 4: `jobs metrics --api-version v2` sends DescribeJobMetrics (it said v2 had no
    metrics action); --start/--end take ISO 8601 or unix seconds, --step 5m/30s/1h."""
    cpu = json.loads(ok(jobs(shared_server, "metrics", finished_job, "--type", "CpuTime", "--api-version", "v2",
                             "--start", "2020-01-01T00:00:00Z", "--step", "1h", "--json")))
    assert {p["podName"] for p in cpu["podMetrics"]} == {"cli-done-master-0", "cli-done-worker-0"}
    table = ok(jobs(shared_server, "metrics", finished_job, "--type", "GpuUsage", "--api-version", "v2"))
    assert "no such device" in table and "cli-done-master-0" in table
    bad = jobs(shared_server, "metrics", finished_job, "--type", "CpuTime", "--step", "5x")
    assert bad.exit_code == 2 and "must be a duration like 5m, 30s or 1h" in bad.output, bad.output
    assert "Traceback" not in bad.output
