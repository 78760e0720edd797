"""Rebuild a create-job body from an existing job (what SCM's "clone job" offers)."""

from __future__ import annotations

from typing import Any, Dict, List

# Variables the platform (or the local server) adds to every pod; not part of the user's spec.
INJECTED_ENVS = frozenset({
    "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "AIHC_JOB_NAME", "AIHC_JOB_ID",
    "AIHC_TENSORBOARD_LOG_PATH", "POD_NAME", "PYTHONUNBUFFERED", "NVIDIA_VISIBLE_DEVICES",
    "LOGLEVEL", "NCCL_DEBUG", "AIHC_HOST", "JOB_CHAIN_CREDENTIALS", "PATH",
})
PLATFORM_LABEL_PREFIX = "aijob.cce.baidubce.com/"


def _user_envs(job: Dict[str, Any]) -> List[Dict[str, str]]:
    pods = ((job.get("podList") or {}).get("pods")) or []
    if not pods:
        return []
    return [
        {"name": e["name"], "value": e.get("value", "")}
        for e in pods[0].get("envs") or []
        if e.get("name") and e["name"] not in INJECTED_ENVS and not e["name"].startswith("BCCL_")
    ]


def clone_body(job: Dict[str, Any], new_name: str) -> Dict[str, Any]:
    """A create-job body that re-runs ``job`` (a job-detail answer) under ``new_name``."""
    pods = ((job.get("podList") or {}).get("pods")) or []
    spec: Dict[str, Any] = {
        "command": job.get("command", ""),
        "image": job.get("image", ""),
        "replicas": int(job.get("replicas") or len(pods) or 1),
        "envs": _user_envs(job),
    }
    if job.get("resources"):
        spec["resources"] = job["resources"]
    if job.get("enableRDMA") is not None:
        spec["enableRDMA"] = bool(job["enableRDMA"])
    body: Dict[str, Any] = {
        "name": new_name,
        "queue": job.get("queue") or "default",
        "priority": job.get("priority") or "normal",
        "jobFramework": job.get("jobFramework") or "PyTorchJob",
        "jobSpec": spec,
        "datasources": job.get("datasources") or [],
        "labels": [
            label for label in job.get("labels") or []
            if not str(label.get("key", "")).startswith(PLATFORM_LABEL_PREFIX)
        ],
    }
    if job.get("enableFaultTolerance"):
        body["faultTolerance"] = True
    return body
