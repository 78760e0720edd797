"""The same client calls over AIHC's action-style OpenAPI v2 (``POST /?action=Name``).

Every method keeps :class:`~job_chain.aihc.client.AIHCClient`'s signature and v1 answer shape
(the shapes are mapped by :mod:`job_chain.aihc.v2`), so the run library, the advancing tail and
the CLI work unchanged on either version; it satisfies :class:`~job_chain.aihc.api.JobsAPI`.
Signing and retries are the v1 client's (the BCE signer signs ``/`` and the ``action``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from job_chain.aihc import v2
from job_chain.aihc.client import FRAMEWORK, AIHCClient
from job_chain.aihc.errors import AUTH_CODES, AIHCError
from job_chain.aihc.timefmt import iso_utc, step_text

JOB_HEADERS = {b"X-API-Version": b"v2"}  # the job pages' header (and the SDK's job client)
POOL_HEADERS = {b"version": b"v2"}  # the pool and queue pages' header (and both SDKs')
# a pod's events: DescribePodEvents on the 2026 pages, DescribeJobPodEvents in the SDK (issue 30 item 4)
POD_EVENTS = ("DescribePodEvents", "DescribeJobPodEvents")


def unknown_action(exc: AIHCError) -> bool:
    """Whether an answer says the service does not know the action (the other name may work): 400
    ``InvalidAction`` (the local server's), or a 404 that names no missing job, pod or queue (a service
    that routes no such action). A 400 about the request (a parameter, the JSON, the keys) is its own."""
    if exc.code in AUTH_CODES:
        return False
    if exc.code == "InvalidAction":
        return True
    return exc.status == 404 and not (exc.code or "").startswith("NoSuch")


class AIHCClientV2(AIHCClient):
    """Signed calls to the AIHC OpenAPI v2; answers in seed 001's v1 shapes."""

    api_version = "v2"
    _filters_on_server = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._queues: Dict[str, str] = {}  # job id → its queue: a job's queue never changes
        self._pod_events = list(POD_EVENTS)  # the name this client's service answered first (either_action)

    def action(self, name: str, pool: Optional[str] = None, body: Optional[Dict[str, Any]] = None,
               *, params: Optional[Dict[str, Any]] = None, retry: bool = True,
               method: str = "POST", big: bool = False) -> Dict[str, Any]:
        """One v2 action; the flat answer (``requestId`` and the action's fields). Job actions are
        POST with ``X-API-Version: v2``, pool and queue actions GET with ``version: v2``. ``big``: as
        :meth:`AIHCClient.request`'s."""
        query: Dict[str, Any] = {"action": name, "resourcePoolId": pool, **(params or {})}
        clean = {k: v for k, v in (body or {}).items() if v is not None}
        return self.request(method, "/", params=query, body=clean if method == "POST" else None,
                            retry=retry, headers=JOB_HEADERS if method == "POST" else POOL_HEADERS, big=big)

    def _remember(self, job: Dict[str, Any]) -> Dict[str, Any]:
        if job.get("jobId") and job.get("queue"):
            self._queues[str(job["jobId"])] = str(job["queue"])
        return job

    def _queue_of(self, pool: str, job_id: str) -> Dict[str, Any]:
        """``{"queueID": …}`` for the 2026 pages that take the job's queue (asked once if unknown)."""
        if job_id not in self._queues:
            self.get_job(pool, job_id)
        return {"queueID": self._queues.get(job_id)}

    # -- jobs ------------------------------------------------------------------------------
    def create_job(self, pool: str, body: Dict[str, Any], client_token: Optional[str] = None) -> Dict[str, Any]:
        """CreateJob with the v1 body mapped; retried only with a client token."""
        mapped = v2.create_to_v2(body)
        params = v2.create_params(pool, mapped, client_token)
        answer = self.action("CreateJob", pool, mapped, params=params, retry=client_token is not None)
        self._remember({"jobId": answer.get("jobId"), "queue": mapped["queue"]})
        return {"jobId": answer.get("jobId"), "jobName": answer.get("jobName")}

    def list_jobs(self, pool: str, *, queue: Optional[str] = None, order_by: Optional[str] = None,
                  order: Optional[str] = None, page_no: Optional[int] = None,
                  page_size: Optional[int] = None, status: Optional[str] = None,
                  name: Optional[str] = None) -> Dict[str, Any]:
        """DescribeJobs (status and name filtered by the server) → the v1 list shape."""
        answer = self.action("DescribeJobs", pool, {
            "queue": None if queue in (None, "", "all") else queue, "orderBy": order_by, "order": order,
            "pageNumber": page_no, "pageSize": page_size, "status": status or None,
            "keywordType": "name" if name else None, "keyword": name or None,
        }, big=True)
        listed = v2.list_from_v2(answer, page_no or 1, page_size or 10)
        for job in listed["jobs"]:
            self._remember(job)
        return listed

    def get_job(self, pool: str, job_id: str) -> Dict[str, Any]:
        """DescribeJob with its pods (``needDetail``), sending the job's ``queueID`` when known."""
        return self._remember(v2.job_from_v2(self.action("DescribeJob", pool, {"jobId": job_id, "needDetail": True},
                                                         params={"queueID": self._queues.get(job_id)})))

    def delete_job(self, pool: str, job_id: str) -> Dict[str, Any]:
        return self.action("DeleteJob", pool, {"jobId": job_id})

    def update_job(self, pool: str, job_id: str, priority: str) -> Dict[str, Any]:
        return self.action("ModifyJob", pool, {"jobId": job_id, "priority": priority})

    def stop_job(self, pool: str, job_id: str) -> Dict[str, Any]:
        return self.action("StopJob", pool, {"jobId": job_id})

    def job_events(self, pool: str, job_id: str, *, framework: str = FRAMEWORK,
                   start_time: Optional[str] = None, end_time: Optional[str] = None) -> Dict[str, Any]:
        answer = self.action("DescribeJobEvents", pool, {"jobId": job_id, "startTime": start_time,
                                                         "endTime": end_time})
        return {"events": answer.get("events") or [], "total": answer.get("total", 0)}

    def pod_events(self, pool: str, job_id: str, pod: str, *, framework: str = FRAMEWORK,
                   start_time: Optional[str] = None, end_time: Optional[str] = None) -> Dict[str, Any]:
        body = {"jobId": job_id, "podName": pod, "startTime": start_time, "endTime": end_time}
        answer = self.either_action(self._pod_events, pool, body)
        return {"events": answer.get("events") or [], "total": answer.get("total", 0)}

    def either_action(self, names: List[str], pool: str, body: Dict[str, Any]) -> Dict[str, Any]:
        """One action known by two names (the 2026 pages' first, then the SDK's): the first name
        the service answers is kept for this client's next call (``names``, the client's own list, is
        reordered in place)."""
        try:
            return self.action(names[0], pool, body)
        except AIHCError as exc:
            if not unknown_action(exc):
                raise
        answer = self.action(names[1], pool, body)
        names.reverse()  # this service knows the other name
        return answer

    def pod_logs(self, pool: str, job_id: str, pod: str, *, start_time: Optional[int] = None,
                 max_lines: Optional[int] = None, chunk: Optional[int] = None, end_time: Optional[int] = None,
                 keywords: Optional[str] = None, marker: Optional[str] = None) -> Dict[str, Any]:
        """DescribeJobLogs as the 2026 page has it: unix ``startTime``/``endTime``, ``maxLines``,
        ``keywords``, ``chunkSize`` (lines per record; 0 is sent as "all in one" is v1's), ``marker``."""
        answer = self.action("DescribeJobLogs", pool, {
            "jobId": job_id, "podName": pod, "startTime": None if start_time is None else str(start_time),
            "endTime": None if end_time is None else str(end_time),
            "maxLines": None if max_lines is None else str(max_lines),
            "chunkSize": None if chunk is None else str(chunk), "keywords": keywords, "marker": marker,
        }, params=self._queue_of(pool, job_id))
        return {"jobId": job_id, "podName": pod, "logs": answer.get("logs") or [],
                "nextMarker": answer.get("nextMarker") or ""}

    def job_metrics(self, pool: str, job_id: str, metric_type: str, *, start_time: Optional[int] = None,
                    end_time: Optional[int] = None, time_step: Optional[int] = None) -> Dict[str, Any]:
        """DescribeJobMetrics (the page 4mayvot8u): times sent as ISO 8601 and the step as ``5m``,
        as the pages write them → v1's ``{"jobId", "podMetrics"}`` (and a ``message`` if any)."""
        answer = self.action("DescribeJobMetrics", pool, {
            "jobId": job_id, "metricType": metric_type,
            "startTime": None if start_time is None else iso_utc(start_time),
            "endTime": None if end_time is None else iso_utc(end_time),
            "timeStep": None if time_step is None else step_text(time_step)})
        result = {"jobId": answer.get("jobId") or job_id, "podMetrics": answer.get("podMetrics") or []}
        if answer.get("message"):
            result["message"] = answer["message"]
        return result

    def job_nodes(self, pool: str, job_id: str) -> Dict[str, Any]:
        return v2.nodes_from_v2(self.action("DescribeJobNodes", pool, {"jobId": job_id},
                                            params=self._queue_of(pool, job_id)))

    def webterminal(self, pool: str, job_id: str, pod: str, *, handshake_timeout: Optional[int] = None,
                    ping_timeout: Optional[int] = None) -> Dict[str, Any]:
        return v2.webterminal_from_v2(self.action("DescribeJobWebterminal", pool, {
            "jobId": job_id, "podName": pod, "handshakeTimeoutSecond": handshake_timeout,
            "pingTimeoutSecond": ping_timeout}, params=self._queue_of(pool, job_id)))

    # -- pools and queues ------------------------------------------------------------------
    def list_pools(self) -> List[Dict[str, Any]]:
        """DescribeResourcePools of the self-operated (``common``) pools, every page."""
        pools: List[Dict[str, Any]] = []
        page = 1
        while True:
            answer = self.action("DescribeResourcePools", None, method="GET",
                                 params={"resourcePoolType": "common", "pageNumber": page, "pageSize": 100})
            found = list(answer.get("resourcePools") or [])
            pools += found
            if len(found) < 100 or len(pools) >= int(answer.get("totalCount") or 0):
                return pools
            page += 1

    def list_queues(self, pool: str) -> List[Dict[str, Any]]:
        return list(self.action("DescribeQueues", pool, method="GET",
                                params={"pageNumber": 1, "pageSize": 1000}).get("queues") or [])
