"""A run owns a copy of what it runs: the chain frozen at start, and each revision a resume made.

``freeze`` turns a loaded chain into plain JSON — every step's body with its script's *content*
(not its file name), its ``jobChain`` settings as written (``dependsOn`` by name) — and
``thaw`` turns it back into a :class:`~job_chain.spec.model.Chain` without reading any file.
Every hop, retry, join, handler and notification of a run works from this copy, so editing,
breaking or deleting the chain file or its scripts changes nothing in a running run.

How a resume changes a run on purpose is :mod:`job_chain.rules.revise`.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Optional, Tuple

from job_chain.spec.model import SETTINGS_KEY, Chain, Step

FORMAT = 1


def freeze(chain: Chain, *, steps: Optional[Iterable[Step]] = None) -> Dict[str, Any]:
    """The chain as plain JSON (no secret: of ``api_config`` only the API version is kept)."""
    names = {s.index: s.name for s in chain.steps}
    out = []
    for step in (chain.steps if steps is None else steps):
        settings = {k: v for k, v in step.settings_raw.items() if k != "dependsOn"}
        if chain.graph and step.depends_on:
            settings["dependsOn"] = [names[d] for d in step.depends_on]
        item: Dict[str, Any] = {"index": step.index, "name": step.name, "body": step.body,
                                SETTINGS_KEY: settings, "scriptOrigin": step.script_origin}
        if step.script_runner:
            item["scriptRunner"] = step.script_runner
        if step.first_attempt != 1:
            item["firstAttempt"] = step.first_attempt
        if step.excluded:
            item["excluded"] = step.excluded
        if step.renamed_from:
            item["renamedFrom"] = step.renamed_from
        if step.changed_in != 1:
            item["changedIn"] = step.changed_in
        if step.removed_in:
            item["removedIn"] = step.removed_in
        if step.group:
            item["point"] = {"group": step.group, "values": step.point}
        out.append(item)
    frozen = {"format": FORMAT, "pool": chain.pool, "apiVersion": chain.api_config.get("version"),
              "scripsPath": chain.scrips_path, "configPath": chain.config_path, "notify": chain.notify,
              "graph": chain.graph, "steps": out}
    if chain.params:
        frozen.update(params=chain.params, paramsSet=chain.params_set)
    if chain.max_running:
        frozen["maxRunning"] = chain.max_running
    if chain.cache_dir:
        frozen["cacheDir"] = chain.cache_dir
    if chain.engine != "aihc":  # an AIHC run's frozen copy (and digest) is as it was before engines
        frozen.update(engine=chain.engine, slurm=chain.slurm)
    return frozen


def digest(frozen: Dict[str, Any]) -> str:
    """The content hash of a frozen chain (sha256 of its canonical JSON)."""
    import hashlib

    text = json.dumps(frozen, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def placed(data: Dict[str, Any]) -> Tuple[str, Optional[str]]:
    """(engine, API version) of a frozen chain, read without its steps: what a client for its run needs."""
    return str(data.get("engine") or "aihc"), (str(data["apiVersion"]) if data.get("apiVersion") else None)


class FrozenDamaged(ValueError):
    """A frozen copy that cannot be read back (hand-edited or cut short)."""


def thaw(data: Dict[str, Any], path: str, *, revision: int = 0, digest_: str = "") -> Chain:
    """Rebuild the chain a run runs from its frozen copy (no file is read)."""
    from job_chain.spec.graph import GraphSettings, check_graph
    from job_chain.spec.settings import read_step_settings, step_fields

    problems: List[str] = []
    try:
        steps: List[Step] = []
        raw: Dict[int, GraphSettings] = {}
        for position, item in enumerate(data["steps"]):
            index = int(item.get("index", position))
            settings = item.get(SETTINGS_KEY) or {}
            parsed = read_step_settings(settings, f"steps[{position}].{SETTINGS_KEY}", problems)
            body = item["body"]
            point = item.get("point")
            steps.append(Step(index=index, body=body, script=str(body["jobSpec"]["command"]),
                              script_origin=str(item.get("scriptOrigin") or "inline"),
                              script_runner=str(item.get("scriptRunner") or ""), settings_raw=settings,
                              first_attempt=int(item.get("firstAttempt", 1)), excluded=item.get("excluded"),
                              renamed_from=item.get("renamedFrom"),
                              changed_in=int(item.get("changedIn", 1)), removed_in=int(item.get("removedIn", 0)),
                              group=str(point.get("group") or "") if point else "",
                              point={str(k): str(v) for k, v in (point.get("values") or {}).items()} if point else {},
                              **step_fields(parsed)))
            raw[index] = parsed.graph
        check_graph(steps, raw, problems, graph=bool(data.get("graph")))
        engine, version = placed(data)
        api = {"version": version} if version else {}
        chain = Chain(path=path, pool=str(data["pool"]), steps=steps, api_config=api,
                      scrips_path=data.get("scripsPath"), config_path=data.get("configPath"),
                      notify=list(data.get("notify") or []), graph=bool(data.get("graph")),
                      revision=revision, digest=digest_, params=dict(data.get("params") or {}),
                      params_set=dict(data.get("paramsSet") or {}), max_running=data.get("maxRunning"),
                      cache_dir=data.get("cacheDir"),
                      engine=engine, slurm=dict(data.get("slurm") or {}))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise FrozenDamaged(f"{type(exc).__name__}: {exc}") from None
    if problems:
        raise FrozenDamaged(problems[0])
    return chain
