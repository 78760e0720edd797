"""Issue 21: what passes on the local server must pass on the real AIHC, and the other way round.

The official SDK's own models, every documented create field, an unknown key (accepted by the
server and logged, reported by validate), the 2026 action names beside the SDK's, ``queueID``,
the API-version header and method, DescribeJobLogs' maxLines/keywords/paging, pool/queue/node
answers field by field against the Go SDK's types, ``Scheduled`` with ``--schedule-delay``, and
``faultTolerance`` restarts. Real server, real HTTP; the rule checks run in-process.
"""

from __future__ import annotations

import datetime
import http.client
import json
import re
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple
from urllib.parse import urlencode

import pytest
from chain_helpers import make_chain
from click.testing import CliRunner
from conftest import LocalServer, job_body

POOL = "cce-fidelity"


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    server = LocalServer(tmp_path_factory.mktemp("fidelity"), extra_args=[
        "--pool", f"{POOL}:8", "--queue", f"{POOL}/default:4", "--queue", f"{POOL}/q2:2"])
    server.start()
    yield server
    server.cleanup()


def data(response: Any) -> Dict[str, Any]:
    return json.loads(response.raw_data)


def v2_client(server: LocalServer) -> Any:
    from job_chain.aihc.client_v2 import AIHCClientV2
    from job_chain.aihc.credentials import Credentials

    return AIHCClientV2(Credentials(server.url, server.ak, server.sk), max_retries=0)


def v2_raw(server: LocalServer, action: str, body: Optional[Dict[str, Any]] = None, method: str = "POST",
           headers: Optional[Dict[str, str]] = None, **params: str) -> Tuple[int, Dict[str, Any]]:
    """One v2 request signed with the SDK's signer, with exactly the headers given."""
    from baidubce.auth import bce_v1_signer
    from baidubce.auth.bce_credentials import BceCredentials

    query = {"action": action, **params}
    raw = json.dumps(body).encode() if body is not None else b""
    signed = {b"host": f"127.0.0.1:{server.port}".encode(), b"content-type": b"application/json"}
    if raw:
        signed[b"content-length"] = str(len(raw)).encode()
    auth = bce_v1_signer.sign(BceCredentials(server.ak, server.sk), method.encode(), b"/", signed, query).decode()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request(method, "/?" + urlencode(query), body=raw or None,
                 headers={"Authorization": auth, "Content-Type": "application/json", **(headers or {})})
    response = conn.getresponse()
    answer = json.loads(response.read())
    conn.close()
    return response.status, answer


JOB_V2 = {"X-API-Version": "v2"}
POOL_V2 = {"version": "v2"}


# -- creates: what AIHC takes, the local server takes -------------------------------------------------
ALL_FIELDS: Dict[str, Any] = {  # every create field of seed 001, the 2026 page and both SDKs
    "name": "every-field", "queue": "default", "jobFramework": "PyTorchJob", "priority": "low",
    "faultTolerance": True, "faultToleranceArgs": "--enable-replace=true",
    "faultToleranceConfig": {"enabledHangDetection": True, "hangDetectionTimeoutMinutes": 30,
                             "faultToleranceLimit": 0, "customFaultTolerancePattern": ["CUDA error"]},
    "tensorboardConfig": {"logDir": "/logs"}, "alertConfig": {"alertType": "job", "receivers": []},
    "retentionPeriod": "1d", "enableBccl": False, "resourcePoolId": POOL, "labels": [{"key": "k", "value": "v"}],
    "codeSource": {"filePath": "a.py"}, "logCollectionFilePatterns": ["*.log"], "requiredNodeAffinity": [],
    "preferredNodeAffinity": [], "runningTimeoutStopTimeUnit": "1d",
    "datasources": [{"type": "pfs", "name": "pfs-1", "mountPath": "/mnt/x", "options": {}, "id": "d",
                     "sourcePath": "/"}],
    "jobSpec": {"command": "true", "image": "local", "replicas": 1, "enableRDMA": False, "hostNetwork": False,
                "privileged": False, "imageConfig": {"username": "u", "password": "p"},
                "envs": [{"name": "A", "value": "1"}],
                "resources": [{"name": "cpu", "quantity": "1"}, {"name": "memory", "quantity": "16Gi"},
                              {"name": "baidu.com/a800_80g_cgpu", "quantity": 8}]},
}


def test_every_documented_create_field_is_accepted_by_both_modes(tmp_path: Path) -> None:
    from job_chain.aihc import spec, v2
    from job_chain.local.backend import validate_create

    body = json.loads(json.dumps(ALL_FIELDS).replace("/mnt/x", str(tmp_path / "mnt")))
    assert spec.body_problems(body) == []  # validate: strict
    clean, ignored = validate_create(body)  # the local server: accepting
    assert ignored == [] and clean["faultToleranceArgs"] == "--enable-replace=true"
    for spelling in v2.DATASOURCE_SPELLINGS:  # the SDK's dataSources and the page's datasource
        mapped = v2.create_to_v2(body)
        mapped[spelling] = mapped.pop("dataSources")
        assert validate_create(v2.create_from_v2(mapped))[0]["datasources"] == body["datasources"]


def test_official_sdk_create_job_with_its_own_models(pooled: LocalServer, tmp_path: Path) -> None:
    """The SDK's JobConfig puts resourcePoolId in the body and Resource quantities as strings."""
    from baidubce.services.aihc.modules.job import job_model as m

    config = m.JobConfig(
        name="sdk-models", queue="default", command="echo models", resourcePoolId=POOL,
        jobSpec=m.JobSpec(image="local", replicas=1, imageConfig=m.ImageConfig("user", "secret-pw"),
                          resources=[m.Resource("cpu", "1"), m.Resource("memory", "2")], envs=[m.Env("A", "1")],
                          enableRDMA=False, hostNetwork=False),
        labels=[m.Label("team", "a")], priority="high",
        dataSources=[m.Datasource("pfs", "pfs-1", str(tmp_path / "mnt"))], enableBccl=False,
        faultTolerance=False, faultToleranceArgs="--enable-replace=false",
        tensorboardConfig=m.TensorboardConfig("/logs"), alertConfig=m.AlertConfig("job", []))
    job_id = data(pooled.sdk_v2().CreateJob(POOL, config))["jobId"]
    pooled.wait_status(job_id, "Succeeded", pool=POOL)
    detail = data(pooled.sdk_v2().DescribeJob(POOL, job_id, needDetail=True))
    assert detail["queueId"] == "default" and detail["userId"] and detail["jobType"] == "pytorch"
    assert detail["jobSpec"]["replicas"] == 1 and detail["jobSpec"]["envs"] == [{"name": "A", "value": "1"}]
    assert detail["jobSpec"]["imageConfig"] == {"username": "user", "password": ""}  # never echoed
    assert detail["jobSpec"]["resources"][0] == {"name": "cpu", "quantity": "1"}
    assert detail["dataSources"][0]["mountPath"] == str(tmp_path / "mnt") and detail["podList"]["pods"]
    assert "podList" not in data(pooled.sdk_v2().DescribeJob(POOL, job_id))  # needDetail decides


def test_an_unknown_key_is_accepted_and_logged_by_the_server_but_reported_by_validate(
        pooled: LocalServer, tmp_path: Path) -> None:
    from job_chain.cli import cli as job_chain

    body = job_body("typo-key", "true", jobSpec={"replica": 2}, faultTolerence=True)
    job_id = pooled.client().create_job(POOL, body)["jobId"]
    assert pooled.wait_status(job_id, "Succeeded", pool=POOL)["podList"]["listMeta"]["totalItems"] == 1
    log = (pooled.state_dir / "server.log").read_text()
    assert "ignored unknown keys jobSpec.replica, faultTolerence" in log
    chain = tmp_path / "chain_info.json"
    chain.write_text(json.dumps({"resourcePoolId": POOL, "jobs": [body]}))
    result = CliRunner().invoke(job_chain, ["validate", str(chain)])
    assert result.exit_code == 2
    assert 'jobs[0].jobSpec.replica: unknown key (did you mean "replicas"?)' in result.stderr
    assert 'jobs[0].faultTolerence: unknown key (did you mean "faultTolerance"?)' in result.stderr


def test_v2_create_needs_its_queue_and_matching_queue_id(pooled: LocalServer) -> None:
    body = {"name": "no-queue", "command": "true", "jobSpec": {"image": "local", "replicas": 1}}
    status, answer = v2_raw(pooled, "CreateJob", body, headers=JOB_V2, resourcePoolId=POOL)
    assert (status, answer["code"]) == (400, "InappropriateJSON") and "queue: required" in answer["message"]
    status, answer = v2_raw(pooled, "CreateJob", dict(body, queue="default"), headers=JOB_V2,
                            resourcePoolId=POOL, queueID="q2")
    assert (status, answer["code"]) == (400, "InappropriateJSON") and "queueID" in answer["message"]
    status, answer = v2_raw(pooled, "CreateJob", dict(body, queue="nope"), headers=JOB_V2,
                            resourcePoolId=POOL, queueID="nope")
    assert (status, answer["code"]) == (404, "NoSuchQueue")
    status, answer = v2_raw(pooled, "CreateJob", dict(body, queue="q2"), headers=JOB_V2,
                            resourcePoolId=POOL, queueID="q2")
    assert status == 200 and answer["jobId"]
    status, answer = v2_raw(pooled, "CreateJob", dict(body, queue="q2", jobType="TFJob"), headers=JOB_V2,
                            resourcePoolId=POOL)  # AIHC runs it; the local server says it cannot
    assert (status, answer["code"]) == (501, "NotImplemented") and "PyTorchJob only" in answer["message"]


def test_version_header_and_method_are_refused_as_the_service_would(pooled: LocalServer) -> None:
    job_id = pooled.client().create_job(POOL, job_body("hdr", "true"))["jobId"]
    status, answer = v2_raw(pooled, "DescribeJob", {"jobId": job_id}, resourcePoolId=POOL)
    assert status == 400 and "X-API-Version: v2" in answer["message"]
    status, answer = v2_raw(pooled, "StopJob", {"jobId": job_id}, method="GET", headers=JOB_V2, resourcePoolId=POOL)
    assert (status, answer["code"]) == (405, "MethodNotAllowed")
    status, answer = v2_raw(pooled, "DescribeResourcePools", method="GET", headers=JOB_V2, resourcePoolType="common")
    assert status == 400 and "version: v2" in answer["message"]  # the pool pages' header
    status, answer = v2_raw(pooled, "DescribeResourcePools", method="GET", headers=POOL_V2, resourcePoolType="common")
    assert status == 200 and answer["totalCount"] == 1


def test_both_action_names_and_queue_id(pooled: LocalServer) -> None:
    client = pooled.client()
    job_id = client.create_job(POOL, job_body("names", "sleep 20", queue="q2"))["jobId"]
    pod = pooled.wait_status(job_id, "Running", pool=POOL)["podList"]["pods"][0]["objectMeta"]["name"]
    sdk = pooled.sdk_v2()
    assert data(sdk.DescribeJobNodeNames(POOL, job_id))["nodeNames"]  # the SDK's name
    status, answer = v2_raw(pooled, "DescribeJobNodes", {"jobId": job_id}, headers=JOB_V2, resourcePoolId=POOL,
                            queueID="q2")
    assert status == 200 and set(answer) == {"requestId", "jobId", "nodes"} and answer["nodes"]
    assert data(sdk.GetJobWebTerminalUrl(POOL, job_id))["webTerminalUrl"].startswith("ws://")
    status, answer = v2_raw(pooled, "DescribeJobWebterminal", {"jobId": job_id}, headers=JOB_V2,
                            resourcePoolId=POOL, queueID="q2")
    assert (status, answer["code"]) == (400, "InappropriateJSON") and "podName" in answer["message"]
    status, answer = v2_raw(pooled, "DescribeJobWebterminal", {"jobId": job_id, "podName": pod},
                            headers=JOB_V2, resourcePoolId=POOL, queueID="q2")
    assert status == 200 and answer["webTerminalUrl"].startswith("ws://")
    status, answer = v2_raw(pooled, "DescribeJob", {"jobId": job_id}, headers=JOB_V2, resourcePoolId=POOL,
                            queueID="default")
    assert (status, answer["code"]) == (404, "NoSuchJob") and "its queue is q2" in answer["message"]
    status, answer = v2_raw(pooled, "DescribeJob", {"jobId": job_id}, headers=JOB_V2, resourcePoolId=POOL,
                            queueID="ghost")
    assert (status, answer["code"]) == (404, "NoSuchQueue")
    # job-chain's v2 client sends the job's queue as queueID (a wrong one would be refused above)
    ours = v2_client(pooled)
    assert ours.job_nodes(POOL, job_id)["nodeName"] and ours.webterminal(POOL, job_id, pod)["WebTerminalUrl"]
    assert ours._queues[job_id] == "q2"
    client.stop_job(POOL, job_id)


# -- DescribeJobLogs --------------------------------------------------------------------------------
LINES = 10_000
LOG_SCRIPT = ("awk 'BEGIN { x = sprintf(\"%600s\", \"\"); gsub(/ /, \"x\", x); for (i = 0; i < " + str(LINES)
              + "; i++) printf \"line %05d %s %s\\n\", i, (i % 100 == 0 ? \"ERR\" : \"ok\"), x }'")


@pytest.fixture(scope="module")
def big_log(pooled: LocalServer) -> Tuple[str, str, bytes]:
    """A job whose log has 10,000 lines of ~620 bytes (6 MB: two pages)."""
    job_id = pooled.client().create_job(POOL, job_body("biglog", LOG_SCRIPT))["jobId"]
    pooled.wait_status(job_id, "Succeeded", pool=POOL)
    text = (pooled.state_dir / "jobs" / job_id / "biglog-master-0.log").read_bytes()
    assert text.count(b"\n") == LINES
    return job_id, "biglog-master-0", text


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_describe_job_logs_pages_max_lines_and_keywords(pooled: LocalServer, big_log: Tuple[str, str, bytes],
                                                        version: str) -> None:
    from job_chain.aihc.engine import as_engine
    from job_chain.engine.logs import log_records

    job_id, pod, text = big_log
    client = v2_client(pooled) if version == "v2" else pooled.client()
    lines = text.decode().splitlines(True)
    first = client.pod_logs(POOL, job_id, pod)
    assert first["nextMarker"] and len("".join(first["logs"])) <= 4 << 20
    if version == "v2":  # chunkSize: lines per record, default 1
        assert first["logs"] == lines[:len(first["logs"])]
    else:  # chunk: default 0, everything in one record
        assert len(first["logs"]) == 1
    second = client.pod_logs(POOL, job_id, pod, marker=first["nextMarker"])
    assert second["nextMarker"] == "" and "".join(first["logs"] + second["logs"]).encode() == text
    engine = as_engine(client)
    assert "".join(log_records(engine, POOL, job_id, pod)).encode() == text
    assert "".join(client.pod_logs(POOL, job_id, pod, max_lines=10)["logs"]) == "".join(lines[-10:])
    wanted = [line for line in lines if " ERR " in line]
    assert "".join(log_records(engine, POOL, job_id, pod, keywords=" ERR ")) == "".join(wanted)
    assert "".join(log_records(engine, POOL, job_id, pod, keywords=" ERR ", max_lines=3)) == "".join(wanted[-3:])
    tail = list(log_records(engine, POOL, job_id, pod, max_lines=8000, chunk=1000))
    assert "".join(tail) == "".join(lines[-8000:])  # two pages of records of up to 1000 lines
    assert all(record.count("\n") <= 1000 for record in tail) and len(tail) in (8, 9)


def test_a_marker_the_server_did_not_hand_out_is_invalid_marker(pooled: LocalServer,
                                                                 big_log: Tuple[str, str, bytes]) -> None:
    from job_chain.aihc.errors import AIHCError

    job_id, pod, _ = big_log
    with pytest.raises(AIHCError) as info:
        pooled.client().pod_logs(POOL, job_id, pod, marker="not-a-marker")
    assert (info.value.status, info.value.code) == (400, "InvalidMarker")


# -- pools, queues and nodes: field by field against the Go SDK's types --------------------------------
# Each Go type as {json name: JSON type}; a nested dict is an object, [dict] a list of them.
# Only ``maxRunningJobs`` is the local server's own. Omitted: Go fields tagged omitempty with no value.
TIME = "time"
V1_POOL = {"metadata": {"createdAt": TIME, "name": str, "id": str, "updatedAt": TIME},
           "spec": {"k8sVersion": str, "associatedCpromIds": list, "associatedPfsId": str, "createdBy": str,
                    "description": str, "forbidDelete": bool, "region": str},
           "status": {"gpuDetail": list, "gpuCount": {"total": int, "used": int},
                      "nodeCount": {"total": int, "used": int}, "phase": str}}
V1_NODE = {"chargingType": str, "gpuAllocated": int, "gpuTotal": int, "gpuType": str, "instanceId": str,
           "instanceName": str, "intervention": str, "nodeName": str, "statusPhase": str, "zone": str,
           "region": str, "createdAt": TIME, "gpuDescriptor": str, "cpuTotal": int, "cpuAllocated": int,
           "memoryTotal": int, "memoryAllocated": int}
RESOURCE_LIST = "map[string]string"
V1_QUEUE = {"createdTime": TIME, "description": str, "name": str, "parentQueue": str, "queueType": str,
            "state": str, "reclaimable": bool, "capability": RESOURCE_LIST, "deserved": RESOURCE_LIST,
            "guarantee": RESOURCE_LIST, "allocated": RESOURCE_LIST, "disableOversell": bool, "running": int,
            "inqueue": int, "pending": int, "opened": bool}
V1_PAGE = {"total": int, "orderBy": str, "order": str, "pageNo": int, "pageSize": int}
AMOUNT = {"milliCPUcores": str, "memoryGi": str, "acceleratorCardList": list}
V2_POOL = {"resourcePoolId": str, "type": str, "name": str, "region": str, "description": str, "createdAt": TIME,
           "updatedAt": TIME, "phase": str, "k8sVersion": str, "nodeNum": int}
V2_QUEUE = {"queueId": str, "queueName": str, "description": str, "queueType": str, "resourcePoolId": str,
            "createdAt": TIME, "updatedAt": TIME, "parentQueue": str, "opened": bool, "reclaimable": bool,
            "preemptable": bool, "disableOversell": bool, "capability": AMOUNT, "deserved": AMOUNT,
            "guarantee": AMOUNT, "allocated": AMOUNT, "runningJobs": int, "inqueueJobs": int, "pendingJobs": int}
LOCAL_ONLY = {"maxRunningJobs"}


def conforms(value: Any, shape: Any, where: str = "") -> None:
    if isinstance(shape, dict):
        assert isinstance(value, dict), where
        assert set(value) - LOCAL_ONLY - {"requestId"} <= set(shape), (where, set(value) - set(shape))
        for key, inner in shape.items():
            assert key in value, f"{where}.{key} missing"
            conforms(value[key], inner, f"{where}.{key}")
    elif shape == TIME:
        datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")  # RFC 3339, as Go writes time.Time
    elif shape == RESOURCE_LIST:
        assert isinstance(value, dict) and all(isinstance(v, str) for v in value.values()), where
    else:
        assert isinstance(value, shape) and not (shape is int and isinstance(value, bool)), (where, value)


def test_pool_queue_and_node_answers_follow_the_go_sdk_types(pooled: LocalServer) -> None:
    v1, v2 = pooled.sdk(), pooled.sdk_v2()
    pools = data(v1.get_all_pools())["result"]
    conforms(pools, dict(V1_PAGE, resourcePools=list))
    conforms(pools["resourcePools"][0], V1_POOL)
    conforms(data(v1.get_pool(POOL))["result"]["resourcePool"], V1_POOL)
    nodes = data(v1.get_all_nodes(POOL))["result"]
    conforms(nodes, dict(V1_PAGE, nodes=list))
    conforms(nodes["nodes"][0], V1_NODE)
    queues = data(v1.get_all_queues(POOL))["result"]
    conforms(queues, dict(V1_PAGE, queues=list))
    for queue in queues["queues"] + [data(v1.get_queue(POOL, "q2"))["result"]["queue"]]:
        conforms(queue, V1_QUEUE)

    listed = data(v2.DescribeResourcePools())
    conforms(listed, {"keywordType": str, "keyword": str, "orderBy": str, "order": str, "pageNumber": int,
                      "pageSize": int, "totalCount": int, "resourcePools": list})
    conforms(listed["resourcePools"][0], V2_POOL)
    conforms(data(v2.DescribeResourcePool(POOL)), V2_POOL)
    queues = data(v2.DescribeQueues(POOL))
    conforms(queues, {"pageSize": int, "pageNumber": int, "keyword": str, "keywordType": str, "totalCount": int,
                      "queues": list})
    for queue in queues["queues"]:
        conforms(queue, V2_QUEUE)
        assert re.fullmatch(r"queue-[a-z0-9]{12}", queue["queueId"])  # the service's form
        conforms(data(v2.DescribeQueue(queue["queueId"])), V2_QUEUE)


def test_pool_type_filters_and_an_unknown_queue_is_named(pooled: LocalServer) -> None:
    from baidubce.exception import BceServerError

    v2 = pooled.sdk_v2()
    assert data(v2.DescribeResourcePools(resourcePoolType="dedicatedV2"))["totalCount"] == 0
    assert data(v2.DescribeResourcePools(keyword="nothing-like-it"))["totalCount"] == 0
    status, answer = v2_raw(pooled, "DescribeResourcePools", method="GET", headers=POOL_V2)
    assert status == 400 and "resourcePoolType" in answer["message"]
    with pytest.raises(BceServerError) as info:
        v2.DescribeQueue("queue-000000000000")
    assert info.value.status_code == 404 and info.value.code == "NoSuchQueue"
    assert "queue-000000000000 does not exist" in str(info.value)


# -- lifecycle: Scheduled, and fault tolerance ------------------------------------------------------
def test_a_job_is_seen_scheduled_with_schedule_delay(local_server_factory: Any, tmp_path: Path) -> None:
    """In-process looks (milliseconds) inside a 3 s delay, so a loaded machine cannot miss it."""
    from job_chain.cli import cli as job_chain
    from job_chain.session import ChainSession

    server = local_server_factory(extra_args=["--schedule-delay", "3s"])
    client = server.client()
    job_id = client.create_job(server.pool, job_body("slow-start", "true"))["jobId"]
    job = server.wait_status(job_id, "Scheduled", timeout=5)
    assert job["scheduledAt"] and job["runningAt"] == "" and job["podList"]["pods"][0]["PodIP"] == ""
    assert v2_client(server).get_job(server.pool, job_id)["status"] == "Scheduled"
    shown = CliRunner().invoke(job_chain, ["jobs", "get", job_id, "--pool", server.pool],
                               env={"JOB_CHAIN_CREDENTIALS": server.credentials_file}).stdout
    assert re.search(r"queueId:\s+default", shown) and re.search(r"scheduledAt:\s+20", shown)
    assert re.search(r"runningAt:\s+-", shown) and re.search(r"status:\s+Scheduled", shown)
    # job-chain treats Scheduled as still going: the run is running, its step Scheduled
    chain = make_chain(tmp_path, [{"script": "echo hi\n"}], server.pool)
    session = ChainSession.from_file(str(chain), client=client)
    status = session.status(session.start().run_id)
    assert status.steps[0].status == "Scheduled" and status.outcome == "running" and status.steps[0].active
    done = server.wait_status(job_id, "Succeeded", timeout=15)
    assert done["scheduledAt"] <= done["runningAt"] <= done["finishedAt"]


@pytest.mark.parametrize(("text", "seconds"), [("0", 0.0), ("20s", 20.0), ("1m", 60.0), ("2.5", 2.5),
                                               ("20.0", 20.0), ("-1", None), ("2d", None), ("soon", None)])
def test_schedule_delay_takes_durations_and_seconds(text: str, seconds: Optional[float]) -> None:
    from job_chain.cli import cli as job_chain
    from job_chain.cli.local import Delay

    if seconds is not None:
        assert Delay().convert(text, None, None) == seconds  # `local start` passes "20.0" to serve
    else:
        result = CliRunner().invoke(job_chain, ["local", "serve", "--schedule-delay", text])
        assert result.exit_code == 2 and "is not a duration of at most a day" in result.output


def events_of(server: LocalServer, pool: str, job_id: str, reason: str) -> list:
    return [e for e in server.client().job_events(pool, job_id)["events"] if e["reason"] == reason]


def test_fault_tolerance_restarts_a_failed_job_up_to_its_limit(pooled: LocalServer, tmp_path: Path) -> None:
    counter = tmp_path / "tries"
    flaky = f'n=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 )); echo $n > {counter}; echo try $n; [ $n -ge 2 ]'
    client = pooled.client()
    healed = client.create_job(POOL, job_body("ft-heals", flaky, faultTolerance=True))["jobId"]
    job = pooled.wait_status(healed, ("Succeeded", "Failed"), pool=POOL)
    assert job["status"] == "Succeeded" and job["podList"]["pods"][0]["restartCount"] == 1
    assert len(events_of(pooled, POOL, healed, "FaultToleranceRestart")) == 1
    log = (pooled.state_dir / "jobs" / healed / "ft-heals-master-0.log").read_text()
    assert log == "try 1\ntry 2\n"  # the restarted pod's log continues the first one's

    # two replicas: the worker fails each time, the master is stopped and both start again
    body = job_body("ft-gives-up", 'echo run $RANK; if [ "$RANK" = 1 ]; then exit 3; fi; sleep 30', replicas=2,
                    faultTolerance=True, faultToleranceConfig={"faultToleranceLimit": 2})
    failing = client.create_job(POOL, body)["jobId"]
    job = pooled.wait_status(failing, "Failed", pool=POOL, timeout=30)
    assert [p["restartCount"] for p in job["podList"]["pods"]] == [2, 2]
    restarts = events_of(pooled, POOL, failing, "FaultToleranceRestart")
    assert len(restarts) == 2 and "(2 of 2)" in restarts[0]["message"]  # newest first
    master = (pooled.state_dir / "jobs" / failing / "ft-gives-up-master-0.log").read_text()
    assert master.count("run 0\n") == 3
    without = client.create_job(POOL, job_body("ft-off", "exit 3"))["jobId"]
    assert pooled.wait_status(without, "Failed", pool=POOL)["podList"]["pods"][0]["restartCount"] == 0


def test_chain_steps_pass_fault_tolerance_and_friends_straight_through(tmp_path: Path) -> None:
    """Per-step faultTolerance, faultToleranceArgs, tensorboardConfig, alertConfig: validate knows
    them and the dry run sends them, v1 and v2 (with the step's queue as queueID)."""
    from job_chain.cli import cli as job_chain

    extra = {"faultTolerance": True, "faultToleranceArgs": "--enable-replace=true",
             "tensorboardConfig": {"logDir": "/logs"}, "alertConfig": {"alertType": "job"}}
    chain = make_chain(tmp_path, [{"script": "echo hi\n"}], "cce-x")
    data_ = json.loads(chain.read_text())
    data_["jobs"][0].update(extra, queue="q2")
    data_["api_config"] = {"host": "http://127.0.0.1:9", "ak": "a" * 32, "sk": "b" * 32}
    chain.write_text(json.dumps(data_))
    runner = CliRunner()
    assert runner.invoke(job_chain, ["validate", str(chain)]).exit_code == 0
    for version in ("v1", "v2"):
        done = runner.invoke(job_chain, ["run", str(chain), "--dry-run", "--api-version", version])
        assert done.exit_code == 0, done.output
        head, _, rest = done.stdout.partition("\n")
        body = json.loads(rest.partition("\n")[2] if version == "v2" else rest)
        assert {k: body[k] for k in extra} == extra
        if version == "v2":
            assert "queueID=q2" in head
