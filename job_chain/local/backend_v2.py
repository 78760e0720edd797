"""The AIHC OpenAPI v2 actions over the same :class:`Backend` as v1, without any HTTP.

Each action takes the query parameters and the JSON body as parsed and returns the fields of
its flat v2 answer (``requestId`` is added by the route). Shapes are mapped by
:mod:`job_chain.aihc.v2` (jobs) and :mod:`job_chain.local.shapes` (pools, queues), so the state,
rules and errors are v1's: a job created through one API version is the same job through the
other. :data:`JOB_ACTIONS` and :data:`POOL_ACTIONS` are the actions there are; how each group is
sent (method, version header) is HTTP, checked by :mod:`routes_v2`.
"""

from __future__ import annotations

import getpass
import os
from typing import Any, Callable, Dict, Mapping, Optional

from job_chain.aihc import v2
from job_chain.aihc.spec import surrogate_problems
from job_chain.local import shapes
from job_chain.local.backend import Backend
from job_chain.local.errors import INAPPROPRIATE, BadRequest, LocalAPIError, NotFound, NotSupported

Query = Mapping[str, str]

JOB_ACTIONS = (
    "CreateJob", "DescribeJobs", "DescribeJob", "DeleteJob", "ModifyJob", "StopJob", "DescribeJobEvents",
    "DescribePodEvents", "DescribeJobLogs", "DescribeJobNodes", "DescribeJobWebterminal",  # the 2026 pages' names
    "DescribeJobMetrics",
    "DescribeJobPodEvents", "DescribeJobNodeNames", "GetJobWebTerminalUrl",  # the SDK's names for the same
)
POOL_ACTIONS = ("DescribeResourcePools", "DescribeResourcePool", "DescribeQueues", "DescribeQueue")
ACTIONS = JOB_ACTIONS + POOL_ACTIONS
# The v2 SDK's other modules: the local server runs training jobs only.
UNSUPPORTED_WORDS = ("Dataset", "Model", "Service", "DevInstance")


class UnknownAction(LocalAPIError):
    status = 400
    code = "InvalidAction"


def unknown_action(action: str) -> LocalAPIError:
    """The error for an action that is not one of :data:`ACTIONS`: 501 for the v2 SDK's modules
    the local server does not emulate, else 400 ``InvalidAction`` naming the known ones."""
    if any(word in action for word in UNSUPPORTED_WORDS):
        return NotSupported(f"action {action} is not supported by the local server "
                            "(it runs training jobs, resource pools and queues only)")
    return UnknownAction(f"unknown action {action!r}; the local server knows {', '.join(ACTIONS)}")


def _user_id() -> str:
    """The local server's one user: the account its jobs run as (AIHC answers the account's id)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _text(value: Any) -> Optional[str]:
    """A body field as the string the v1 parsers take (numbers allowed, booleans not)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise BadRequest(f"expected a string or number, got {type(value).__name__}", code=INAPPROPRIATE)
    return str(value)


class BackendV2:
    """One method per v2 action; ``call`` dispatches by name."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.pools = backend.pools
        self.user_id = _user_id()

    def call(self, action: str, query: Query, body: Any) -> Dict[str, Any]:
        """Run ``action`` with the query parameters and the parsed JSON body (None: no body)."""
        if action not in ACTIONS:
            raise unknown_action(action)
        handler: Callable[[Query, Any], Dict[str, Any]] = getattr(self, action)
        fields = self._body(body)
        if action != "CreateJob":  # a create's body is checked by the create rules, naming each field as they do
            problems = surrogate_problems(fields)
            if problems:  # nothing could look such a string up, log or store it
                raise BadRequest("; ".join(f"{path}: {problem}" for path, problem in problems), code=INAPPROPRIATE)
        return handler(query, fields)

    # -- helpers ---------------------------------------------------------------------------
    @staticmethod
    def _pool(query: Query) -> str:
        pool = query.get("resourcePoolId")
        if not pool:
            raise BadRequest("resourcePoolId is required (query parameter)")
        return pool

    @staticmethod
    def _body(body: Any) -> Dict[str, Any]:
        if body is None:
            return {}
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object", code=INAPPROPRIATE)
        return body

    @staticmethod
    def _field(body: Dict[str, Any], name: str) -> Optional[str]:
        try:
            return _text(body.get(name))
        except BadRequest as exc:
            raise BadRequest(f"{name}: {exc.message}", code=INAPPROPRIATE) from None

    @staticmethod
    def _required(body: Dict[str, Any], name: str) -> str:
        value = body.get(name)
        if not isinstance(value, str) or not value:
            raise BadRequest(f"{name} is required (body parameter, a non-empty string)", code=INAPPROPRIATE)
        return value

    def _job(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:
        """The stored row of the job ``jobId`` names, checked against ``queueID`` when given (the
        2026 pages take it); read once, then handed on."""
        pool, job_id = self._pool(query), self._required(body, "jobId")
        job = self.backend.find_job(pool, job_id)
        queue = query.get("queueID")
        if queue and queue != job["queue"]:
            self.pools.find_queue(pool, queue)  # an unknown queue is named as such
            raise NotFound(f"job {job_id} is not in queue {queue} of resource pool {pool} (its queue is "
                           f"{job['queue']}); queueID is the job's queue")
        return job

    def _pod_or_first(self, job: Dict[str, Any], body: Dict[str, Any]) -> str:
        """``podName`` if given, else the job's first pod (the SDK's GetJobWebTerminalUrl sends none)."""
        if body.get("podName") is not None:
            return self._required(body, "podName")
        pods = self.backend.store.pods(job["id"])
        if not pods:
            raise BadRequest(f"job {job['id']} has no pods; pass podName", code=INAPPROPRIATE)
        return str(pods[0]["name"])

    def _v2_job(self, job: Dict[str, Any], detail: bool) -> Dict[str, Any]:
        """A job row as DescribeJob answers it (its pods are read only for ``detail``)."""
        view = self.backend.job_detail(job) if detail else self.backend.job_view(job)
        view["imageConfig"] = (job["spec"].get("jobSpec") or {}).get("imageConfig")
        return v2.job_to_v2(view, self.user_id, detail=detail)

    # -- jobs ------------------------------------------------------------------------------
    def CreateJob(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802 (action names)
        """CreateJob: ``queue`` is required (the 2026 page) and must match ``queueID`` when given."""
        fields = dict(body)
        token = query.get("clientToken") or _text(fields.pop("clientToken", None))
        pool = self._pool(query)
        if fields.get("queue") is None:
            raise BadRequest("queue: required (the job's queue, e.g. \"default\"; Baidu's CreateJob page)",
                             code=INAPPROPRIATE)
        if fields.get("jobType") in ("TFJob", "MPIJob"):  # the page's other types: AIHC runs them, we cannot
            raise NotSupported(f"jobType {fields['jobType']} is not supported by the local server (it runs "
                               "PyTorchJob only)")
        queue = query.get("queueID")
        if queue and isinstance(fields["queue"], str) and queue != fields["queue"]:
            self.pools.find_queue(pool, queue)
            raise BadRequest(f"queue: must be the queueID of the query ({queue}), found {fields['queue']!r}",
                             code=INAPPROPRIATE)
        return self.backend.create_job(pool, v2.create_from_v2(fields), token or None, api="v2")

    def DescribeJobs(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        keyword = body.get("keyword", body.get("keywork"))  # the docs say keyword, the SDK keywork
        keyword_type = body.get("keywordType") or "name"
        if keyword_type not in ("name", "queueName"):
            raise BadRequest(f"keywordType must be name or queueName, got {keyword_type!r}", code=INAPPROPRIATE)
        queue = self._field(body, "queue") or query.get("queueID")
        name = None
        if keyword:
            if keyword_type == "queueName":
                queue = _text(keyword)
            else:
                name = _text(keyword)
        style = f"v2 {self.user_id}"  # what a kept item depends on besides its row
        result = self.backend.list_items(
            style, self._list_item, self._pool(query), queue, self._field(body, "orderBy"),
            self._field(body, "order"), self._field(body, "pageNumber"), self._field(body, "pageSize"),
            self._field(body, "status"), name)
        return {"totalCount": result["total"], "jobs": result["jobs"]}

    def _list_item(self, job: Dict[str, Any]) -> Dict[str, Any]:
        """A job as DescribeJobs lists it: its list view in v2's shape (a list reads no imageConfig)."""
        return v2.job_to_v2(self.backend.job_view(job), self.user_id)

    def DescribeJob(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        """The job; its pods only with ``needDetail`` true (the 2026 page)."""
        return self._v2_job(self._job(query, body), detail=body.get("needDetail") is True)

    def DeleteJob(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        job = self._job(query, body)
        return self.backend.delete_job(job["pool"], job["id"])

    def StopJob(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        job = self._job(query, body)
        return self.backend.stop_job(job["pool"], job["id"])

    def ModifyJob(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        job = self._job(query, body)
        return self.backend.update_job(job["pool"], job["id"], {"priority": body.get("priority")})

    def DescribeJobEvents(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        job = self._job(query, body)
        return self.backend.events(job["pool"], job["id"], None, v2.FRAMEWORK,
                                   self._field(body, "startTime"), self._field(body, "endTime"))

    def DescribePodEvents(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        """A pod's events: the 2026 page's name; the SDK sends ``DescribeJobPodEvents``."""
        job = self._job(query, body)
        return self.backend.events(job["pool"], job["id"], self._required(body, "podName"),
                                   v2.FRAMEWORK, self._field(body, "startTime"), self._field(body, "endTime"))

    DescribeJobPodEvents = DescribePodEvents  # noqa: N815

    def DescribeJobLogs(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        """The 2026 page's parameters (podName required; unix startTime/endTime, or the SDK's
        ``yyyy-MM-dd HH:mm:ss``; maxLines, keywords, chunkSize = lines per record, default 1;
        marker → nextMarker). ``logType`` (SDK) is accepted: a local pod has one log, stdout and
        stderr together."""
        job = self._job(query, body)
        times = []
        for name in ("startTime", "endTime"):
            try:
                value = v2.log_time_back(body.get(name))
            except (ValueError, OverflowError):
                raise BadRequest(f"{name} must be unix seconds (or like 2025-05-13 02:22:40, UTC)",
                                 code=INAPPROPRIATE) from None
            times.append(None if value is None else str(value))
        keywords = body.get("keywords")
        if keywords is not None and not isinstance(keywords, str):
            raise BadRequest("keywords must be a string", code=INAPPROPRIATE)
        return self.backend.logs(job["pool"], job["id"], self._required(body, "podName"), times[0],
                                 self._field(body, "maxLines"), self._field(body, "chunkSize"), end=times[1],
                                 keywords=keywords or None, marker=self._field(body, "marker") or None,
                                 default_chunk=1)

    def DescribeJobMetrics(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        """The page's (4mayvot8u) body: ``jobId``, ``metricType`` (required), ``startTime``/``endTime``
        (ISO 8601 as the pages write times, or unix seconds) and ``timeStep`` (``5m``, ``30s``,
        ``1h``; default 5 minutes). The answer is v1's result, flat: ``jobId``, ``podMetrics`` [{``podName``,
        ``metrics`` [{``time``, ``value``}]}]; a device this machine lacks (GPU, RDMA, …) answers
        each pod's series empty, with a ``message`` saying so."""
        job = self._job(query, body)
        return self.backend.metrics(job["pool"], job["id"], self._required(body, "metricType"),
                                    self._field(body, "startTime"), self._field(body, "endTime"),
                                    self._field(body, "timeStep"), code=INAPPROPRIATE)

    def DescribeJobNodes(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        """``{jobId, nodes}`` (the 2026 page, 2mayvq994)."""
        job = self._job(query, body)
        return {"jobId": job["id"], "nodes": self.backend.nodes(job["pool"], job["id"])["nodeName"]}

    def DescribeJobNodeNames(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        """The SDK's name: ``{jobId, nodeNames}``."""
        answer = self.DescribeJobNodes(query, body)
        return {"jobId": answer["jobId"], "nodeNames": answer["nodes"]}

    def DescribeJobWebterminal(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        """``podName`` required (the 2026 page, 9mayvri1t)."""
        self._required(body, "podName")
        return self.GetJobWebTerminalUrl(query, body)

    def GetJobWebTerminalUrl(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        job = self._job(query, body)
        pod = self._pod_or_first(job, body)
        answer = self.backend.webterminal(job["pool"], job["id"], pod,
                                          self._field(body, "handshakeTimeoutSecond"),
                                          self._field(body, "pingTimeoutSecond"))
        return {"jobId": job["id"], "podName": pod, "webTerminalUrl": answer["WebTerminalUrl"]}

    # -- pools and queues ------------------------------------------------------------------
    def DescribeResourcePools(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        """``resourcePoolType`` required and filtering (only ``common`` pools exist locally);
        ``keywordType``/``keyword``, ``orderBy``/``order`` and pages as the page gives them."""
        kind = query.get("resourcePoolType")
        if kind not in shapes.POOL_TYPES:
            raise BadRequest(f"resourcePoolType must be one of {', '.join(shapes.POOL_TYPES)} (query "
                             f"parameter), got {kind!r}")
        keyword_type = query.get("keywordType") or "resourcePoolName"
        keyword = query.get("keyword") or ""
        order_by = query.get("orderBy") or "resourcePoolName"
        order = (query.get("order") or "ASC").upper()
        for name, value, allowed in (("keywordType", keyword_type, ("resourcePoolName", "resourcePoolId")),
                                     ("orderBy", order_by, ("resourcePoolName", "resourcePoolId", "createdAt")),
                                     ("order", order, ("ASC", "DESC"))):
            if value not in allowed:
                raise BadRequest(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        pools = [p for p in self.backend.store.pools() if kind == shapes.POOL_TYPE and keyword in p["id"]]
        pools.sort(key=lambda p: p["created_at"] if order_by == "createdAt" else p["id"], reverse=order == "DESC")
        page, number, size = self.pools.page(pools, query.get("pageNumber"), query.get("pageSize"), 10,
                                             name="pageNumber")
        return {"keywordType": keyword_type, "keyword": keyword, "orderBy": order_by, "order": order,
                "pageNumber": number, "pageSize": size, "totalCount": len(pools),
                "resourcePools": [shapes.pool_v2(p) for p in page]}

    def DescribeResourcePool(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        return shapes.pool_v2(self.pools.configured_pool(self._pool(query)))

    def DescribeQueues(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        """The pool's queues (the Go SDK sends ``PageNumber``/``PageSize``, the Python SDK lower-case)."""
        pool = self._pool(query)
        self.pools.configured_pool(pool)
        keyword = query.get("keyword") or ""
        queues = [q for q in self.backend.store.queues(pool) if keyword in q["name"]]
        page, number, size = self.pools.page(queues, query.get("pageNumber") or query.get("PageNumber"),
                                             query.get("pageSize") or query.get("PageSize"), 10,
                                             name="pageNumber")
        return {"pageSize": size, "pageNumber": number, "keyword": keyword,
                "keywordType": query.get("keywordType") or "queueName", "totalCount": len(queues),
                "queues": self.pools.queues_answer(pool, page, shapes.queue_v2)}

    def DescribeQueue(self, query: Query, body: Dict[str, Any]) -> Dict[str, Any]:  # noqa: N802
        """One queue by its id (``queue-…``, from DescribeQueues); an unknown id is 404 NoSuchQueue."""
        queue = query.get("queueId")
        if not queue:
            raise BadRequest("queueId is required (query parameter, e.g. queue-h4rzqodsqgfv from DescribeQueues)")
        found = self.pools.queue_by_id(queue)
        return self.pools.queues_answer(found["pool"], [found], shapes.queue_v2)[0]
