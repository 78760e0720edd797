"""The local server's resource pools, queues and nodes in the shapes AIHC answers, v1 and v2.

Field names and types follow Baidu's Go SDK, the most complete public description of these
answers: v1 ``services/aihc/api/v1/resourcePool.go`` (``ResourcePool`` with nested
``metadata``/``spec``/``status``, ``Node``, the pages ``ResourcePoolPage``/``NodePage``) and
``queue.go`` (``Queue``, ``QueuePage``); v2 ``services/aihc/v2/api/resourcepool.go``
(``ResourcePool``, ``DescribeResourcePoolsResponse``) and ``queue.go`` (``QueueSpec``,
``ResourceAmount``). Values are this machine's (psutil) and this server's state; what a local
pool has no notion of is the type's empty value, never an invented number. One local extension:
``maxRunningJobs``, the ``--pool``/``--queue`` capacity (AIHC bounds queues by resources).
No HTTP here: :mod:`backend` calls these with rows from the store.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from functools import lru_cache
from typing import Any, Dict, Iterable, List, Mapping, Optional

from job_chain.aihc.timefmt import iso_utc
from job_chain.local.host import HOSTNAME

ROOT_QUEUE = "63a9f0ea7bb98050796b649e85481845"  # parentQueue of a top-level queue (md5 of "root",
# as Baidu's DescribeQueue example shows it, https://cloud.baidu.com/doc/AIHC/s/Jmfcjhru0)
REGION = "local"
POOL_TYPE = "common"  # a self-operated pool (resourcePoolType common); the only kind here
POOL_TYPES = ("common", "dedicatedV2", "bhcmp", "edge")  # Go SDK ResourcePoolType + the Python SDK's edge
_ALNUM = "0123456789abcdefghijklmnopqrstuvwxyz"


SECONDS_KEPT = 8192  # iso_time's texts kept, by whole second, at most (~1.2 MB): least recently used out


def iso_time(ts: Optional[float]) -> str:
    """AIHC's timestamps (:func:`job_chain.aihc.timefmt.iso_utc`); "" when unset, as AIHC answers.
    Each second's text is kept (at most :data:`SECONDS_KEPT`): a job list shows four a job, and a
    pool's jobs share most of their seconds."""
    if not ts:
        return ""
    if not ts > 0:  # (negative or NaN: as iso_utc takes it)
        return iso_utc(ts)
    return _second_text(int(ts))  # a fraction is dropped, as iso_utc drops it


_second_text = lru_cache(maxsize=SECONDS_KEPT)(iso_utc)


class JSONItems:
    """A list whose items are already JSON text (each :func:`item_text` of one value): an answer
    holding one is sent with the items as they are, never decoded and encoded again."""

    __slots__ = ("items",)

    def __init__(self, items: List[str]) -> None:
        self.items = items


_EMBED = secrets.token_hex(16)  # marks where a JSONItems goes; no text a client sent starts with it
_ENCODING: Dict[str, Any] = {"ensure_ascii": False, "allow_nan": False, "indent": None, "separators": (",", ":")}
_ITEM = json.JSONEncoder(check_circular=False, **_ENCODING)  # an item is decoded JSON: never a cycle


def json_text(value: Any) -> str:
    """The JSON text of an answer (compact, UTF-8 as is, no NaN), with each :class:`JSONItems`
    spliced in: the one encoding of every answer and of each item kept pre-encoded, so an item
    spliced in reads exactly as if it had been encoded in place."""
    embedded: List[str] = []

    def embed(item: Any) -> str:
        if not isinstance(item, JSONItems):
            raise TypeError(f"Object of type {type(item).__name__} is not JSON serializable")
        embedded.append("[" + ",".join(item.items) + "]")
        return f"{_EMBED}{len(embedded) - 1}"

    text = json.dumps(value, default=embed, **_ENCODING)
    if not embedded:
        return text
    head, *parts = text.split(f'"{_EMBED}')
    spliced = [head]
    for part in parts:  # each part: the item's number, the closing quote, what follows
        number, _, rest = part.partition('"')
        spliced += [embedded[int(number)], rest]
    return "".join(spliced)


def item_text(value: Any) -> str:
    """:func:`json_text` of a value without :class:`JSONItems` (a list item to keep), through one
    shared encoder: the same text, without making an encoder per item."""
    return _ITEM.encode(value)


def queue_id(pool: str, name: str) -> str:
    """A queue's id in the service's form (``queue-h4rzqodsqgfv``: "queue-" and 12 lower-case
    letters and digits), stable for a pool and name so it survives restarts."""
    number = int(hashlib.sha256(f"{pool}/{name}".encode()).hexdigest(), 16)
    digits = []
    for _ in range(12):
        number, rest = divmod(number, 36)
        digits.append(_ALNUM[rest])
    return "queue-" + "".join(digits)


def machine() -> Dict[str, int]:
    """This machine's CPUs and memory (GiB, rounded down): every local queue's capability."""
    import psutil

    return {"cpu": os.cpu_count() or 1, "memoryGi": psutil.virtual_memory().total >> 30}


_DECIMAL = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}


def quantity(value: Any, memory: bool = False) -> float:
    """A resource quantity as cores, or GiB with ``memory``: a plain number is in those units (as
    AIHC's bodies give them: ``8``, ``1.1``), a suffixed one is Kubernetes' (``500m``, ``16Gi``,
    ``16G``: bytes, for memory); the forms the create rules accept, anything else 0."""
    from job_chain.aihc.spec import quantity_parts

    parts = quantity_parts(str(value).strip())
    if parts is None:
        return 0.0
    number, suffix = parts
    if not suffix:
        return number
    return number * (_BINARY.get(suffix) or _DECIMAL[suffix]) / (2 ** 30 if memory else 1)


def allocated(jobs: Iterable[Dict[str, Any]]) -> Dict[str, float]:
    """CPUs and memory (Gi) the given active jobs asked for (``jobSpec.resources`` × replicas)."""
    cpu = memory = 0.0
    for job in jobs:
        spec = job["spec"].get("jobSpec") or {}
        replicas = spec.get("replicas") or 1
        for resource in spec.get("resources") or []:
            if isinstance(resource, dict) and resource.get("name") == "cpu":
                cpu += quantity(resource.get("quantity")) * replicas
            elif isinstance(resource, dict) and resource.get("name") == "memory":
                memory += quantity(resource.get("quantity"), memory=True) * replicas
    return {"cpu": cpu, "memoryGi": memory}


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


class Counts:
    """How many jobs of a pool or queue are pending, scheduled (in queue) and running."""

    def __init__(self, pending: int = 0, inqueue: int = 0, running: int = 0) -> None:
        self.pending, self.inqueue, self.running = pending, inqueue, running


# -- v1 (/api/v1/resourcepools...) ----------------------------------------------------------------
def pool_v1(pool: Dict[str, Any], busy_nodes: int) -> Dict[str, Any]:
    """Go SDK v1 ``ResourcePool``: ``metadata``, ``spec``, ``status`` (no GPUs here)."""
    created = iso_time(pool["created_at"])
    return {
        "metadata": {"createdAt": created, "name": pool["id"], "id": pool["id"], "updatedAt": created},
        "spec": {"k8sVersion": "", "associatedCpromIds": [], "associatedPfsId": "", "createdBy": "",
                 "description": "", "forbidDelete": False, "region": REGION},
        "status": {"gpuDetail": [], "gpuCount": {"total": 0, "used": 0},
                   "nodeCount": {"total": 1, "used": busy_nodes}, "phase": "running"},
        "maxRunningJobs": pool["capacity"],
    }


def node_v1(used: Dict[str, float]) -> Dict[str, Any]:
    """Go SDK v1 ``Node``: this machine (its CPUs and memory; allocated = active jobs' requests)."""
    import psutil

    return {
        "chargingType": "", "gpuAllocated": 0, "gpuTotal": 0, "gpuType": "", "instanceId": HOSTNAME,
        "instanceName": HOSTNAME, "intervention": "unintervened", "nodeName": HOSTNAME,
        "statusPhase": "ready", "zone": "", "region": REGION, "createdAt": iso_time(psutil.boot_time()),
        "gpuDescriptor": "", "cpuTotal": os.cpu_count() or 1, "cpuAllocated": int(used["cpu"]),
        "memoryTotal": psutil.virtual_memory().total, "memoryAllocated": int(used["memoryGi"] * (1 << 30)),
    }


def queue_v1(queue: Dict[str, Any], capacity: Optional[int], counts: Counts,
             used: Dict[str, float]) -> Dict[str, Any]:
    """Go SDK v1 ``Queue`` (resource lists are ``{"cpu": "8", "memory": "31"}``, memory in Gi,
    as Baidu's get_queue example writes them)."""
    whole = machine()

    def amounts(values: Mapping[str, float]) -> Dict[str, str]:
        return {"cpu": _number(values["cpu"]), "memory": _number(values["memoryGi"])}

    return {
        "name": queue["name"], "createdTime": iso_time(queue["created_at"]), "description": "",
        "parentQueue": ROOT_QUEUE, "queueType": "Regular", "state": "Open", "reclaimable": False,
        "capability": amounts(whole), "deserved": amounts(whole), "guarantee": {"cpu": "0", "memory": "0"},
        "allocated": amounts(used), "disableOversell": False, "running": counts.running,
        "inqueue": counts.inqueue, "pending": counts.pending, "opened": True, "maxRunningJobs": capacity,
    }


def page_v1(key: str, items: List[Dict[str, Any]], total: int, number: int, size: int) -> Dict[str, Any]:
    """The v1 pages (``ResourcePoolPage``, ``NodePage``, ``QueuePage``)."""
    return {key: items, "total": total, "orderBy": "createdAt", "order": "desc", "pageNo": number,
            "pageSize": size}


# -- v2 (?action=Describe…) -------------------------------------------------------------------------
def pool_v2(pool: Dict[str, Any]) -> Dict[str, Any]:
    """Go SDK v2 ``ResourcePool`` (flat; ``phase``, ``type``, ``region``, ``nodeNum``)."""
    created = iso_time(pool["created_at"])
    return {"resourcePoolId": pool["id"], "type": POOL_TYPE, "name": pool["id"], "region": REGION,
            "description": "", "createdAt": created, "updatedAt": created, "phase": "running",
            "k8sVersion": "", "nodeNum": 1, "maxRunningJobs": pool["capacity"]}


def queue_v2(queue: Dict[str, Any], capacity: Optional[int], counts: Counts,
             used: Dict[str, float]) -> Dict[str, Any]:
    """Go SDK v2 ``QueueSpec`` (quotas as ``ResourceAmount``: ``milliCPUcores``, ``memoryGi``)."""
    whole = machine()

    def amounts(values: Mapping[str, float]) -> Dict[str, Any]:
        return {"milliCPUcores": _number(values["cpu"] * 1000), "memoryGi": _number(values["memoryGi"]),
                "acceleratorCardList": []}

    created = iso_time(queue["created_at"])
    return {
        "queueId": queue_id(queue["pool"], queue["name"]), "queueName": queue["name"], "description": "",
        "queueType": "Regular", "resourcePoolId": queue["pool"], "createdAt": created, "updatedAt": created,
        "parentQueue": ROOT_QUEUE, "opened": True, "reclaimable": False, "preemptable": False,
        "disableOversell": False, "capability": amounts(whole), "deserved": amounts(whole),
        "guarantee": amounts({"cpu": 0, "memoryGi": 0}), "allocated": amounts(used),
        "runningJobs": counts.running, "inqueueJobs": counts.inqueue, "pendingJobs": counts.pending,
        "maxRunningJobs": capacity,
    }
