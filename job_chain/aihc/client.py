"""One client object for the 11 AIHC training-job endpoints (seed 001).

Signing and HTTP are the BCE SDK's own (``bce_v1_signer.sign`` and
``bce_http_client.send_request``); this module only chooses paths, parameters and retry rules,
and turns every failure into :class:`AIHCError`.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import json
import socket
from typing import Any, Dict, Iterator, List, Optional
from urllib.parse import urlsplit

from job_chain.aihc.credentials import Credentials
from job_chain.aihc.endpoint import is_loopback, normalize_endpoint
from job_chain.aihc.errors import AUTH_CODES, HOST_NOT_FOUND, AIHCError
from job_chain.errors import UsageError

API = "/api/v1/aijobs"
FRAMEWORK = "PyTorchJob"


def _causes(error: Optional[BaseException]) -> Iterator[BaseException]:
    """The error and what it wraps (the SDK's ``last_error``, ``__cause__``, ``__context__``)."""
    seen = 0
    while error is not None and seen < 10:
        yield error
        seen += 1
        error = getattr(error, "last_error", None) or error.__cause__ or error.__context__


def _name_not_resolved(error: BaseException) -> Optional[BaseException]:
    """The DNS failure behind ``error``, if any: a mistyped host, never worth retrying."""
    return next((e for e in _causes(error) if isinstance(e, socket.gaierror)), None)


def _segment(value: str, what: str) -> str:
    """One path segment percent-encoded as the BCE SDK canonicalises it.

    The signer signs the path as given and the server checks it as sent, so an id holding
    ``?``, ``#``, ``%``, ``/``, a space or non-ASCII must be encoded before signing.
    """
    from baidubce.utils import normalize_string

    if not value:
        raise UsageError(f"the {what} is empty")
    if "/" in value:  # servers decode %2F before routing; no AIHC job or pod name holds a "/"
        raise UsageError(f"{what} {value!r} cannot contain '/'; AIHC ids are like pytorchjob-1a2b...")
    return normalize_string(value, True).decode("ascii")


def _job_path(job_id: str, *rest: str) -> str:
    return "/".join([API, _segment(job_id, "job id"), *rest])


def _pod_path(job_id: str, pod: str, what: str) -> str:
    return _job_path(job_id, "pods", _segment(pod, "pod name"), what)


class _RetryPolicy:
    """The SDK's retry hook: retry 5xx, 429 and connection errors with jittered backoff."""

    def __init__(self, max_retries: int, base_delay: float, max_delay: float) -> None:
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay

    def should_retry(self, error: BaseException, retries_attempted: int) -> bool:
        if retries_attempted >= self.max_retries:
            return False
        status = getattr(error, "status_code", None)
        if status is not None:
            return status == 429 or status >= 500
        if _name_not_resolved(error) is not None:
            return False
        return isinstance(error, (OSError, socket.timeout, http.client.HTTPException))

    def get_delay_before_next_retry_in_millis(self, error: BaseException, retries_attempted: int) -> float:
        delay = min(self.max_delay, self.base_delay * (2 ** retries_attempted))
        import random

        return 1000.0 * delay * random.uniform(0.5, 1.0)


def _parse_error(http_response: Any, response: Any) -> bool:
    """Raise the SDK's BceServerError for non-2xx answers, tolerating non-JSON bodies."""
    from baidubce.exception import BceServerError

    if 200 <= http_response.status < 300:
        return False
    body = http_response.read()
    http_response.close()
    message, code, request_id = http_response.reason or "error", None, None
    try:
        data = json.loads(body.decode("utf-8")) if body else {}
        if isinstance(data, dict):
            message = str(data.get("message") or message)
            code = data.get("code")
            request_id = data.get("requestId")
    except (ValueError, UnicodeDecodeError):
        snippet = body[:200].decode("utf-8", "replace").strip()
        message = f"{message}: {snippet}" if snippet else message
    raise BceServerError(message, status_code=http_response.status, code=code, request_id=request_id)


def _parse_body(http_response: Any, response: Any, loads: Any = None) -> bool:
    """Keep the JSON answer as plain dicts (the SDK's own parser builds attribute objects); ``loads``:
    the decoder of a big answer (:mod:`job_chain.util.jsonio`)."""
    body = http_response.read()
    http_response.close()
    try:
        response.payload = (loads(body) if loads is not None else json.loads(body.decode("utf-8"))) if body else {}
    except (ValueError, UnicodeDecodeError):
        raise AIHCError(
            f"the server answered {http_response.status} with a body that is not JSON",
            status=http_response.status,
        ) from None
    return True


def _parse_big_body(http_response: Any, response: Any) -> bool:
    from job_chain.util.jsonio import loads

    return _parse_body(http_response, response, loads)


def _clean(params: Dict[str, Any]) -> Dict[str, str]:
    return {k: str(v) for k, v in params.items() if v is not None and v != ""}


def matches(job: Dict[str, Any], status: Optional[str], name: Optional[str]) -> bool:
    """The ``jobs list --status/--name`` filter (v2 applies it server-side, v1 here)."""
    return (not status or job.get("status") == status) and (not name or name in str(job.get("name") or ""))


class AIHCClient:
    """Signed calls to the AIHC training-job API (v1, seed 001; :mod:`client_v2` for v2).

    Reads (and deletes, stops, priority updates, which are idempotent) are retried on 5xx, 429
    and connection errors; ``create_job`` is retried only when a ``client_token`` makes it safe.
    """

    def __init__(
        self,
        credentials: Credentials,
        *,
        timeout: float = 30.0,
        max_retries: int = 4,
        base_delay: float = 0.3,
        max_delay: float = 8.0,
    ) -> None:
        import copy

        from baidubce import protocol
        from baidubce.auth.bce_credentials import BceCredentials
        from baidubce.bce_client_configuration import DEFAULT_CONFIG, BceClientConfiguration
        from baidubce.retry.retry_policy import NoRetryPolicy

        self.endpoint = normalize_endpoint(credentials.host)
        self.credentials = credentials  # what a run's record carries to its jobs (its repr hides the secret)
        self.credentials_source = credentials.source
        self.host_source = credentials.host_source

        def configure(retry_policy: Any) -> BceClientConfiguration:
            config = copy.deepcopy(DEFAULT_CONFIG)
            config.merge_non_none_values(BceClientConfiguration(
                credentials=BceCredentials(credentials.ak, credentials.sk),
                security_token=credentials.token or None,  # STS: sent below as x-bce-security-token
                endpoint=self.endpoint,
                protocol=protocol.HTTPS if self.endpoint.startswith("https") else protocol.HTTP,
                connection_timeout_in_mills=int(timeout * 1000),
                retry_policy=retry_policy,
            ))
            return config

        self._retrying = configure(_RetryPolicy(max_retries, base_delay, max_delay))
        self._once = configure(NoRetryPolicy())

    api_version = "v1"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.endpoint!r})"

    # -- transport -------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        params: Optional[Dict[str, Any]] = None,
        body: Optional[Dict[str, Any]] = None,
        retry: bool = True,
        headers: Optional[Dict[bytes, bytes]] = None,
        big: bool = False,
    ) -> Dict[str, Any]:
        """Send one signed request and return the decoded JSON answer (``big``: a page of a listing,
        decoded by :mod:`job_chain.util.jsonio`)."""
        from baidubce.auth import bce_v1_signer
        from baidubce.exception import BceHttpClientError, BceServerError
        from baidubce.http import bce_http_client

        config = self._retrying if retry else self._once
        payload = json.dumps(body).encode("utf-8") if body is not None else None
        sent = {b"Content-Type": b"application/json", **(headers or {})}
        if config.security_token:  # as the SDK's own clients send it (bos_client): signed, as every x-bce-*
            from baidubce.http import http_headers

            sent[http_headers.STS_SECURITY_TOKEN] = config.security_token.encode("utf-8")
        try:
            response = bce_http_client.send_request(
                config, bce_v1_signer.sign, [_parse_error, _parse_big_body if big else _parse_body],
                method.encode(), path.encode("utf-8"), payload, sent, _clean(params or {}),
            )
        except BceHttpClientError as exc:
            raise self._translate(exc.last_error) from None
        except (BceServerError, OSError, http.client.HTTPException) as exc:
            raise self._translate(exc) from None
        return getattr(response, "payload", {})

    def _translate(self, error: BaseException) -> AIHCError:
        if isinstance(error, AIHCError):
            return error
        status = getattr(error, "status_code", None)
        if status is not None:
            message = str(error) or "request failed"
            if (status in (401, 403) or getattr(error, "code", None) in AUTH_CODES) \
                    and self.credentials_source:
                message += f" (credentials from {self.credentials_source})"
            return AIHCError(
                message,
                status=status,
                code=getattr(error, "code", None),
                request_id=getattr(error, "request_id", None),
            )
        host = urlsplit(self.endpoint).hostname or self.endpoint
        unresolved = _name_not_resolved(error)
        if unresolved is not None:
            origin = f" (host from {self.host_source})" if self.host_source else ""
            reason = getattr(unresolved, "strerror", None) or str(unresolved)
            return AIHCError(f"cannot resolve host {host}{origin}: {reason}; check the host name",
                             code=HOST_NOT_FOUND)
        reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
        message = f"cannot reach {self.endpoint}: {reason}"
        refused = any(isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED
                      for e in _causes(error))
        if refused and is_loopback(host):
            message += "; if this is the local server, start it with 'job-chain local start'"
        return AIHCError(message, code="ConnectionError")

    @staticmethod
    def _result(answer: Dict[str, Any]) -> Any:
        return answer.get("result", answer)

    # -- the 11 endpoints ------------------------------------------------------------------
    def create_job(self, pool: str, body: Dict[str, Any], client_token: Optional[str] = None) -> Dict[str, Any]:
        """POST /api/v1/aijobs → ``{"jobId", "jobName"}``. Retried only with a client token."""
        answer = self.request(
            "POST", API, params={"resourcePoolId": pool, "clientToken": client_token},
            body=body, retry=client_token is not None,
        )
        return self._result(answer)

    def list_jobs(
        self,
        pool: str,
        *,
        queue: Optional[str] = None,
        order_by: Optional[str] = None,
        order: Optional[str] = None,
        page_no: Optional[int] = None,
        page_size: Optional[int] = None,
        status: Optional[str] = None,
        name: Optional[str] = None,
    ) -> Dict[str, Any]:
        """GET /api/v1/aijobs → ``{"total", "jobs", "pageNo", "pageSize", ...}`` (one page;
        v1 has no status/name filter, so that page is filtered here)."""
        answer = self._result(self.request("GET", API, params={
            "resourcePoolId": pool, "queue": queue, "orderBy": order_by, "order": order,
            "pageNo": page_no, "pageSize": page_size,
        }, big=True))
        if status or name:
            answer = dict(answer, jobs=[j for j in answer.get("jobs") or [] if matches(j, status, name)])
        return answer

    _filters_on_server = False

    def iter_jobs(
        self, pool: str, *, queue: Optional[str] = None, order_by: Optional[str] = None,
        order: Optional[str] = None, page_size: int = 100, status: Optional[str] = None,
        name: Optional[str] = None,
    ) -> Iterator[Dict[str, Any]]:
        """Yield every job in the pool (of ``status``, named like ``name``), walking all pages."""
        page = 1
        seen = 0
        on_server = {"status": status, "name": name} if self._filters_on_server else {}
        while True:
            result = self.list_jobs(pool, queue=queue, order_by=order_by, order=order,
                                    page_no=page, page_size=page_size, **on_server)
            jobs = result.get("jobs") or []
            yield from (j for j in jobs if on_server or matches(j, status, name))
            seen += len(jobs)
            total = int(result.get("total") or 0)
            if not jobs or len(jobs) < page_size or seen >= total:
                return
            page += 1

    def get_job(self, pool: str, job_id: str) -> Dict[str, Any]:
        """GET /api/v1/aijobs/{jobId} → the job with its ``podList``."""
        return self._result(self.request("GET", _job_path(job_id), params={"resourcePoolId": pool}))

    def delete_job(self, pool: str, job_id: str) -> Dict[str, Any]:
        """DELETE /api/v1/aijobs/{jobId}."""
        return self._result(self.request("DELETE", _job_path(job_id), params={"resourcePoolId": pool}))

    def update_job(self, pool: str, job_id: str, priority: str) -> Dict[str, Any]:
        """PUT /api/v1/aijobs/{jobId}: only the priority can change."""
        return self._result(self.request(
            "PUT", _job_path(job_id), params={"resourcePoolId": pool}, body={"priority": priority},
        ))

    def job_events(self, pool: str, job_id: str, *, framework: str = FRAMEWORK,
                   start_time: Optional[str] = None, end_time: Optional[str] = None) -> Dict[str, Any]:
        """GET /api/v1/aijobs/{jobId}/events → ``{"events": [...], "total": N}``."""
        return self._result(self.request("GET", _job_path(job_id, "events"), params={
            "resourcePoolId": pool, "jobFramework": framework,
            "startTime": start_time, "endTime": end_time,
        }))

    def pod_logs(
        self, pool: str, job_id: str, pod: str, *, start_time: Optional[int] = None,
        max_lines: Optional[int] = None, chunk: Optional[int] = None, end_time: Optional[int] = None,
        keywords: Optional[str] = None, marker: Optional[str] = None,
    ) -> Dict[str, Any]:
        """GET .../pods/{podName}/logs → ``{"jobId", "podName", "logs", "nextMarker"}`` (one page:
        follow ``nextMarker`` with :func:`job_chain.engine.logs.log_pages`)."""
        return self._result(self.request("GET", _pod_path(job_id, pod, "logs"), params={
            "resourcePoolId": pool, "startTime": start_time, "maxLines": max_lines, "chunk": chunk,
            "endTime": end_time, "keywords": keywords, "marker": marker}))

    def pod_events(self, pool: str, job_id: str, pod: str, *, framework: str = FRAMEWORK,
                   start_time: Optional[str] = None, end_time: Optional[str] = None) -> Dict[str, Any]:
        """GET .../pods/{podName}/events → ``{"events": [...], "total": N}``."""
        return self._result(self.request("GET", _pod_path(job_id, pod, "events"), params={
            "resourcePoolId": pool, "jobFramework": framework,
            "startTime": start_time, "endTime": end_time,
        }))

    def stop_job(self, pool: str, job_id: str) -> Dict[str, Any]:
        """POST /api/v1/aijobs/{jobId}/stop (idempotent: stopping twice is harmless)."""
        return self._result(self.request("POST", _job_path(job_id, "stop"), params={"resourcePoolId": pool}))

    def job_metrics(
        self, pool: str, job_id: str, metric_type: str, *, start_time: Optional[int] = None,
        end_time: Optional[int] = None, time_step: Optional[int] = None,
    ) -> Dict[str, Any]:
        """GET .../metrics → ``{"jobId", "podMetrics": [{"podName", "metrics": [...]}]}``."""
        return self._result(self.request("GET", _job_path(job_id, "metrics"), params={
            "resourcePoolId": pool, "metricType": metric_type, "startTime": start_time,
            "endTime": end_time, "timeStep": time_step,
        }))

    def job_nodes(self, pool: str, job_id: str) -> Dict[str, Any]:
        """GET .../nodes → ``{"jobID", "nodeName": [...]}``."""
        return self._result(self.request("GET", _job_path(job_id, "nodes"), params={"resourcePoolId": pool}))

    def webterminal(self, pool: str, job_id: str, pod: str, *, handshake_timeout: Optional[int] = None,
                    ping_timeout: Optional[int] = None) -> Dict[str, Any]:
        """GET .../pods/{podName}/webterminal → ``{"WebTerminalUrl": "ws(s)://..."}``."""
        return self._result(self.request("GET", _pod_path(job_id, pod, "webterminal"), params={
            "resourcePoolId": pool, "handshakeTimeoutSecond": handshake_timeout,
            "pingTimeoutSecond": ping_timeout,
        }))

    # -- resource pools and queues (the SDK's get_all_pools ... get_queue) ----------------------
    def list_pools(self) -> List[Dict[str, Any]]:
        """GET /api/v1/resourcepools → the pools (every page)."""
        pools: List[Dict[str, Any]] = []
        page = 1
        while True:
            result = self._result(self.request("GET", "/api/v1/resourcepools",
                                               params={"pageNo": page, "pageSize": 100}))
            found = result.get("resourcePools") or []
            pools += found
            if len(found) < 100 or len(pools) >= int(result.get("total") or 0):
                return pools
            page += 1

    def list_queues(self, pool: str) -> List[Dict[str, Any]]:
        """GET /api/v1/resourcepools/{id}/queue → the pool's queues."""
        path = "/api/v1/resourcepools/" + _segment(pool, "resource pool id") + "/queue"
        return list(self._result(self.request("GET", path, params={"pageSize": 1000})).get("queues") or [])


def pod_names(job: Dict[str, Any]) -> List[str]:
    """Names of a job's pods from its detail answer (``podList.pods[].objectMeta.name``)."""
    pods = ((job.get("podList") or {}).get("pods")) or []
    return [name for p in pods if (name := (p.get("objectMeta") or {}).get("name"))]


@contextlib.contextmanager
def naming_pods(client: Any, pool: str, job_id: str, pod: str) -> Iterator[None]:
    """Around calls on one ``pod``: a missing pod becomes an error listing the job's pods."""
    try:
        yield
    except AIHCError as exc:
        if exc.status != 404 or exc.code == "NoSuchJob":
            raise
        names = pod_names(client.get_job(pool, job_id))  # NoSuchJob here is the truer error
        listing = f"its pods are {', '.join(names)}" if names else "it has no pods yet"
        raise AIHCError(f"job {job_id} has no pod {pod!r}; {listing}", status=exc.status,
                        code=exc.code, request_id=exc.request_id) from None
