"""``job-chain pools``, ``queues`` and ``jobs list --status/--name`` over v1 and v2, against a
real local server with configured pools and queues."""

from __future__ import annotations

import json
from typing import Iterator

import pytest
from chain_helpers import cli_here
from conftest import LocalServer, job_body


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    server = LocalServer(tmp_path_factory.mktemp("pools-cli"), extra_args=[
        "--pool", "cce-a:8", "--pool", "cce-b", "--queue", "cce-a/default:2", "--queue", "cce-a/gpu:1"])
    server.start()
    client = server.client()
    for name, command in (("keep-ok", "true"), ("keep-bad", "false"), ("other", "true")):
        job = client.create_job("cce-a", job_body(name, command))
        server.wait_status(job["jobId"], ("Succeeded", "Failed"), pool="cce-a")
    yield server
    server.cleanup()


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_pools_and_queues(pooled: LocalServer, version: str) -> None:
    from job_chain.aihc.pools import pool_row, queue_row

    pools = json.loads(cli_here("pools", "--json", "--api-version", version, server=pooled, check=True).stdout)
    assert {pool_row(p)["resourcePoolId"]: pool_row(p)["maxRunningJobs"] for p in pools} == {"cce-a": 8, "cce-b": None}
    table = cli_here("pools", "--api-version", version, server=pooled, check=True).stdout
    assert "cce-a" in table and "cce-b" in table
    queues = json.loads(cli_here("queues", "--pool", "cce-a", "--json", "--api-version", version,
                            server=pooled, check=True).stdout)
    assert {queue_row(q)["queueName"]: queue_row(q)["maxRunningJobs"] for q in queues} == {"default": 2, "gpu": 1}
    assert "gpu" in cli_here("queues", "--pool", "cce-a", server=pooled, check=True).stdout
    missing = cli_here("queues", "--pool", "cce-zzz", "--api-version", version, server=pooled)
    assert missing.returncode != 0 and "NoSuchResourcePool" in missing.stderr
    assert "Traceback" not in missing.stderr


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_jobs_list_filters_by_status_and_name(pooled: LocalServer, version: str) -> None:
    def names(*args: str) -> list:
        done = cli_here("jobs", "list", "--pool", "cce-a", "--json", "--api-version", version, *args,
                   server=pooled, check=True)
        return sorted(j["name"] for j in json.loads(done.stdout))

    assert names() == ["keep-bad", "keep-ok", "other"]
    assert names("--name", "keep") == ["keep-bad", "keep-ok"]
    assert names("--status", "Failed") == ["keep-bad"]
    assert names("--status", "Succeeded", "--name", "keep") == ["keep-ok"]
    assert names("--status", "Running") == []
