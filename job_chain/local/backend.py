"""What each API call does, in AIHC's shapes, without any HTTP (moto's ``models.py``).

Routes parse requests and call one method here; methods raise :mod:`errors` for the caller's
mistakes and return the ``result`` objects of seed 001.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import secrets
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, OrderedDict, Sequence, Set, Tuple

from job_chain.aihc.spec import FRAMEWORK, accepted_body, priority_problem
from job_chain.local import logs as pod_log
from job_chain.local.errors import INAPPROPRIATE, BadRequest, IdempotencyMismatch, NotFound, NotSupported
from job_chain.local.executor import Executor, utc_event_time
from job_chain.local.host import HOSTNAME
from job_chain.local.metrics import job_metrics
from job_chain.local.params import STS_DEFAULT_SECONDS, STS_MAX_SECONDS, parse_int, parse_metric_window, parse_time
from job_chain.local.pod_process import pod_paths
from job_chain.local.pool_views import PoolViews
from job_chain.local.shapes import JSONItems, iso_time, item_text
from job_chain.local.store import Store, listed_job
from job_chain.util.jsonfile import shown

MAX_REPLICAS = 64  # the local server's capacity: each replica is a process on this machine
DEFAULT_LABELS = ("aijob.cce.baidubce.com/create-from-aihcp-api",)
JOBID_LABEL = "aijob.cce.baidubce.com/openapi-jobid"
log = logging.getLogger("job_chain.local")


def validate_create(body: Any) -> Tuple[Dict[str, Any], List[str]]:
    """Check a create body with the shared rules (:mod:`job_chain.aihc.spec`) in accepting mode,
    as AIHC would: (the body without the keys it ignores, with defaults; the ignored keys' paths).

    Every problem is named in the one 400 ``InappropriateJSON`` answer (BCE's code for a missing
    or mistyped item), with its JSON path (``jobSpec.envs[0].name``).
    """
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object (an AIHC create-job body)", code=INAPPROPRIATE)
    clean, problems, ignored = accepted_body(body, max_replicas=MAX_REPLICAS)
    for i, source in enumerate(clean.get("datasources") or []):
        mount = source.get("mountPath") if isinstance(source, dict) else None
        if isinstance(mount, str) and os.path.lexists(mount) and not os.path.isdir(mount):
            problems.append((f"datasources[{i}].mountPath", f"{shown(mount)} exists on this machine "
                             "and is not a directory, so it cannot be mounted"))
    if problems:
        count = f"{len(problems)} problems: " if len(problems) > 1 else ""
        raise BadRequest(count + "; ".join(f"{path}: {message}" for path, message in problems), code=INAPPROPRIATE)
    clean.pop("resourcePoolId", None)  # the SDK's JobConfig sends it; the query parameter decides
    clean.update(jobFramework=clean.get("jobFramework") or FRAMEWORK, priority=clean.get("priority") or "normal",
                 queue=clean.get("queue") or "default")
    clean["jobSpec"] = dict(clean["jobSpec"], replicas=clean["jobSpec"].get("replicas", 1))
    return clean, ignored


LISTED_BYTES = 48 * 1024 * 1024  # what the kept list items may hold at most (ListedJobs)
PAGES_BYTES = 16 * 1024 * 1024  # what the kept pages may hold at most, their items counted again
_ENTRY = 200  # bytes of bookkeeping per kept item or page (OrderedDict node, tuples), counted generously
Page = Tuple[int, List[str]]  # a page of a listing: the total and its items
View = Callable[[Dict[str, Any]], Dict[str, Any]]  # a job (row) as one API style lists it


class ListedJobs:
    """Each listed job's list item as JSON text (:func:`item_text`), kept while its row is unchanged.

    Items and pages are kept per API style (v1's list, v2's DescribeJobs), each made by that style's
    view. A job's item is a function of its listed row alone (:data:`store.LIST_NAMES`: status, times,
    priority, queue, and the stored spec its command, labels, image, … come from), so an item is kept
    with the whole row it was made from and given again only for an equal row: whatever changes a
    listed column (a stop, a new priority, an end, a restart, even a hand edit of the state) makes a
    new item. The least recently listed go first once the kept rows and items pass ``budget`` bytes
    (sys.getsizeof of each, and :data:`_ENTRY`), so pools of any size cost at most that.

    A whole page (its total and items) is kept too, with the state's version (:meth:`Store.version`,
    which any change to the database changes, by this server or anything else): asked again at the
    same version, it is given without reading the database. At most ``page_budget`` bytes of pages
    (their items counted again, though they are mostly the kept items themselves).
    """

    def __init__(self, budget: int = LISTED_BYTES, page_budget: int = PAGES_BYTES) -> None:
        self.budget, self.page_budget = budget, page_budget
        self.size = self.pages_size = 0
        self._kept: OrderedDict[Tuple[str, str], Tuple[Tuple[Any, ...], str, int]] = collections.OrderedDict()
        self._styles: Set[str] = set()
        self._pages: OrderedDict[Tuple[Any, ...], Tuple[Tuple[int, int], Page, int]] = collections.OrderedDict()
        self._lock = threading.Lock()  # pages are answered on several threads at once

    def page(self, query: Tuple[Any, ...], version: Tuple[int, int]) -> Optional[Page]:
        """The page ``query`` (the style, then what :meth:`Store.list_rows` takes) kept at
        ``version``, if it was."""
        with self._lock:
            kept = self._pages.get(query)
            if kept is None or kept[0] != version:
                return None
            self._pages.move_to_end(query)
            return kept[1]

    def keep_page(self, query: Tuple[Any, ...], version: Tuple[int, int], page: Page) -> None:
        """Keep ``page``, read at ``version`` (read *before* the page: a change in between then
        only makes the page newer than its version says, and it is read again)."""
        cost = sum(map(sys.getsizeof, page[1])) + sys.getsizeof(page[1]) + sys.getsizeof(query) + _ENTRY
        with self._lock:
            old = self._pages.pop(query, None)
            if old is not None:
                self.pages_size -= old[2]
            if cost > self.page_budget:
                return
            while self.pages_size + cost > self.page_budget:
                self.pages_size -= self._pages.popitem(last=False)[1][2]
            self._pages[query] = (version, page, cost)
            self.pages_size += cost

    def __len__(self) -> int:
        return len(self._kept)

    def texts(self, style: str, view: View, rows: Sequence[Tuple[Any, ...]]) -> List[str]:
        """The ``style`` list item (``view``) of each row of :meth:`Store.list_rows`, in order."""
        found: List[Optional[str]] = []
        with self._lock:
            self._styles.add(style)
            for row in rows:
                kept = self._kept.get((style, row[0]))
                if kept is not None and kept[0] == row:
                    self._kept.move_to_end((style, row[0]))
                    found.append(kept[1])
                else:
                    found.append(None)
        made = [(row, item_text(view(listed_job(row)))) for row, text in zip(rows, found) if text is None]
        if made:
            self._keep(style, made)
        fresh = iter(made)
        return [text if text is not None else next(fresh)[1] for text in found]

    def _keep(self, style: str, made: List[Tuple[Tuple[Any, ...], str]]) -> None:
        with self._lock:
            for row, text in made:
                self._forget((style, row[0]))
                cost = sys.getsizeof(text) + sys.getsizeof(row) + sum(map(sys.getsizeof, row)) + _ENTRY
                if cost > self.budget:
                    continue
                while self.size + cost > self.budget:
                    self.size -= self._kept.popitem(last=False)[1][2]
                self._kept[(style, row[0])] = (row, text, cost)
                self.size += cost

    def drop(self, job_id: str) -> None:
        """Forget a job's items (a deleted job's: it is in no page any more)."""
        with self._lock:
            for style in self._styles:
                self._forget((style, job_id))

    def _forget(self, key: Tuple[str, str]) -> None:
        kept = self._kept.pop(key, None)
        if kept is not None:
            self.size -= kept[2]


class Backend:
    """The AIHC training-job API over a :class:`Store` and an :class:`Executor`."""

    def __init__(self, store: Store, executor: Executor, state_dir: str, url: str,
                 default_capacity: Optional[int] = None) -> None:
        self.store = store
        self.executor = executor
        self.state_dir = state_dir
        self.url = url
        self.instance = secrets.token_hex(8)  # names this server run; not a secret
        self.pools = PoolViews(store, default_capacity)
        self.listed = ListedJobs()

    # -- helpers ---------------------------------------------------------------------------
    def _pool(self, pool: str) -> Optional[Dict[str, Any]]:
        return self.pools.find_pool(pool)

    def _queue(self, pool: str, name: str) -> Optional[Dict[str, Any]]:
        return self.pools.find_queue(pool, name)

    def find_job(self, pool: str, job_id: str) -> Dict[str, Any]:
        """The job's stored row (404 NoSuchJob if it is not in ``pool``)."""
        self._pool(pool)
        job = self.store.get_job(job_id, pool)
        if job is None:
            raise NotFound(f"job {job_id} does not exist in resource pool {pool}")
        return job

    def _pod(self, pool: str, job_id: str, pod: str) -> Dict[str, Any]:
        self.find_job(pool, job_id)
        found = self.store.get_pod(job_id, pod)
        if found is None:
            raise NotFound(f"pod {pod} does not exist in job {job_id}", code="NoSuchPod")
        return found

    @staticmethod
    def _labels(job: Dict[str, Any]) -> List[Dict[str, str]]:
        # .get: jobs stored before labels were checked may lack a value; a GET must still answer
        labels = [{"key": str(lb.get("key", "")), "value": str(lb.get("value", ""))}
                  for lb in job["spec"].get("labels") or [] if isinstance(lb, dict)]
        keys = {lb["key"] for lb in labels}
        labels += [{"key": k, "value": "true"} for k in DEFAULT_LABELS if k not in keys]
        if JOBID_LABEL not in keys:
            labels.append({"key": JOBID_LABEL, "value": job["id"]})
        return labels

    def job_view(self, job: Dict[str, Any]) -> Dict[str, Any]:
        """One job as v1 answers it (list item; the detail adds ``podList``): seed 001's fields
        and the Go SDK's ``OpenAPIGetJobResponseResult`` (runningAt, scheduledAt, replicas, …)."""
        spec = job["spec"]
        job_spec = spec.get("jobSpec") or {}
        return {
            "jobId": job["id"],
            "name": job["name"],
            "resourcePoolId": job["pool"],
            "command": job_spec.get("command", ""),
            "createdAt": iso_time(job["created_at"]),
            "finishedAt": iso_time(job["finished_at"]),
            "scheduledAt": iso_time(job["scheduled_at"]),
            "runningAt": iso_time(job["started_at"]),
            "datasources": spec.get("datasources") or [],
            "enableFaultTolerance": bool(spec.get("faultTolerance", False)),
            "customFaultTolerancePattern": (spec.get("faultToleranceConfig") or {}).get(
                "customFaultTolerancePattern") or [],
            "labels": self._labels(job),
            "priority": job["priority"],
            "queue": job["queue"],
            "status": job["status"],
            "image": job_spec.get("image", ""),
            "resources": job_spec.get("resources") or [],
            "enableRDMA": bool(job_spec.get("enableRDMA", False)),
            "hostNetwork": bool(job_spec.get("hostNetwork", False)),
            "replicas": job_spec.get("replicas", 1),
            "envs": job_spec.get("envs") or [],
            "jobFramework": spec.get("jobFramework") or FRAMEWORK,
            "queueingSequence": job["seq"],
            "enableBccl": bool(spec.get("enableBccl", False)),
            "enableBcclStatus": "", "enableBcclErrorReason": "",  # BCCL is not injected here
            "k8sUID": job["id"].partition("-")[2],  # the uuid in pytorchjob-<uuid>
            "k8sNamespace": "default",
            **({"faultToleranceArgs": spec["faultToleranceArgs"]} if spec.get("faultToleranceArgs") else {}),
        }

    def _pod_view(self, job: Dict[str, Any], pod: Dict[str, Any]) -> Dict[str, Any]:
        labels = {lb["key"]: lb["value"] for lb in self._labels(job)}
        index = "0" if pod["rank"] == 0 else str(pod["rank"] - 1)
        labels.update({
            "training.kubeflow.org/job-name": job["name"],
            "training.kubeflow.org/job-role": pod["replica_type"],
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/replica-index": index,
            "training.kubeflow.org/replica-type": pod["replica_type"],
        })
        return {
            "PodIP": "127.0.0.1" if pod["started_at"] else "",
            "nodeName": HOSTNAME if pod["started_at"] else "",
            "objectMeta": {
                "name": pod["name"],
                "namespace": "default",
                "labels": labels,
                "annotations": {JOBID_LABEL: job["id"], "cce-workload-kind": "PyTorchJob",
                                "cce-workload-name": job["name"]},
                "creationTimestamp": iso_time(pod["started_at"] or job["created_at"]),
            },
            "podStatus": {"podPhase": pod["status"], "status": pod["status"]},
            "replicaType": pod["replica_type"],
            "restartCount": pod["restart_count"] or 0,
            "envs": pod["env"],
            "finishedAt": iso_time(pod["finished_at"]),
            "reason": "" if pod["finished_at"] is None else "Completed" if pod["exit_code"] == 0 else "Error",
        }

    @staticmethod
    def _event_view(event: Dict[str, Any]) -> Dict[str, Any]:
        stamp = utc_event_time(event["ts"])
        return {"reason": event["reason"], "message": event["message"], "firstTimestamp": stamp,
                "lastTimestamp": stamp, "count": 1, "type": event["type"]}

    # -- the 11 endpoints ------------------------------------------------------------------
    def create_job(self, pool: str, body: Any, client_token: Optional[str], api: str = "v1") -> Dict[str, Any]:
        self._pool(pool)
        clean, ignored = validate_create(body)
        if ignored:  # AIHC ignores what it does not recognise; say so where the operator looks
            log.info("create in pool %s: ignored unknown keys %s (validate reports them)", pool,
                     ", ".join(ignored)[:2000])
        self._queue(pool, clean["queue"])
        digest = hashlib.sha256(json.dumps(clean, sort_keys=True).encode("utf-8")).hexdigest()
        job, created = self.store.create_job(
            pool, clean["name"], clean, clean["priority"], clean["queue"], client_token,
            clean["jobSpec"]["replicas"], body_hash=digest, api=api,
        )
        if not created and job["pool"] != pool:  # a token names one request: BCE's idempotency rule
            raise IdempotencyMismatch(f"clientToken {client_token} was used for job {job['id']} in resource "
                                      f"pool {job['pool']}; use a new clientToken for a job in {pool}")
        if not created and job.get("body_hash") and job["body_hash"] != digest:
            raise IdempotencyMismatch(f"clientToken {client_token} was used for job {job['id']} with a "
                                      "different request body; use a new clientToken for a different job")
        if created:
            self.executor.wake()
        return {"jobId": job["id"], "jobName": job["name"]}

    def _query(self, pool: str, queue: Optional[str], order_by: Optional[str], order: Optional[str],
               page_no: Optional[str], page_size: Optional[str], status: Optional[str],
               name: Optional[str]) -> Tuple[Dict[str, Any], Tuple[Any, ...]]:
        """A listing's parameters checked: (the answer without ``total`` and ``jobs``, what
        :meth:`Store.list_rows` takes)."""
        self._pool(pool)
        order_by = order_by or "createdAt"
        if order_by not in ("createdAt", "finishedAt"):
            raise BadRequest(f"orderBy must be createdAt or finishedAt, got {order_by!r}")
        order = order or "desc"
        if order not in ("asc", "desc"):
            raise BadRequest(f"order must be asc or desc, got {order!r}")
        number = parse_int("pageNo", page_no, 1, minimum=1) or 1
        size = parse_int("pageSize", page_size, 10, minimum=1, maximum=1000) or 10
        queue = None if not queue or queue == "all" else queue
        return {"total": None, "jobs": None, "orderBy": order_by, "order": order, "pageNo": number,
                "pageSize": size}, (pool, queue, order_by, order == "desc", (number - 1) * size, size,
                                    status or None, name or None)

    def list_items(self, style: str, view: View, pool: str, queue: Optional[str], order_by: Optional[str],
                   order: Optional[str], page_no: Optional[str], page_size: Optional[str],
                   status: Optional[str] = None, name: Optional[str] = None) -> Dict[str, Any]:
        """A page of a pool's jobs, each as ``view`` makes it, kept as JSON text (:class:`ListedJobs`,
        under ``style``) and sent as it is: v1's list answer, whose ``total`` and ``jobs`` v2's is made of."""
        answer, query = self._query(pool, queue, order_by, order, page_no, page_size, status, name)
        version = self.store.version()
        page = self.listed.page((style, *query), version)
        if page is None:
            total, rows = self.store.list_rows(*query)
            page = (total, self.listed.texts(style, view, rows))
            self.listed.keep_page((style, *query), version, page)
        answer["total"], answer["jobs"] = page[0], JSONItems(page[1])
        return answer

    def list_jobs(self, pool: str, queue: Optional[str], order_by: Optional[str],
                  order: Optional[str], page_no: Optional[str], page_size: Optional[str]) -> Dict[str, Any]:
        """v1's list: each job as :meth:`job_view`."""
        return self.list_items("v1", self.job_view, pool, queue, order_by, order, page_no, page_size)

    def get_job(self, pool: str, job_id: str) -> Dict[str, Any]:
        return self.job_detail(self.find_job(pool, job_id))

    def job_detail(self, job: Dict[str, Any]) -> Dict[str, Any]:
        """A job row as v1's detail answers it: :meth:`job_view` and its ``podList``."""
        pods = [self._pod_view(job, p) for p in self.store.pods(job["id"])]
        view = self.job_view(job)
        view["podList"] = {"listMeta": {"totalItems": len(pods)}, "pods": pods}
        return view

    def delete_job(self, pool: str, job_id: str) -> Dict[str, Any]:
        job = self.find_job(pool, job_id)
        self.executor.delete(job_id)
        self.listed.drop(job_id)  # only memory: a deleted job is in no page
        return {"jobId": job_id, "jobName": job["name"]}

    def update_job(self, pool: str, job_id: str, body: Any) -> Dict[str, Any]:
        self.find_job(pool, job_id)
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object", code=INAPPROPRIATE)
        priority = body.get("priority")
        problem = priority_problem(priority)
        if problem:
            raise BadRequest(f"priority: {problem}", code=INAPPROPRIATE)
        self.store.set_job(job_id, priority=priority)
        self.executor.wake()
        return {"jobId": job_id}

    def stop_job(self, pool: str, job_id: str) -> Dict[str, Any]:
        self.find_job(pool, job_id)
        self.executor.stop(job_id)
        return {"jobId": job_id}

    def events(self, pool: str, job_id: str, pod: Optional[str], framework: Optional[str],
               start: Optional[str], end: Optional[str]) -> Dict[str, Any]:
        if not framework:
            raise BadRequest("jobFramework is required (PyTorchJob)")
        if framework not in ("PyTorchJob", "MPIJob"):
            raise BadRequest(f"jobFramework must be PyTorchJob, got {framework!r}")
        if pod is None:
            self.find_job(pool, job_id)
        else:
            self._pod(pool, job_id, pod)
        rows = self.store.events(job_id, pod, parse_time("startTime", start),
                                 parse_time("endTime", end))
        return {"events": [self._event_view(e) for e in rows], "total": len(rows)}

    def logs(self, pool: str, job_id: str, pod: str, start: Optional[str], max_lines: Optional[str],
             chunk: Optional[str], *, end: Optional[str] = None, keywords: Optional[str] = None,
             marker: Optional[str] = None, default_chunk: int = 0) -> Dict[str, Any]:
        """One page of a pod's log (:mod:`job_chain.local.logs`): ``{"jobId", "podName", "logs",
        "nextMarker"}``; ``nextMarker`` is "" when the answer reaches the end."""
        self._pod(pool, job_id, pod)
        since = parse_int("startTime", start, minimum=0)
        until = parse_int("endTime", end, minimum=0)
        limit = parse_int("maxLines", max_lines, minimum=0)
        group = parse_int("chunkSize" if default_chunk else "chunk", chunk, default_chunk, minimum=0) or 0
        keyword = keywords.encode("utf-8") if keywords else None
        _, log_path, _ = pod_paths(self.state_dir, job_id, pod)
        try:
            size = os.path.getsize(log_path)
        except OSError:
            return {"jobId": job_id, "podName": pod, "logs": [], "nextMarker": ""}
        last = self.store.log_offset(job_id, pod, until, after=True) if until is not None else None
        if marker:
            page: Optional[pod_log.Page] = pod_log.read_marker(job_id, pod, marker, size)
        else:
            base = self.store.log_offset(job_id, pod, since) or 0 if since else 0
            page = pod_log.first_page(log_path, base, last, limit, keyword)
        assert page is not None
        lines, after = pod_log.read_page(log_path, page, last, keyword)
        return {"jobId": job_id, "podName": pod, "logs": pod_log.records(lines, group),
                "nextMarker": "" if after is None else pod_log.make_marker(job_id, pod, after)}

    def metrics(self, pool: str, job_id: str, metric: Optional[str], start: Optional[str],
                end: Optional[str], step: Optional[str], code: str = "") -> Dict[str, Any]:
        """GET .../metrics and DescribeJobMetrics: ``metricType`` required; ``startTime``/``endTime``
        unix seconds or ISO 8601; ``timeStep`` like 5m, 30s, 1h or seconds, default 5 minutes (the
        pages). A bad value is a 400 naming the parameter (``code``: v1's InvalidParameter unless given)."""
        self.find_job(pool, job_id)
        if not metric:
            raise BadRequest("metricType is required, e.g. CpuUsage", code=code)
        window = parse_metric_window(start, end, step, code)
        pods = [p["name"] for p in self.store.pods(job_id)]
        return job_metrics(self.store, job_id, pods, metric, *window)

    def nodes(self, pool: str, job_id: str) -> Dict[str, Any]:
        """v1: ``{"jobID", "nodeName"}`` (seed 001; the Go SDK reads ``jobId`` case-insensitively)."""
        job = self.find_job(pool, job_id)
        return {"jobID": job_id, "nodeName": [HOSTNAME] if job["started_at"] else []}

    def webterminal(self, pool: str, job_id: str, pod: str, handshake: Optional[str],
                    ping: Optional[str]) -> Dict[str, Any]:
        self._pod(pool, job_id, pod)
        hs = parse_int("handshakeTimeoutSecond", handshake, 30, minimum=1) or 30
        pt = parse_int("pingTimeoutSecond", ping, 900, minimum=1, maximum=3600) or 900
        token = self.store.add_token(job_id, pod, ttl=hs)
        base = self.url.replace("http://", "ws://", 1).replace("https://", "wss://", 1)
        return {"WebTerminalUrl": f"{base}/webterminal/establish?token={token}"
                                  f"&handshakeTimeoutSecond={hs}&pingTimeoutSecond={pt}"}

    def terminal_target(self, token: str) -> Optional[Dict[str, Any]]:
        """Consume a webterminal token: the pod's log path, or None if bad or expired."""
        found = self.store.take_token(token)
        if found is None:
            return None
        job_id, pod = found
        _, log_path, _ = pod_paths(self.state_dir, job_id, pod)
        return {"job_id": job_id, "pod": pod, "log_path": log_path}

    def pod_finished(self, job_id: str, pod: str) -> bool:
        found = self.store.get_pod(job_id, pod)
        return found is None or found["finished_at"] is not None

    def mint_session(self, duration: Optional[str], acl: Any) -> Dict[str, Any]:
        """BCE STS GetSessionToken: temporary credentials for ``durationSeconds`` (default 12 h, at
        most 36 h: the local server's own bounds) as STS answers them (``accessKeyId``,
        ``secretAccessKey``, ``sessionToken``, ``createTime``, ``expiration``, ``userId``). An
        ``acl`` (a policy narrowing them) is refused: the local server has one user and no
        policies, so it could not enforce one."""
        if acl not in (None, {}):
            raise NotSupported("acl: the local server has one user and no policies, so it cannot narrow temporary "
                               "credentials; send no acl (on AIHC, narrow a sub-user's policy instead)")
        seconds = parse_int("durationSeconds", duration, STS_DEFAULT_SECONDS, minimum=1, maximum=STS_MAX_SECONDS)
        issued = self.store.add_session(int(seconds or STS_DEFAULT_SECONDS))
        return {"accessKeyId": issued["ak"], "secretAccessKey": issued["sk"], "sessionToken": issued["token"],
                "createTime": iso_time(issued["created"]), "expiration": iso_time(issued["expires"]),
                "userId": "local"}

    def health(self) -> Dict[str, Any]:
        """Unauthenticated, so nothing a job could use (no pid: /proc/<pid> is readable):
        only this run's random ``instance``, which lets a caller tell its server from another."""
        return {"status": "ok", "instance": self.instance}
