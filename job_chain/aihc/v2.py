"""The AIHC OpenAPI v2 (action style) in terms of seed 001's v1 shapes, both ways, without HTTP.

Why one module: the client maps the v1 create bodies users write to v2 ``CreateJob`` and maps
v2 answers back (ids, statuses, times, pagination) so a chain runs the same on both; the local
server maps v2 requests onto the same v1 rules and answers in v2 shapes. Both use these
functions, so a body the client sends is exactly one the server takes.

Where Baidu's pages and the SDK (bce-python-sdk-next ``modules/job``) disagree, the pages win
(they describe today's service; docs/api-v2.md lists each case): ``DescribeJobs`` filters by
``keyword`` (the SDK sends ``keywork``), log times are unix seconds, nodes and web terminal are
``DescribeJobNodes``/``DescribeJobWebterminal``. One exception: CreateJob's data sources are sent
as ``dataSources``, the SDK's spelling (the page's table spells ``datasource``); a misread key
would silently drop a job's mounts, and the SDK's is the one code sends today.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Optional, Tuple
from urllib.parse import urlencode

V1, V2 = "v1", "v2"
VERSIONS = (V1, V2)
VERSION_ENV = "AIHC_API_VERSION"
FRAMEWORK = "PyTorchJob"

# v1 call (seed 001 path) → SDK v1 method → v2 action. The docs table is built from this.
ACTIONS: Tuple[Tuple[str, str, str, str], ...] = (
    ("create_job", "POST /api/v1/aijobs", "create_aijob", "CreateJob"),
    ("list_jobs", "GET /api/v1/aijobs", "get_all_aijobs", "DescribeJobs"),
    ("get_job", "GET /api/v1/aijobs/{jobId}", "get_aijob", "DescribeJob"),
    ("delete_job", "DELETE /api/v1/aijobs/{jobId}", "delete_aijob", "DeleteJob"),
    ("update_job", "PUT /api/v1/aijobs/{jobId}", "update_aijob", "ModifyJob"),
    ("stop_job", "POST /api/v1/aijobs/{jobId}/stop", "stop_aijob", "StopJob"),
    ("job_events", "GET /api/v1/aijobs/{jobId}/events", "get_aijob_events", "DescribeJobEvents"),
    ("pod_events", "GET /api/v1/aijobs/{jobId}/pods/{podName}/events", "get_pod_events",
     "DescribeJobPodEvents"),
    ("pod_logs", "GET /api/v1/aijobs/{jobId}/pods/{podName}/logs", "get_pod_logs", "DescribeJobLogs"),
    ("job_nodes", "GET /api/v1/aijobs/{jobId}/nodes", "get_aijob_nodes", "DescribeJobNodes"),
    ("webterminal", "GET /api/v1/aijobs/{jobId}/pods/{podName}/webterminal", "get_webterminal",
     "DescribeJobWebterminal"),
    ("job_metrics", "GET /api/v1/aijobs/{jobId}/metrics", "get_aijob_metrics", "DescribeJobMetrics"),
    ("pools", "GET /api/v1/resourcepools", "get_all_pools", "DescribeResourcePools"),
    ("pool", "GET /api/v1/resourcepools/{id}", "get_pool", "DescribeResourcePool"),
    ("nodes", "GET /api/v1/resourcepools/{id}/nodes", "get_all_nodes", "(none)"),
    ("queues", "GET /api/v1/resourcepools/{id}/queue", "get_all_queues", "DescribeQueues"),
    ("queue", "GET /api/v1/resourcepools/{id}/queue/{name}", "get_queue", "DescribeQueue"),
)

# v1 create-body key → v2 CreateJob key (top level); jobSpec.command moves to the top.
_TOP_RENAMES = {"jobFramework": "jobType", "datasources": "dataSources"}
# v2 spellings of the data sources: the SDK's JobConfig, then the CreateJob page's table
DATASOURCE_SPELLINGS = ("dataSources", "datasource")
V2_TIME = "%Y-%m-%d %H:%M:%S"  # the SDK's DescribeJobLogs startTime/endTime (UTC); the pages: unix
JOB_TYPES = {"PyTorchJob": "pytorch", "TFJob": "tensorflow", "MPIJob": "mpi"}  # DescribeJob's jobType


def version_problem(value: Any) -> Optional[str]:
    if value in VERSIONS:
        return None
    return f"must be \"v1\" or \"v2\", found {value!r}"


def create_to_v2(body: Dict[str, Any]) -> Dict[str, Any]:
    """A seed-001 create body as a v2 ``CreateJob`` body."""
    out = {_TOP_RENAMES.get(k, k): v for k, v in body.items()}
    spec = dict(body.get("jobSpec") or {})
    if "command" in spec:
        out["command"] = spec.pop("command")
    out["jobSpec"] = spec
    out.setdefault("jobType", FRAMEWORK)
    out.setdefault("queue", "default")
    return out


def create_params(pool: str, body: Dict[str, Any], client_token: Optional[str]) -> Dict[str, str]:
    """CreateJob's query: ``resourcePoolId``, ``queueID`` (the job's queue, as the 2026 page asks)
    and ``clientToken``."""
    params = {"action": "CreateJob", "resourcePoolId": pool, "queueID": str(body.get("queue") or "default")}
    if client_token:
        params["clientToken"] = client_token
    return params


def describe_create(host: str, pool: str, body: Dict[str, Any], client_token: Optional[str]) -> str:
    """The CreateJob request a v1 body becomes, as ``run --dry-run`` prints it."""
    import json

    v2_body = create_to_v2(body)
    return (f"POST {host}/?{urlencode(create_params(pool, v2_body, client_token))}\nX-API-Version: v2\n"
            + json.dumps(v2_body, indent=2, ensure_ascii=False))


def create_from_v2(body: Any) -> Any:
    """A v2 ``CreateJob`` body as the seed-001 body the shared rules check (non-dicts as given).

    ``jobType`` → ``jobFramework``; ``dataSources`` (the SDK) or else ``datasource`` (the page)
    → ``datasources``; the top-level ``command`` → ``jobSpec.command``.
    """
    if not isinstance(body, dict):
        return body
    out = {("jobFramework" if k == "jobType" else k): v for k, v in body.items() if k != "command"}
    spelled = next((k for k in DATASOURCE_SPELLINGS if k in body), None)
    if spelled is not None:
        out["datasources"] = out.pop(spelled)
    spec = body.get("jobSpec")
    if isinstance(spec, dict):
        spec = dict(spec)
        if "command" in body:
            spec["command"] = body["command"]
        out["jobSpec"] = spec
    elif "command" in body and spec is None:
        out["jobSpec"] = {"command": body["command"]}
    return out


def job_to_v2(view: Dict[str, Any], user_id: str = "", detail: bool = False) -> Dict[str, Any]:
    """A v1 job (list item or detail) as DescribeJob(s) answers it (Baidu's 2026 DescribeJob
    page: ``userId``, ``queueId``, ``jobType``, ``jobSpec`` with replicas, envs, imageConfig;
    the pods with ``needDetail``). A private image's password is never echoed back."""
    username = str((view.get("imageConfig") or {}).get("username") or "")
    item = {
        "jobId": view.get("jobId"), "userId": user_id, "name": view.get("name"), "status": view.get("status"),
        "createdAt": view.get("createdAt", ""), "finishedAt": view.get("finishedAt", ""),
        "jobType": JOB_TYPES.get(str(view.get("jobFramework") or FRAMEWORK), "pytorch"),
        "resourcePoolId": view.get("resourcePoolId"), "queueId": view.get("queue"), "queue": view.get("queue"),
        "priority": view.get("priority"), "command": view.get("command", ""),
        "labels": view.get("labels") or [], "dataSources": view.get("datasources") or [],
        "enableFaultTolerance": view.get("enableFaultTolerance", False),
        "jobSpec": {"image": view.get("image", ""), "imageConfig": {"username": username, "password": ""},
                    "replicas": view.get("replicas", 1), "resources": view.get("resources") or [],
                    "envs": view.get("envs") or [], "enableRDMA": view.get("enableRDMA", False)},
    }
    if detail and "podList" in view:
        item["podList"] = view["podList"]
    return item


def job_from_v2(item: Dict[str, Any]) -> Dict[str, Any]:
    """A v2 job item as the v1 shape the rest of job-chain reads (``queueId`` is the queue). A
    DescribeJob answer is read in both shapes Baidu's page shows: flat (its example) and ``job:
    JobItem`` (its table), whose fields would otherwise all read as missing (no status: never ended)."""
    nested = item.get("job")
    if isinstance(nested, dict) and "jobId" not in item:
        item = dict({k: v for k, v in item.items() if k != "job"}, **nested)
    raw_spec = item.get("jobSpec")
    spec: Dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    view = {
        "jobId": item.get("jobId"), "name": item.get("name"), "status": item.get("status"),
        "resourcePoolId": item.get("resourcePoolId"), "queue": item.get("queueId") or item.get("queue"),
        "priority": item.get("priority"), "command": item.get("command", ""),
        "createdAt": item.get("createdAt", ""), "finishedAt": item.get("finishedAt", ""),
        "scheduledAt": item.get("scheduledAt", ""), "runningAt": item.get("runningAt", ""),
        "labels": item.get("labels") or [], "datasources": item.get("dataSources") or [],
        "image": spec.get("image", item.get("image", "")), "resources": spec.get("resources") or [],
        "replicas": spec.get("replicas"), "envs": spec.get("envs") or [],
        "enableFaultTolerance": item.get("enableFaultTolerance", False),
        "enableRDMA": spec.get("enableRDMA", False), "userId": item.get("userId", ""),
    }
    if "podList" in item:
        view["podList"] = item["podList"]
    return view


def list_from_v2(answer: Dict[str, Any], page_no: int, page_size: int) -> Dict[str, Any]:
    return {"total": int(answer.get("totalCount") or 0), "pageNo": page_no, "pageSize": page_size,
            "jobs": [job_from_v2(j) for j in answer.get("jobs") or []]}


def log_time_back(text: Any) -> Optional[int]:
    """DescribeJobLogs' ``startTime``/``endTime`` as unix seconds (None if unset): unix seconds as
    the 2026 page has them, or ``yyyy-MM-dd HH:mm:ss`` (UTC) as the SDK's docstring does.

    Raises ValueError for anything else.
    """
    if text is None or text == "":
        return None
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return int(text)
    if isinstance(text, str):
        if text.strip().isdigit():
            return int(text.strip())
        import calendar  # here: every hop imports this module, few parse a v2 time

        return calendar.timegm(time.strptime(text, V2_TIME))
    raise ValueError(text)


def webterminal_from_v2(answer: Dict[str, Any]) -> Dict[str, Any]:
    return {"WebTerminalUrl": answer.get("webTerminalUrl") or answer.get("WebTerminalUrl", "")}


def nodes_from_v2(answer: Dict[str, Any]) -> Dict[str, Any]:
    """DescribeJobNodes' ``{jobId, nodes}`` (or the SDK-era ``nodeNames``) as v1's ``{jobID, nodeName}``."""
    return {"jobID": answer.get("jobId"), "nodeName": list(answer.get("nodes") or answer.get("nodeNames") or [])}
