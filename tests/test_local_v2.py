"""The AIHC OpenAPI v2 on the local server: the official SDK's v2 clients, unchanged, over real
HTTP; v1 and v2 over the same state; pools and queues as real state; what is not emulated."""

from __future__ import annotations

import http.client
import json
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from conftest import LocalServer, job_body

POOL = "cce-local"


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """A server with two pools; cce-local has queues default (2 at once) and q1 (1 at once)."""
    server = LocalServer(tmp_path_factory.mktemp("local-v2"), extra_args=[
        "--pool", f"{POOL}:8", "--pool", "cce-other", "--queue", f"{POOL}/default:2",
        "--queue", f"{POOL}/q1:1"])
    server.start()
    yield server
    server.cleanup()


def data(response: Any) -> Dict[str, Any]:
    """The JSON answer behind an SDK response object."""
    return json.loads(response.raw_data)


def sdk_error(call: Any, *args: Any) -> Any:
    """The BceServerError an SDK call raises (the job client wraps it in BceHttpClientError)."""
    from baidubce.exception import BceHttpClientError, BceServerError

    with pytest.raises((BceHttpClientError, BceServerError)) as info:
        call(*args)
    return getattr(info.value, "last_error", None) or info.value


def test_official_v2_job_client_runs_unchanged(pooled: LocalServer) -> None:
    sdk = pooled.sdk_v2()
    created = data(sdk.CreateJob(POOL, {
        "name": "v2-sdk", "queue": "default", "jobType": "PyTorchJob", "command": "echo from-v2; sleep 30",
        "jobSpec": {"image": "local", "replicas": 1, "envs": [{"name": "A", "value": "1"}]},
        "priority": "normal"}))
    job_id = created["jobId"]
    assert created["jobName"] == "v2-sdk" and created["requestId"]
    pooled.wait_status(job_id, "Running", pool=POOL)

    detail = data(sdk.DescribeJob(POOL, job_id, needDetail=True))
    assert detail["jobId"] == job_id and detail["command"].startswith("echo from-v2")
    assert detail["jobSpec"]["image"] == "local" and detail["queue"] == "default"
    listed = data(sdk.DescribeJobs(POOL, status="Running", keywork="v2-s"))  # the SDK's spelling
    assert [j["jobId"] for j in listed["jobs"]] == [job_id] and listed["totalCount"] == 1
    assert data(sdk.DescribeJobs(POOL, status="Succeeded", keywork="v2-s"))["totalCount"] == 0

    assert data(sdk.ModifyJob(POOL, job_id, "high"))["jobId"] == job_id
    assert data(sdk.DescribeJob(POOL, job_id))["priority"] == "high"

    events = data(sdk.DescribeJobEvents(POOL, job_id))
    assert events["total"] == len(events["events"]) > 0
    pod = detail["podList"]["pods"][0]["objectMeta"]["name"]
    pod_events = data(sdk.DescribeJobPodEvents(POOL, job_id, pod))
    assert pod_events["total"] >= 1
    logs = data(sdk.DescribeJobLogs(POOL, job_id, podName=pod))
    for _ in range(100):
        if "from-v2" in "".join(logs["logs"]):
            break
        logs = data(sdk.DescribeJobLogs(POOL, job_id, podName=pod))
    assert logs["podName"] == pod and "from-v2" in "".join(logs["logs"])
    assert data(sdk.DescribeJobNodeNames(POOL, job_id))["nodeNames"]
    url = data(sdk.GetJobWebTerminalUrl(POOL, job_id))["webTerminalUrl"]
    assert url.startswith(f"ws://127.0.0.1:{pooled.port}/webterminal/establish?token=")

    assert data(sdk.StopJob(POOL, job_id))["jobId"] == job_id
    assert pooled.wait_status(job_id, "Stopped", pool=POOL)["status"] == "Stopped"
    assert data(sdk.DeleteJob(POOL, job_id))["jobId"] == job_id
    gone = sdk_error(sdk.DescribeJob, POOL, job_id)
    assert gone.status_code == 404 and gone.code == "NoSuchJob"


def test_v1_and_v2_see_the_same_jobs(pooled: LocalServer) -> None:
    v1, v2 = pooled.sdk(), pooled.sdk_v2()
    from_v1 = v1.create_aijob("tok-v1-v2", POOL, job_body("from-v1", "true")).result.jobId
    seen = data(v2.DescribeJob(POOL, from_v1))
    assert seen["name"] == "from-v1" and seen["jobSpec"]["image"] == "local"
    from_v2 = data(v2.CreateJob(POOL, {"name": "from-v2", "queue": "default", "command": "true",
                                       "jobSpec": {"image": "local", "replicas": 1}}))["jobId"]
    back = pooled.client().get_job(POOL, from_v2)
    assert back["name"] == "from-v2" and back["command"] == "true"
    ids = {j["jobId"] for j in data(v2.DescribeJobs(POOL, pageSize=100))["jobs"]}
    assert {from_v1, from_v2} <= ids


def test_pools_and_queues_answer_from_state(pooled: LocalServer) -> None:
    v1, v2 = pooled.sdk(), pooled.sdk_v2()
    pools = data(v2.DescribeResourcePools())
    assert pools["totalCount"] == 2
    assert {p["resourcePoolId"]: p["maxRunningJobs"] for p in pools["resourcePools"]} == {POOL: 8, "cce-other": None}
    assert data(v2.DescribeResourcePool(POOL))["nodeNum"] == 1
    queues = data(v2.DescribeQueues(POOL))
    assert {q["queueName"]: q["maxRunningJobs"] for q in queues["queues"]} == {"default": 2, "q1": 1}
    q1 = next(q["queueId"] for q in queues["queues"] if q["queueName"] == "q1")
    assert data(v2.DescribeQueue(q1))["maxRunningJobs"] == 1
    assert [q["queueName"] for q in data(v2.DescribeQueues("cce-other"))["queues"]] == ["default"]

    assert {p.metadata.id for p in v1.get_all_pools().result.resourcePools} == {POOL, "cce-other"}
    assert v1.get_pool(POOL).result.resourcePool.maxRunningJobs == 8
    assert v1.get_all_nodes(POOL).result.total == 1
    assert {q.name for q in v1.get_all_queues(POOL).result.queues} == {"default", "q1"}
    assert v1.get_queue(POOL, "q1").result.queue.maxRunningJobs == 1
    missing = sdk_error(v1.get_queue, POOL, "nope")
    assert missing.status_code == 404 and missing.code == "NoSuchQueue"


def test_unknown_pool_or_queue_is_refused(pooled: LocalServer) -> None:
    from job_chain.aihc.errors import AIHCError

    client = pooled.client()
    with pytest.raises(AIHCError) as info:
        client.create_job("cce-ghost", job_body("ghost", "true"))
    assert info.value.status == 404 and info.value.code == "NoSuchResourcePool"
    assert "cce-local" in info.value.message
    with pytest.raises(AIHCError) as info:
        client.create_job(POOL, job_body("ghost", "true", queue="q9"))
    assert info.value.code == "NoSuchQueue" and "q1" in info.value.message
    assert not info.value.retryable


def test_a_full_queue_holds_its_jobs_and_not_others(pooled: LocalServer) -> None:
    client = pooled.client()
    first = client.create_job(POOL, job_body("q1-first", "sleep 30", queue="q1"))["jobId"]
    pooled.wait_status(first, "Running", pool=POOL)
    second = client.create_job(POOL, job_body("q1-second", "true", queue="q1"))["jobId"]
    other = client.create_job(POOL, job_body("default-one", "true"))["jobId"]
    pooled.wait_status(other, "Succeeded", pool=POOL)
    assert client.get_job(POOL, second)["status"] == "Pending"
    client.stop_job(POOL, first)
    pooled.wait_status(second, "Succeeded", pool=POOL)


def test_what_the_local_server_does_not_emulate(pooled: LocalServer) -> None:
    v2 = pooled.sdk_v2()
    for call in (v2.DescribeDatasets, v2.DescribeModels, v2.DescribeServices, v2.DescribeDevInstances):
        error = sdk_error(call)
        assert error.status_code == 501 and error.code == "NotImplemented", call
        assert "not supported by the local server" in str(error)
    status, answer = raw(pooled, "GET", "/api/v1/datasets")
    assert status == 501 and "not supported by the local server" in answer["message"]


def raw(server: LocalServer, method: str, path: str, body: bytes = b"",
        params: Any = None) -> Tuple[int, Dict[str, Any]]:
    """One request signed with the SDK's signer (the body is sent as given)."""
    from urllib.parse import urlencode

    from baidubce.auth import bce_v1_signer
    from baidubce.auth.bce_credentials import BceCredentials

    params = params or {}
    headers = {b"host": f"127.0.0.1:{server.port}".encode(), b"content-type": b"application/json",
               b"content-length": str(len(body)).encode()}
    auth = bce_v1_signer.sign(BceCredentials(server.ak, server.sk), method.encode(), path.encode(),
                              headers, params).decode()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request(method, f"{path}?{urlencode(params)}" if params else path, body=body,
                 headers={"Authorization": auth, "Content-Type": "application/json"})
    response = conn.getresponse()
    answer = json.loads(response.read())
    conn.close()
    return response.status, answer


def test_malformed_json_and_a_reused_client_token(pooled: LocalServer) -> None:
    status, answer = raw(pooled, "POST", "/api/v1/aijobs", b'{"name": ', {"resourcePoolId": POOL})
    assert status == 400 and answer["code"] == "MalformedJSON", answer
    status, answer = raw(pooled, "POST", "/", b"{nope", {"action": "CreateJob", "resourcePoolId": POOL})
    assert status == 400 and answer["code"] == "MalformedJSON", answer

    from job_chain.aihc.errors import AIHCError

    client = pooled.client()
    first = client.create_job(POOL, job_body("tok", "true"), client_token="same-token")
    again = client.create_job(POOL, job_body("tok", "true"), client_token="same-token")
    assert again["jobId"] == first["jobId"]
    with pytest.raises(AIHCError) as info:
        client.create_job(POOL, job_body("tok", "false"), client_token="same-token")
    assert info.value.code == "IdempotentParameterMismatch" and not info.value.retryable
    # the same job through v2 with the same token and body is the same job
    v2 = data(pooled.sdk_v2().CreateJob(POOL, {"name": "tok", "queue": "default", "command": "true",
                                               "jobSpec": {"image": "local", "replicas": 1},
                                               "clientToken": "same-token"}))
    assert v2["jobId"] == first["jobId"]


def test_unknown_action_is_a_bce_error(pooled: LocalServer) -> None:
    status, answer = raw(pooled, "POST", "/", b"{}", {"action": "LaunchRocket", "resourcePoolId": POOL})
    assert status == 400 and answer["code"] == "InvalidAction" and "DescribeJobs" in answer["message"]


@pytest.mark.parametrize(("pools", "queues", "message"), [
    ((), ("default:4",), "--queue needs the pool"),
    (("Bad_Pool",), (), "lower-case letters"),
    (("cce-a:0",), (), "whole number from 1"),
    (("cce-a", "cce-a"), (), "given twice"),
    (("cce-a",), ("cce-b/default",), "not among the --pool options"),
    (("cce-a",), ("a.b",), "queue name must be"),
])
def test_pool_options_are_checked(pools: Any, queues: Any, message: str) -> None:
    from job_chain.errors import UsageError
    from job_chain.local.server import pool_config

    with pytest.raises(UsageError) as info:
        pool_config(pools, queues)
    assert message in str(info.value)


def test_pool_options_build_pools_and_queues() -> None:
    from job_chain.local.server import pool_config

    assert pool_config(("cce-a:8", "cce-b"), ("default:4", "cce-b/gpu")) == (
        [("cce-a", 8), ("cce-b", None)],
        [("cce-a", "default", 4), ("cce-b", "default", 4), ("cce-b", "gpu", None)])
    assert pool_config(("cce-a",), ()) == ([("cce-a", None)], [("cce-a", "default", None)])
    assert pool_config() == ([], [])


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_job_chain_client_reads_bce_auth_errors(pooled: LocalServer, version: str) -> None:
    from job_chain.aihc.client import AIHCClient
    from job_chain.aihc.client_v2 import AIHCClientV2
    from job_chain.aihc.credentials import Credentials
    from job_chain.aihc.errors import AIHCError

    cls = AIHCClientV2 if version == "v2" else AIHCClient
    client = cls(Credentials(pooled.url, pooled.ak, "0" * 64, source="test keys"))
    with pytest.raises(AIHCError) as info:
        client.list_jobs(POOL)
    error = info.value
    assert (error.status, error.code) == (400, "SignatureDoesNotMatch") and not error.retryable
    assert "(credentials from test keys)" in str(error)


@pytest.mark.parametrize("command", ["serve", "start"])
def test_a_bad_pool_option_is_one_line_before_anything_starts(tmp_path: Any, command: str) -> None:
    from click.testing import CliRunner

    from job_chain.cli import cli

    state = tmp_path / "state"
    result = CliRunner().invoke(cli, ["local", command, "--state-dir", str(state), "--pool", "Bad_1"])
    assert result.exit_code == 2 and "--pool Bad_1: the pool id must be" in result.output
    assert not state.exists()


def test_a_pods_events_answer_to_both_names_and_the_client_sends_the_2026_one(pooled: LocalServer) -> None:
    """Issue 30 item 4: the 2026 pages name the action DescribePodEvents, the SDK sends
    DescribeJobPodEvents; the local server answers both, and job-chain's v2 client sends the
    pages' name first, falling back to the SDK's (and keeping it) where a service knows only that."""
    from job_chain.aihc import client_v2
    from job_chain.aihc.client_v2 import AIHCClientV2
    from job_chain.aihc.credentials import Credentials

    client = AIHCClientV2(Credentials(pooled.url, pooled.ak, pooled.sk))
    job_id = client.create_job(POOL, dict(job_body("pod-events", "echo hi"), queue="default"))["jobId"]
    pooled.wait_status(job_id, "Succeeded", pool=POOL)
    pod = "pod-events-master-0"
    for name in ("DescribePodEvents", "DescribeJobPodEvents"):
        answer = client.action(name, POOL, {"jobId": job_id, "podName": pod})
        assert answer["total"] >= 1 and answer["events"], name
    assert client.pod_events(POOL, job_id, pod)["total"] >= 1
    assert client._pod_events == ["DescribePodEvents", "DescribeJobPodEvents"]  # answered at once: kept first
    assert client_v2.POD_EVENTS == ("DescribePodEvents", "DescribeJobPodEvents")  # no client changes the others'


def test_v2_job_ids_look_like_aihcs_and_datasource_types_are_the_documented_ones(pooled: LocalServer) -> None:
    """Issue 30 item 6: a v2 job's id is ``job-`` and 12 letters and digits, as the 2026 pages show
    (v1's stays ``pytorchjob-<uuid>``), so nothing depends on the local form; a datasource ``type``
    outside the job-spec page's list is refused at its path."""
    import re

    from job_chain.aihc.spec import body_problems

    sdk = pooled.sdk_v2()
    created = data(sdk.CreateJob(POOL, {"name": "v2-id", "queue": "default", "jobType": "PyTorchJob",
                                        "command": "true", "jobSpec": {"image": "local", "replicas": 1}}))
    assert re.fullmatch(r"job-[a-z0-9]{12}", created["jobId"]), created
    assert pooled.client().create_job(POOL, dict(job_body("v1-id", "true"), queue="default"))["jobId"].startswith(
        "pytorchjob-")
    body = dict(job_body("ds", "true"), datasources=[{"type": "nfs", "name": "x", "mountPath": "/tmp/x"}])
    assert [w for w, _ in body_problems(body)] == ["datasources[0].type"]
    for kind in ("pfs", "hostpath", "bos", "cfs", "rapidfs", "dataset"):
        assert body_problems(dict(body, datasources=[{"type": kind, "name": "x", "mountPath": "/tmp/x"}])) == []


def test_describe_job_metrics_is_served_and_sent_with_the_pages_times(pooled: LocalServer) -> None:
    """Issue 30 item 4: DescribeJobMetrics is a documented v2 action. The local server answers it
    with what it measures of its pods' processes (CPU, memory; no GPU here, said), takes the times
    as the pages write them (ISO 8601, ``timeStep`` "5m"/"30s"/"1h") and refuses bad ones with a
    400 naming the field; job-chain's v2 client sends it."""
    import time

    from job_chain.aihc.client_v2 import AIHCClientV2
    from job_chain.aihc.credentials import Credentials
    from job_chain.aihc.errors import AIHCError
    from job_chain.aihc.timefmt import iso_utc

    client = AIHCClientV2(Credentials(pooled.url, pooled.ak, pooled.sk))
    busy = "end=$((SECONDS+2)); while [ $SECONDS -lt $end ]; do :; done"
    began = int(time.time())
    job_id = client.create_job(POOL, dict(job_body("v2-metrics", busy), queue="default"))["jobId"]
    pooled.wait_status(job_id, "Succeeded", pool=POOL)
    pod = "v2-metrics-master-0"

    cpu = client.job_metrics(POOL, job_id, "CpuUsage", time_step=1)  # sent as DescribeJobMetrics
    assert [p["podName"] for p in cpu["podMetrics"]] == [pod]
    assert max(p["value"] for p in cpu["podMetrics"][0]["metrics"]) > 5  # a busy loop, measured
    answer = client.action("DescribeJobMetrics", POOL, {
        "jobId": job_id, "metricType": "MemoryAllocation", "startTime": iso_utc(began - 60),
        "endTime": iso_utc(int(time.time()) + 60), "timeStep": "1s"})
    assert answer["jobId"] == job_id and answer["requestId"]
    memory = answer["podMetrics"][0]["metrics"]
    assert memory and all(p["value"] > 0 and isinstance(p["time"], int) for p in memory)
    hourly = client.action("DescribeJobMetrics", POOL, {"jobId": job_id, "metricType": "CpuUsage", "timeStep": "1h"})
    points = hourly["podMetrics"][0]["metrics"]
    assert 1 <= len(points) <= 2 and points[0]["time"] % 3600 == 0
    later = client.action("DescribeJobMetrics", POOL, {"jobId": job_id, "metricType": "CpuUsage",
                                                      "startTime": iso_utc(int(time.time()) + 3600)})
    assert later["podMetrics"][0]["metrics"] == []
    gpu = client.job_metrics(POOL, job_id, "GpuUsage")
    assert gpu["podMetrics"] == [{"podName": pod, "metrics": []}] and "no such device" in gpu["message"]

    for field, value, said in (("timeStep", "5x", "timeStep must be a duration like 5m"),
                               ("timeStep", "0s", "timeStep must be more than 0"),
                               ("startTime", "yesterday", "startTime must be unix seconds or an ISO 8601 time"),
                               ("endTime", "2026-13-01T00:00:00Z", "endTime must be unix seconds or an ISO 8601")):
        with pytest.raises(AIHCError) as info:
            client.action("DescribeJobMetrics", POOL, {"jobId": job_id, "metricType": "CpuUsage", field: value})
        assert (info.value.status, info.value.code) == (400, "InappropriateJSON") and said in info.value.message
    with pytest.raises(AIHCError) as info:
        client.action("DescribeJobMetrics", POOL, {"jobId": job_id})
    assert info.value.status == 400 and "metricType" in info.value.message


def test_the_v2_client_tries_the_other_pod_events_name_only_when_the_action_is_unknown() -> None:
    """The pages' name first, the SDK's after it only on an answer that says the action is unknown
    (400 InvalidAction, a 404 that names nothing missing): a 400 about the request is raised as it is."""
    from job_chain.aihc.client_v2 import AIHCClientV2
    from job_chain.aihc.credentials import Credentials
    from job_chain.aihc.errors import AIHCError

    client = AIHCClientV2(Credentials("http://127.0.0.1:9", "ak", "sk"))
    sent: List[str] = []

    def answering(first: AIHCError) -> Any:
        def action(name: str, pool: str, body: Dict[str, Any], **kw: Any) -> Dict[str, Any]:
            sent.append(name)
            if name == "DescribePodEvents":
                raise first
            return {"events": [{"reason": "Started"}], "total": 1}
        return action

    for refusal, falls_back in ((AIHCError("no", status=400, code="InvalidAction"), True),
                                (AIHCError("no", status=404, code="NotFound"), True),
                                (AIHCError("bad", status=400, code="InvalidParameter"), False),
                                (AIHCError("bad", status=400, code="InappropriateJSON"), False),
                                (AIHCError("gone", status=404, code="NoSuchJob"), False),
                                (AIHCError("who", status=403, code="AccessDenied"), False)):
        sent.clear()
        client._pod_events = ["DescribePodEvents", "DescribeJobPodEvents"]
        client.action = answering(refusal)  # type: ignore[method-assign]
        if falls_back:
            assert client.pod_events(POOL, "job-1", "pod-0")["total"] == 1
            assert sent == ["DescribePodEvents", "DescribeJobPodEvents"], refusal.code
        else:
            with pytest.raises(AIHCError):
                client.pod_events(POOL, "job-1", "pod-0")
            assert sent == ["DescribePodEvents"], refusal.code
