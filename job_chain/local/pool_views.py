"""Resource pools, queues and nodes of the local server: lookups and v1/v2 answers, without HTTP.

The pools and queues are those of ``--pool``/``--queue`` (none: any pool id is accepted and the
pool and queue APIs list nothing; the server invents no pools). Answers are built by
:mod:`shapes` from the store's rows and the jobs that hold or wait for each queue.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from job_chain.local import shapes
from job_chain.local import store as st
from job_chain.local.errors import NotFound
from job_chain.local.params import parse_int
from job_chain.local.store import Store


class PoolViews:
    """Lookups of the configured pools and queues, and their answers in AIHC's shapes."""

    def __init__(self, store: Store, default_capacity: Optional[int] = None) -> None:
        self.store = store
        self.default_capacity = default_capacity  # --max-running: a queue's without its own

    def find_pool(self, pool: str) -> Optional[Dict[str, Any]]:
        """The configured pool; None when none are configured (then any pool id is taken)."""
        pools = self.store.pools()
        if not pools:
            return None
        found = [p for p in pools if p["id"] == pool]
        if not found:
            known = ", ".join(p["id"] for p in pools)
            raise NotFound(f"resource pool {pool} does not exist (this server has {known})",
                           code="NoSuchResourcePool")
        return found[0]

    def find_queue(self, pool: str, name: str) -> Optional[Dict[str, Any]]:
        if self.find_pool(pool) is None:
            return None
        queues = self.store.queues(pool)
        found = [q for q in queues if q["name"] == name]
        if not found:
            known = ", ".join(q["name"] for q in queues) or "none"
            raise NotFound(f"queue {name} does not exist in resource pool {pool} (its queues: {known})",
                           code="NoSuchQueue")
        return found[0]

    @staticmethod
    def _usage(jobs: Iterable[Dict[str, Any]]) -> Tuple[shapes.Counts, Dict[str, float]]:
        """Job counts and the active jobs' resource requests, from :meth:`Store.queue_jobs` rows."""
        counts = shapes.Counts()
        active = []
        for job in jobs:
            if job["status"] == st.PENDING:
                counts.pending += 1
                continue
            active.append(job)
            if job["status"] == st.SCHEDULED:
                counts.inqueue += 1
            else:
                counts.running += 1
        return counts, shapes.allocated(active)

    def _queue_capacity(self, queue: Dict[str, Any]) -> Optional[int]:
        return queue["capacity"] if queue["capacity"] is not None else self.default_capacity

    def page(self, items: List[Any], page_no: Optional[str], page_size: Optional[str], default: int,
              name: str = "pageNo") -> Tuple[List[Any], int, int]:
        number = parse_int(name, page_no, 1, minimum=1) or 1
        size = parse_int("pageSize", page_size, default, minimum=1, maximum=1000) or default
        return items[(number - 1) * size:number * size], number, size

    def configured_pool(self, pool: str) -> Dict[str, Any]:
        found = self.find_pool(pool)
        if found is None:
            raise NotFound(f"resource pool {pool} does not exist: this local server accepts any "
                           "pool id and has none configured (start it with --pool ID)",
                           code="NoSuchResourcePool")
        return found

    def pools_v1(self, pools: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """v1 answers for ``pools``; one read of the jobs for all of them (a node is busy while a
        job holds it)."""
        busy = {pool for (pool, _), jobs in self.store.queue_jobs().items()
                if any(job["status"] != st.PENDING for job in jobs)}
        return [shapes.pool_v1(p, 1 if p["id"] in busy else 0) for p in pools]

    def queues_answer(self, pool: str, queues: List[Dict[str, Any]],
                      shape: Callable[..., Dict[str, Any]]) -> List[Dict[str, Any]]:
        """``pool``'s ``queues`` as ``shape`` (:func:`shapes.queue_v1` or :func:`shapes.queue_v2`)
        answers them; one read of the jobs for all of them."""
        jobs = self.store.queue_jobs(pool)
        answers = []
        for queue in queues:
            counts, used = self._usage(jobs.get((queue["pool"], queue["name"]), []))
            answers.append(shape(queue, self._queue_capacity(queue), counts, used))
        return answers

    def list_pools(self, page_no: Optional[str], page_size: Optional[str]) -> Dict[str, Any]:
        """v1 ``GET /api/v1/resourcepools``: the Go SDK's ``ResourcePoolPage``."""
        pools = self.store.pools()
        page, number, size = self.page(pools, page_no, page_size, 10)
        return shapes.page_v1("resourcePools", self.pools_v1(page), len(pools), number, size)

    def get_pool(self, pool: str) -> Dict[str, Any]:
        """v1 ``GET /api/v1/resourcepools/{id}``: ``{"resourcePool": …}`` (GetResourcePoolResult)."""
        return {"resourcePool": self.pools_v1([self.configured_pool(pool)])[0]}

    def list_queues(self, pool: str, page_no: Optional[str], page_size: Optional[str]) -> Dict[str, Any]:
        self.configured_pool(pool)
        queues = self.store.queues(pool)
        page, number, size = self.page(queues, page_no, page_size, 50)
        return shapes.page_v1("queues", self.queues_answer(pool, page, shapes.queue_v1), len(queues), number, size)

    def get_queue(self, pool: str, name: str) -> Dict[str, Any]:
        """v1 ``…/queue/{name}``: ``{"queue": …}`` (the Go SDK's GetQueuesResult)."""
        self.configured_pool(pool)
        found = self.find_queue(pool, name)
        assert found is not None
        return {"queue": self.queues_answer(pool, [found], shapes.queue_v1)[0]}

    def pool_nodes(self, pool: str, page_no: Optional[str] = None, page_size: Optional[str] = None) -> Dict[str, Any]:
        """The one node of every local pool: this machine, as psutil sees it (Go SDK ``NodePage``)."""
        self.configured_pool(pool)
        _, used = self._usage(job for jobs in self.store.queue_jobs(pool).values() for job in jobs)
        page, number, size = self.page([shapes.node_v1(used)], page_no, page_size, 50)
        return shapes.page_v1("nodes", page, 1, number, size)

    def queue_by_id(self, queue_id: str) -> Dict[str, Any]:
        """The configured queue whose v2 id is ``queue_id``; 404 NoSuchQueue naming it."""
        queues = self.store.queues()
        for queue in queues:
            if shapes.queue_id(queue["pool"], queue["name"]) == queue_id:
                return queue
        known = ", ".join(f"{shapes.queue_id(q['pool'], q['name'])} ({q['pool']}/{q['name']})"
                          for q in queues) or "none: start the server with --pool ID"
        raise NotFound(f"queue {queue_id} does not exist (this server's queues: {known})", code="NoSuchQueue")
