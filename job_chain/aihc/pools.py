"""Resource pools and queues as one row each, whichever API version answered.

v1 answers a pool nested (``metadata``/``spec``/``status``) and a queue by ``name``; v2 answers
them flat (``resourcePoolId``, ``phase``, ``nodeNum``; ``queueId``, ``queueName``, ``runningJobs``),
as the Go SDK's types describe them. ``maxRunningJobs`` is the local server's own (its
``--pool``/``--queue`` capacity); AIHC bounds queues by resources instead.
"""

from __future__ import annotations

from typing import Any, Dict


def pool_row(pool: Dict[str, Any]) -> Dict[str, Any]:
    """``{"resourcePoolId", "name", "type", "phase", "region", "nodes", "maxRunningJobs"}``."""
    if isinstance(pool.get("metadata"), dict):  # v1
        meta, spec, status = pool["metadata"], pool.get("spec") or {}, pool.get("status") or {}
        return {"resourcePoolId": meta.get("id"), "name": meta.get("name"), "type": "",
                "phase": status.get("phase"), "region": spec.get("region"),
                "nodes": (status.get("nodeCount") or {}).get("total"), "maxRunningJobs": pool.get("maxRunningJobs")}
    return {"resourcePoolId": pool.get("resourcePoolId"), "name": pool.get("name"), "type": pool.get("type"),
            "phase": pool.get("phase"), "region": pool.get("region"), "nodes": pool.get("nodeNum"),
            "maxRunningJobs": pool.get("maxRunningJobs")}


def queue_row(queue: Dict[str, Any]) -> Dict[str, Any]:
    """``{"queueName", "queueId", "type", "opened", "running", "inqueue", "pending", "maxRunningJobs"}``."""
    if "queueName" in queue:  # v2
        return {"queueName": queue.get("queueName"), "queueId": queue.get("queueId"), "type": queue.get("queueType"),
                "opened": queue.get("opened"), "running": queue.get("runningJobs"),
                "inqueue": queue.get("inqueueJobs"), "pending": queue.get("pendingJobs"),
                "maxRunningJobs": queue.get("maxRunningJobs")}
    opened = queue.get("opened")
    return {"queueName": queue.get("name"), "queueId": "", "type": queue.get("queueType"),
            "opened": queue.get("state") == "Open" if opened is None else opened, "running": queue.get("running"),
            "inqueue": queue.get("inqueue"), "pending": queue.get("pending"),
            "maxRunningJobs": queue.get("maxRunningJobs")}
