"""Every seed-001 endpoint of the local server, through our client and the official SDK."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any, Dict, List

import pytest
from conftest import LocalServer, job_body

from job_chain.aihc.errors import AIHCError


def _sdk_dict(response: Any) -> Dict[str, Any]:
    """The SDK's parse_json keeps the raw body: compare shapes on plain JSON."""
    return json.loads(response.raw_data)


def test_create_list_detail_shapes(shared_server: LocalServer) -> None:
    client, pool = shared_server.client(), shared_server.pool
    created = client.create_job(pool, job_body("shape-job", "echo hello", labels=[
        {"key": "team", "value": "a"}]))
    assert set(created) == {"jobId", "jobName"} and created["jobName"] == "shape-job"
    assert created["jobId"].startswith("pytorchjob-")
    job = shared_server.wait_status(created["jobId"], "Succeeded")
    listed = client.list_jobs(pool, page_size=100)
    assert set(listed) == {"total", "jobs", "orderBy", "order", "pageNo", "pageSize"}
    entry = next(j for j in listed["jobs"] if j["jobId"] == created["jobId"])
    seed = {"jobId", "name", "resourcePoolId", "command", "createdAt", "finishedAt", "datasources",
            "enableFaultTolerance", "labels", "priority", "queue", "status", "image", "resources", "enableRDMA",
            "queueingSequence"}
    go_sdk = {"runningAt", "scheduledAt", "customFaultTolerancePattern", "hostNetwork", "replicas", "envs",
              "jobFramework", "enableBccl", "enableBcclStatus", "enableBcclErrorReason", "k8sUID", "k8sNamespace"}
    assert set(entry) == seed | go_sdk  # seed 001's list item and the Go SDK's OpenAPIGetJobResponseResult
    assert entry["runningAt"].endswith("Z") and entry["scheduledAt"] <= entry["runningAt"]
    labels = {lb["key"]: lb["value"] for lb in entry["labels"]}
    assert labels["aijob.cce.baidubce.com/create-from-aihcp-api"] == "true"
    assert labels["aijob.cce.baidubce.com/openapi-jobid"] == created["jobId"]
    assert labels["team"] == "a"
    assert entry["createdAt"].endswith("Z") and "T" in entry["createdAt"]
    assert entry["finishedAt"].endswith("Z")
    pods = job["podList"]["pods"]
    assert job["podList"]["listMeta"]["totalItems"] == 1
    assert pods[0]["objectMeta"]["name"] == "shape-job-master-0"
    assert pods[0]["podStatus"] == {"podPhase": "Succeeded", "status": "Succeeded"}
    assert pods[0]["replicaType"] == "master"
    assert pods[0]["reason"] == "Completed" and pods[0]["finishedAt"].endswith("Z")  # Go SDK OpenAPIPod
    envs = {e["name"]: e["value"] for e in pods[0]["envs"]}
    assert envs["RANK"] == "0" and envs["WORLD_SIZE"] == "1"

    sdk = shared_server.sdk()
    detail = _sdk_dict(sdk.get_aijob(pool, created["jobId"]))
    assert detail["result"]["jobId"] == created["jobId"] and "requestId" in detail
    assert detail["result"]["podList"]["pods"][0]["objectMeta"]["name"] == "shape-job-master-0"
    listed_sdk = _sdk_dict(sdk.get_all_aijobs(pool, pageNo=1, pageSize=50))
    assert created["jobId"] in [j["jobId"] for j in listed_sdk["result"]["jobs"]]


def test_a_listed_job_is_listed_again_as_it_is_now(shared_server: LocalServer) -> None:
    """The list keeps each job's item while its row is unchanged (test_local_listing.py): over the
    wire, a job listed while queued or running is listed again finished, with its new priority, each
    item exactly its detail without the pods."""
    client, pool = shared_server.client(), "pool-relist"
    job_id = client.create_job(pool, job_body("relist", "true"))["jobId"]

    def item() -> Dict[str, Any]:
        return next(j for j in client.list_jobs(pool, page_size=100)["jobs"] if j["jobId"] == job_id)

    assert item()["status"] in ("Pending", "Scheduled", "Running") and item()["priority"] == "normal"
    detail = shared_server.wait_status(job_id, "Succeeded", pool=pool)
    client.update_job(pool, job_id, priority="high")
    now = item()
    assert now["status"] == "Succeeded" and now["finishedAt"] == detail["finishedAt"] != ""
    assert now["priority"] == "high"
    detail = client.get_job(pool, job_id)
    del detail["podList"]
    assert now == detail


def test_sdk_create_and_lifecycle(shared_server: LocalServer) -> None:
    sdk, pool = shared_server.sdk(), shared_server.pool
    created = _sdk_dict(sdk.create_aijob(str(uuid.uuid4()), pool,
                                         job_body("sdk-job", "echo from-sdk; sleep 30")))
    job_id = created["result"]["jobId"]
    shared_server.wait_status(job_id, "Running")
    pod = "sdk-job-master-0"
    events = _sdk_dict(sdk.get_aijob_events(pool, job_id, "PyTorchJob"))
    assert events["total"] == len(events["events"]) and "requestId" in events
    assert {"reason", "message", "firstTimestamp", "lastTimestamp", "count", "type"} <= set(
        events["events"][0])
    assert any(e["reason"] == "SuccessfulCreatePod" for e in events["events"])
    pod_events = _sdk_dict(sdk.get_aijob_pod_events(pool, job_id, pod, "PyTorchJob"))
    assert [e["reason"] for e in pod_events["events"]][-1] == "Scheduled"
    assert pod_events["events"][0]["firstTimestamp"].endswith(" +0000 UTC")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        logs = _sdk_dict(sdk.get_aijob_logs(pool, job_id, pod))["result"]
        if logs["logs"]:
            break
        time.sleep(0.05)
    assert logs == {"jobId": job_id, "podName": pod, "logs": ["from-sdk\n"], "nextMarker": ""}  # Go SDK PodLogResult
    nodes = _sdk_dict(sdk.get_aijob_nodes(pool, job_id))["result"]
    assert nodes["jobID"] == job_id and len(nodes["nodeName"]) == 1
    url = _sdk_dict(sdk.get_webterminal(pool, job_id, pod))["result"]["WebTerminalUrl"]
    assert url.startswith("ws://127.0.0.1:") and "handshakeTimeoutSecond=30" in url
    stopped = _sdk_dict(sdk.stop_aijob(pool, job_id))
    assert stopped["result"] == {"jobId": job_id}
    shared_server.wait_status(job_id, "Stopped")
    deleted = _sdk_dict(sdk.delete_aijob(pool, job_id))
    assert deleted["result"] == {"jobId": job_id, "jobName": "sdk-job"}
    with pytest.raises(AIHCError) as info:
        shared_server.client().get_job(pool, job_id)
    assert info.value.status == 404


def test_sdk_metrics_without_metric_type_is_400(shared_server: LocalServer) -> None:
    from baidubce.exception import BceHttpClientError

    job_id = shared_server.client().create_job(shared_server.pool, job_body("m400", "true"))["jobId"]
    with pytest.raises(BceHttpClientError) as info:
        shared_server.sdk().get_aijob_metrics(shared_server.pool, job_id)
    assert info.value.last_error.status_code == 400
    assert info.value.last_error.code == "InvalidParameter"


def test_sdk_update_aijob_is_broken_client_side(shared_server: LocalServer) -> None:
    """SDK bug: update_aijob passes a str path; send_request does ``path + b'?'`` → TypeError.

    The same PUT with a bytes path (what the SDK should send) works against the server.
    """
    from baidubce.http import http_methods
    from baidubce.services.aihc import aihc_handler

    pool = shared_server.pool
    job_id = shared_server.client().create_job(pool, job_body("upd", "true"))["jobId"]
    sdk = shared_server.sdk()
    with pytest.raises(TypeError):
        sdk.update_aijob(pool, job_id, "high")
    response = sdk._send_request(http_methods.PUT, f"/api/v1/aijobs/{job_id}".encode(),
                                 params={"resourcePoolId": pool},
                                 body=json.dumps({"priority": "high"}).encode(),
                                 body_parser=aihc_handler.parse_json)
    assert _sdk_dict(response)["result"] == {"jobId": job_id}
    assert shared_server.client().get_job(pool, job_id)["priority"] == "high"


def test_our_client_every_endpoint(shared_server: LocalServer) -> None:
    client, pool = shared_server.client(), shared_server.pool
    job_id = client.create_job(pool, job_body("ours", "for i in 1 2 3 4 5; do echo l$i; done"))["jobId"]
    shared_server.wait_status(job_id, "Succeeded")
    pod = "ours-master-0"
    assert client.pod_logs(pool, job_id, pod)["logs"] == ["l1\nl2\nl3\nl4\nl5\n"]
    assert client.pod_logs(pool, job_id, pod, max_lines=2)["logs"] == ["l4\nl5\n"]
    assert client.pod_logs(pool, job_id, pod, chunk=2)["logs"] == ["l1\nl2\n", "l3\nl4\n", "l5\n"]
    assert client.pod_logs(pool, job_id, pod, max_lines=3, chunk=1)["logs"] == ["l3\n", "l4\n", "l5\n"]
    assert client.pod_logs(pool, job_id, pod, start_time=int(time.time()) + 60)["logs"] == []
    events = client.job_events(pool, job_id)
    reasons = [e["reason"] for e in events["events"]]
    assert {"SuccessfulCreatePod", "ExitedWithCode", "JobSucceeded"} <= set(reasons)
    exited = next(e for e in events["events"] if e["reason"] == "ExitedWithCode")
    assert exited["message"] == f"Pod: default.{pod} exited with code 0"
    future = client.job_events(pool, job_id, start_time=str(int(time.time()) + 60))
    assert future["total"] == 0
    pod_events = client.pod_events(pool, job_id, pod)
    assert {"Scheduled", "Created", "Started"} <= {e["reason"] for e in pod_events["events"]}
    assert client.job_nodes(pool, job_id)["nodeName"]
    assert client.update_job(pool, job_id, "low") == {"jobId": job_id}
    assert client.get_job(pool, job_id)["priority"] == "low"
    assert client.stop_job(pool, job_id) == {"jobId": job_id}  # finished: stop is harmless
    assert client.get_job(pool, job_id)["status"] == "Succeeded"
    gpu = client.job_metrics(pool, job_id, "GpuUsage")
    assert gpu["podMetrics"] == [{"podName": pod, "metrics": []}] and "no such device" in gpu["message"]
    assert client.delete_job(pool, job_id)["jobId"] == job_id


def test_list_order_paging_and_queue_filter(shared_server: LocalServer) -> None:
    client, pool = shared_server.client(), "pool-order"
    ids = [client.create_job(pool, job_body(f"ord-{i}", "true", queue="q1" if i % 2 else "q2"))["jobId"]
           for i in range(5)]
    desc = client.list_jobs(pool, page_size=100)
    assert [j["jobId"] for j in desc["jobs"]] == ids[::-1] and desc["total"] == 5
    asc = client.list_jobs(pool, order="asc", page_size=2, page_no=2)
    assert [j["jobId"] for j in asc["jobs"]] == ids[2:4] and asc["pageNo"] == 2
    assert client.list_jobs(pool, queue="q1")["total"] == 2
    assert client.list_jobs(pool, queue="all")["total"] == 5
    assert len(list(client.iter_jobs(pool, page_size=2))) == 5
    assert client.list_jobs(pool, order_by="finishedAt")["orderBy"] == "finishedAt"
    with pytest.raises(AIHCError) as info:
        client.list_jobs(pool, order="sideways")
    assert info.value.status == 400


def test_pool_isolation_and_unknown_ids(shared_server: LocalServer) -> None:
    client, pool = shared_server.client(), shared_server.pool
    job_id = client.create_job(pool, job_body("iso", "true"))["jobId"]
    for call in (lambda: client.get_job("other-pool", job_id),
                 lambda: client.get_job(pool, "pytorchjob-nope"),
                 lambda: client.stop_job(pool, "pytorchjob-nope"),
                 lambda: client.delete_job(pool, "pytorchjob-nope"),
                 lambda: client.job_events(pool, "pytorchjob-nope"),
                 lambda: client.job_nodes(pool, "pytorchjob-nope")):
        with pytest.raises(AIHCError) as info:
            call()
        assert info.value.status == 404 and info.value.code == "NoSuchJob"
    with pytest.raises(AIHCError) as info:
        client.pod_logs(pool, job_id, "no-such-pod")
    assert info.value.status == 404 and info.value.code == "NoSuchPod"


@pytest.mark.parametrize("body,field", [
    ({"name": "Bad_Name", "jobSpec": {"image": "i", "command": "c"}}, "name"),
    ({"name": "ok", "jobSpec": {"image": "", "command": "c"}}, "jobSpec.image"),
    ({"name": "ok", "jobSpec": {"image": "i"}}, "jobSpec.command"),
    ({"name": "ok"}, "jobSpec"),
    ({"name": "ok", "jobSpec": {"image": "i", "command": "c", "replicas": 0}}, "jobSpec.replicas"),
    ({"name": "ok", "jobSpec": {"image": "i", "command": "c"}, "priority": "urgent"}, "priority"),
    ({"name": "ok", "jobSpec": {"image": "i", "command": "c"}, "jobFramework": "MPIJob"},
     "jobFramework"),
    ({"name": "ok", "jobSpec": {"image": "i", "command": "c", "envs": [{"value": "x"}]}},
     "jobSpec.envs"),
])
def test_create_validation(shared_server: LocalServer, body: Dict[str, Any], field: str) -> None:
    with pytest.raises(AIHCError) as info:
        shared_server.client().create_job(shared_server.pool, body)
    assert info.value.status == 400 and field in str(info.value)


def test_raw_http_errors_are_bce_shaped(shared_server: LocalServer) -> None:
    client = shared_server.client()
    cases = [("GET", "/api/v1/nothing-here", {"resourcePoolId": "p"}, None, 404),
             ("GET", "/api/v1/aijobs", {}, None, 400),
             ("PUT", "/api/v1/aijobs", {"resourcePoolId": "p"}, None, 405)]
    for method, path, params, body, status in cases:
        with pytest.raises(AIHCError) as info:
            client.request(method, path, params=params, body=body, retry=False)
        assert info.value.status == status, (method, path)
        assert info.value.request_id
    # bad JSON body: sign a raw body with the SDK and send it
    from baidubce.bce_client_configuration import BceClientConfiguration  # noqa: F401
    from baidubce.http import http_methods
    from baidubce.services.aihc import aihc_handler

    with pytest.raises(Exception) as info:
        shared_server.sdk()._send_request(http_methods.POST, b"/api/v1/aijobs", body=b"{not json",
                                          params={"resourcePoolId": "p"},
                                          body_parser=aihc_handler.parse_json)
    error = getattr(info.value, "last_error", info.value)
    assert error.status_code == 400 and error.code == "MalformedJSON"  # BCE: 400 MalformedJSON
    assert "not valid JSON" in str(error)


def test_client_token_is_idempotent_even_concurrently(shared_server: LocalServer) -> None:
    client, pool = shared_server.client(), "pool-token"
    token = str(uuid.uuid4())
    first = client.create_job(pool, job_body("tok", "true"), client_token=token)
    assert client.create_job(pool, job_body("tok", "true"), client_token=token) == first
    token2 = str(uuid.uuid4())
    results: List[str] = []

    def create() -> None:
        results.append(shared_server.client().create_job(pool, job_body("tok2", "true"),
                                                         client_token=token2)["jobId"])

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and len(set(results)) == 1
    names = [j["name"] for j in client.list_jobs(pool, page_size=100)["jobs"]]
    assert names.count("tok") == 1 and names.count("tok2") == 1
    # a token names one request: in another pool it is another request, refused as BCE's rule has it
    with pytest.raises(AIHCError) as info:
        client.create_job("pool-token-2", job_body("tok", "true"), client_token=token)
    assert (info.value.status, info.value.code) == (403, "IdempotentParameterMismatch")
    assert "pool-token" in info.value.message and first["jobId"] in info.value.message


def test_metrics_real_cpu_samples(shared_server: LocalServer) -> None:
    client, pool = shared_server.client(), shared_server.pool
    busy = "end=$((SECONDS+3)); while [ $SECONDS -lt $end ]; do :; done"
    job_id = client.create_job(pool, job_body("busy", busy))["jobId"]
    idle_id = client.create_job(pool, job_body("idle", "sleep 3"))["jobId"]
    shared_server.wait_status(job_id, "Succeeded", timeout=30)
    shared_server.wait_status(idle_id, "Succeeded", timeout=30)
    cpu = client.job_metrics(pool, job_id, "CpuUsage", time_step=1)  # the default is AIHC's 5 minutes
    points = cpu["podMetrics"][0]["metrics"]
    idle = client.job_metrics(pool, idle_id, "CpuUsage", time_step=1)["podMetrics"][0]["metrics"]
    # real samples: a busy loop shows CPU use and a sleep none (how much the loop gets depends on
    # what else the machine runs, so the figure is compared with the idle pod's, not a fixed share)
    assert len(points) >= 2 and max(p["value"] for p in points) > max([p["value"] for p in idle] + [0.0]) + 5
    assert all(isinstance(p["time"], int) for p in points)
    mem = client.job_metrics(pool, job_id, "MemoryAllocation", time_step=1)["podMetrics"][0]["metrics"]
    assert mem and all(p["value"] > 0 for p in mem)
    coarse = client.job_metrics(pool, job_id, "CpuUsage", time_step=3600)["podMetrics"][0]["metrics"]
    assert 1 <= len(coarse) <= 2
    by_default = client.job_metrics(pool, job_id, "CpuUsage")["podMetrics"][0]["metrics"]
    assert 1 <= len(by_default) <= 2 and all(p["time"] % 300 == 0 for p in by_default)  # 5-minute points
    late = client.job_metrics(pool, job_id, "CpuUsage", start_time=int(time.time()) + 60)
    assert late["podMetrics"][0]["metrics"] == []
    with pytest.raises(AIHCError) as info:
        client.job_metrics(pool, job_id, "Bogus")
    assert info.value.status == 400


def test_webterminal_streams_log(shared_server: LocalServer) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    client, pool = shared_server.client(), shared_server.pool
    cmd = "for i in 1 2 3; do echo line$i; sleep 0.3; done"
    job_id = client.create_job(pool, job_body("term", cmd))["jobId"]
    shared_server.wait_status(job_id, "Running")
    url = client.webterminal(pool, job_id, "term-master-0")["WebTerminalUrl"]
    assert "token=" in url and url.endswith("handshakeTimeoutSecond=30&pingTimeoutSecond=900")
    received = []
    with connect(url, open_timeout=5) as ws:
        for message in ws:
            received.append(message)
    assert "".join(received) == "line1\nline2\nline3\n"
    assert len(received) >= 2  # it followed the log live, not one read at the end
    with pytest.raises(InvalidStatus):  # tokens are single-use
        connect(url, open_timeout=5)
    with pytest.raises(InvalidStatus):
        connect(url.split("token=")[0] + "token=bogus", open_timeout=5)
