"""The official SDK audit (issue 21): every method of bce-python-sdk-next's ``AIHCClient`` (v1) and
``AihcClient`` (v2), called unchanged against the local server.

Each method the SDK can send answers 200. Each that is broken inside the SDK itself is listed in
:data:`SDK_BUGS` with the bug, and must fail that way (not because of the server). The v2 modules
the local server does not emulate (datasets, models, services, dev machines) answer 501
NotImplemented, as docs/local-server.md says. A method the SDK adds later fails this test until
it is audited here.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
from conftest import LocalServer, job_body

POOL = "cce-audit"

SDK_BUGS = {  # method → how the SDK itself breaks (the request never reaches the server, or cannot be right)
    "v1.update_aijob": "builds its path as str; the SDK's send_request then does path + b'?' (TypeError)",
    "v1.delete_queue": "builds its path as str; the SDK's send_request then does path + b'?' (TypeError)",
    "v1.update_queue": "builds its path as str; the SDK's send_request then does path + b'?' (TypeError)",
    "v1.get_aijob_metrics": "cannot send metricType, which the API requires: 400 InvalidParameter",
}
NO_REQUEST = {  # methods that call no API at all
    "v1.generate_aiak_parameter": "writes an AIAK chain file (with the AK/SK in its jobs' envs); no request",
}
NOT_EMULATED = ("Dataset", "Model", "Service", "DevInstance")  # v2 modules: 501 NotImplemented locally


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[LocalServer, Path]]:
    home = tmp_path_factory.mktemp("sdk-audit")
    server = LocalServer(home / "state", extra_args=["--pool", f"{POOL}:8", "--queue", f"{POOL}/default:8"])
    server.start()
    yield server, home
    server.cleanup()


def v1_methods() -> List[str]:
    from baidubce.services.aihc.aihc_client import AIHCClient

    return sorted(f"v1.{n}" for n, _ in inspect.getmembers(AIHCClient, inspect.isfunction) if not n.startswith("_")
                  and n not in ("__init__",) and n in AIHCClient.__dict__)


def v2_methods(client: Any) -> List[str]:
    return sorted(f"v2.{n}" for n, v in vars(client).items() if n[:1].isupper() and callable(v))


def calls(server: LocalServer, home: Path) -> Dict[str, Callable[[], Any]]:
    """One call per method, with the arguments a user would pass; order matters (create first)."""
    v1, v2 = server.sdk(), server.sdk_v2()
    ids: Dict[str, str] = {}

    def created(name: str) -> str:
        if name not in ids:
            ids[name] = server.client().create_job(POOL, job_body(name, "echo audit; sleep 20"))["jobId"]
            server.wait_status(ids[name], "Running", pool=POOL)
        return ids[name]

    chain = home / "chain.json"
    chain.write_text(json.dumps({"resourcePoolId": POOL, "jobs": [
        {"name": "sdk-chain", "queue": "default", "jobSpec": {"command": "true", "image": "local", "replicas": 1}}]}))
    queue_ids: List[str] = []

    def queue_id() -> str:
        if not queue_ids:
            queue_ids.append(json.loads(v2.DescribeQueues(POOL).raw_data)["queues"][0]["queueId"])
        return queue_ids[0]

    v2_body = {"name": "v2-audit", "queue": "default", "command": "sleep 20",
               "jobSpec": {"image": "local", "replicas": 1}}
    return {
        "v1.get_all_pools": lambda: v1.get_all_pools(),
        "v1.get_pool": lambda: v1.get_pool(POOL),
        "v1.get_all_nodes": lambda: v1.get_all_nodes(POOL),
        "v1.get_all_queues": lambda: v1.get_all_queues(POOL),
        "v1.get_queue": lambda: v1.get_queue(POOL, "default"),
        "v1.delete_queue": lambda: v1.delete_queue(POOL, "default"),
        "v1.update_queue": lambda: v1.update_queue(POOL, "default", {"description": "x"}),
        "v1.create_aijob": lambda: v1.create_aijob("audit-token", POOL, job_body("v1-audit", "true")),
        "v1.get_all_aijobs": lambda: v1.get_all_aijobs(POOL),
        "v1.get_aijob": lambda: v1.get_aijob(POOL, created("a1")),
        "v1.update_aijob": lambda: v1.update_aijob(POOL, created("a1"), "high"),
        "v1.get_aijob_events": lambda: v1.get_aijob_events(POOL, created("a1"), "PyTorchJob"),
        "v1.get_aijob_logs": lambda: v1.get_aijob_logs(POOL, created("a1"), "a1-master-0"),
        "v1.get_aijob_pod_events": lambda: v1.get_aijob_pod_events(POOL, created("a1"), "a1-master-0", "PyTorchJob"),
        "v1.get_aijob_metrics": lambda: v1.get_aijob_metrics(POOL, created("a1")),
        "v1.get_aijob_nodes": lambda: v1.get_aijob_nodes(POOL, created("a1")),
        "v1.get_webterminal": lambda: v1.get_webterminal(POOL, created("a1"), "a1-master-0"),
        "v1.stop_aijob": lambda: v1.stop_aijob(POOL, created("a1")),
        "v1.delete_aijob": lambda: v1.delete_aijob(POOL, created("a1")),
        "v1.create_job_chain": lambda: v1.create_job_chain(str(chain), 0),  # the last job: no pip install added
        "v2.DescribeResourcePools": lambda: v2.DescribeResourcePools(),
        "v2.DescribeResourcePool": lambda: v2.DescribeResourcePool(POOL),
        "v2.DescribeQueues": lambda: v2.DescribeQueues(POOL),
        "v2.DescribeQueue": lambda: v2.DescribeQueue(queue_id()),
        "v2.CreateJob": lambda: v2.CreateJob(POOL, v2_body),
        "v2.DescribeJobs": lambda: v2.DescribeJobs(POOL),
        "v2.DescribeJob": lambda: v2.DescribeJob(POOL, created("b2"), needDetail=True),
        "v2.ModifyJob": lambda: v2.ModifyJob(POOL, created("b2"), "low"),
        "v2.DescribeJobEvents": lambda: v2.DescribeJobEvents(POOL, created("b2")),
        "v2.DescribeJobPodEvents": lambda: v2.DescribeJobPodEvents(POOL, created("b2"), "b2-master-0"),
        "v2.DescribeJobLogs": lambda: v2.DescribeJobLogs(POOL, created("b2"), podName="b2-master-0"),
        "v2.DescribeJobNodeNames": lambda: v2.DescribeJobNodeNames(POOL, created("b2")),
        "v2.GetJobWebTerminalUrl": lambda: v2.GetJobWebTerminalUrl(POOL, created("b2")),
        "v2.StopJob": lambda: v2.StopJob(POOL, created("b2")),
        "v2.DeleteJob": lambda: v2.DeleteJob(POOL, created("b2")),
    }


def not_emulated_call(v2: Any, name: str) -> Callable[[], Any]:
    """A dataset/model/service/dev-machine call with placeholder arguments for its required ones."""
    method = getattr(v2, name)
    target = getattr(method, "__wrapped__", method)
    required = [p for p in inspect.signature(target).parameters.values()
                if p.default is inspect.Parameter.empty and p.name != "self"
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return lambda: method(*["audit-id"] * len(required))


def outcome(call: Callable[[], Any]) -> Tuple[Any, str]:
    """(HTTP status or the exception type, a short text): what the call came to."""
    from baidubce.exception import BceHttpClientError, BceServerError

    try:
        call()
    except BceServerError as exc:
        return exc.status_code, exc.code or ""
    except BceHttpClientError as exc:
        last = exc.last_error
        if isinstance(last, BceServerError):
            return last.status_code, last.code or ""
        return type(last).__name__, str(last)[:80]
    except TypeError as exc:  # raised by the SDK's own signer or HTTP layer, before any request
        return "TypeError", str(exc)[:80]
    return 200, ""


def test_every_official_sdk_method_against_the_local_server(audited: Tuple[LocalServer, Path]) -> None:
    server, home = audited
    v2 = server.sdk_v2()
    planned = calls(server, home)
    every = v1_methods() + v2_methods(v2)
    missing = [m for m in every if m not in planned and m not in NO_REQUEST
               and not any(word in m for word in NOT_EMULATED)]
    assert missing == [], f"methods of the SDK this audit does not cover yet: {missing}"
    results = {name: outcome(call) for name, call in planned.items()}
    for name in every:
        if any(word in name for word in NOT_EMULATED) and name.startswith("v2."):
            results[name] = outcome(not_emulated_call(v2, name[3:]))
    for name, (status, detail) in sorted(results.items()):
        if name in SDK_BUGS:
            expected = (400, "InvalidParameter") if "metricType" in SDK_BUGS[name] else "TypeError"
            assert ((status, detail) == expected if isinstance(expected, tuple) else status == expected), \
                (name, status, detail)
        elif any(word in name for word in NOT_EMULATED):
            assert (status, detail) == (501, "NotImplemented"), (name, status, detail)
        else:
            assert (status, detail) == (200, ""), (name, status, detail)
    assert len(results) == len(every) - len(NO_REQUEST)
    # what the calls did is there: the chain's job, the v1 and v2 creates
    names = {j["name"] for j in server.client().iter_jobs(POOL)}
    assert {"sdk-chain", "v1-audit", "v2-audit"} <= names
