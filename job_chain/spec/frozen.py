"""A run owns a copy of what it runs: the chain frozen at start, and each revision a resume made.

``freeze`` turns a loaded chain into plain JSON — every step's body with its script's *content*
(not its file name), its ``jobChain`` settings as written (``dependsOn`` by name) — and
``thaw`` turns it back into a :class:`~job_chain.spec.model.Chain` without reading any file.
Every hop, retry, join, handler and notification of a run works from this copy, so editing,
breaking or deleting the chain file or its scripts changes nothing in a running run.

``revise`` is the one way a run changes: ``resume`` compares the file with the frozen copy
*by step name* and applies the difference to the steps that did not succeed.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

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
        if step.first_attempt != 1:
            item["firstAttempt"] = step.first_attempt
        if step.excluded:
            item["excluded"] = step.excluded
        if step.changed_in != 1:
            item["changedIn"] = step.changed_in
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
    return frozen


def digest(frozen: Dict[str, Any]) -> str:
    """The content hash of a frozen chain (sha256 of its canonical JSON)."""
    import hashlib

    text = json.dumps(frozen, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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
            point = item.get("point") or {}
            steps.append(Step(index=index, body=body, script=str(body["jobSpec"]["command"]),
                              script_origin=str(item.get("scriptOrigin") or "inline"), settings_raw=settings,
                              first_attempt=int(item.get("firstAttempt", 1)), excluded=item.get("excluded"),
                              changed_in=int(item.get("changedIn", 1)), group=str(point.get("group") or ""),
                              point={str(k): str(v) for k, v in (point.get("values") or {}).items()},
                              **step_fields(parsed)))
            raw[index] = parsed.graph
        check_graph(steps, raw, problems, graph=bool(data.get("graph")))
        api = {"version": data["apiVersion"]} if data.get("apiVersion") else {}
        chain = Chain(path=path, pool=str(data["pool"]), steps=steps, api_config=api,
                      scrips_path=data.get("scripsPath"), config_path=data.get("configPath"),
                      notify=list(data.get("notify") or []), graph=bool(data.get("graph")),
                      revision=revision, digest=digest_, params=dict(data.get("params") or {}),
                      params_set=dict(data.get("paramsSet") or {}), max_running=data.get("maxRunning"))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise FrozenDamaged(f"{type(exc).__name__}: {exc}") from None
    if problems:
        raise FrozenDamaged(problems[0])
    return chain


# -- changing a run on purpose ------------------------------------------------------------------
@dataclass
class Change:
    """One step's difference between the frozen run and the file, and what resume does with it."""

    name: str
    kind: str  # "added" | "removed" | "changed"
    what: List[str] = field(default_factory=list)  # "script content (train.sh)", "jobSpec.image", …
    applied: bool = True
    note: str = ""  # why not applied, or how it runs

    def line(self) -> str:
        sign = {"added": "+", "removed": "-", "changed": "~"}[self.kind]
        text = f"{sign} {self.name}: {self.kind}"
        if self.what:
            text += " (" + ", ".join(self.what) + ")"
        if self.note:
            text += f" — {self.note}"
        return text

    def as_json(self) -> Dict[str, Any]:
        return {"step": self.name, "kind": self.kind, "what": self.what, "applied": self.applied,
                "note": self.note or None}


def _deps(chain: Chain, step: Step) -> List[str]:
    return [chain.step(d).name for d in step.depends_on if chain.step(d) is not None]  # type: ignore[union-attr]


def _paths(old: Any, new: Any, where: str, out: List[str], limit: int = 6) -> None:
    """JSON paths where ``old`` and ``new`` differ (objects compared key by key, the rest whole)."""
    if len(out) >= limit or old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            _paths(old.get(key), new.get(key), f"{where}.{key}" if where else str(key), out, limit)
        return
    out.append(where or "(whole)")


def step_differences(old_chain: Chain, old: Step, new_chain: Chain, new: Step) -> List[str]:
    """What differs between two versions of one step, in words: body paths, settings, script, needs."""
    what: List[str] = []
    if old.script != new.script:
        origin = new.script_origin if new.script_origin != "inline" else "jobSpec.command"
        what.append(f"script content ({origin})" if new.script_origin != "inline" else "jobSpec.command")
    body_old = {k: v for k, v in old.body.items() if k != "jobSpec"}
    body_new = {k: v for k, v in new.body.items() if k != "jobSpec"}
    spec_old = {k: v for k, v in (old.body.get("jobSpec") or {}).items() if k != "command"}
    spec_new = {k: v for k, v in (new.body.get("jobSpec") or {}).items() if k != "command"}
    paths: List[str] = []
    _paths(body_old, body_new, "", paths)
    _paths(spec_old, spec_new, "jobSpec", paths)
    what.extend(paths)
    settings_old = {k: v for k, v in old.settings_raw.items() if k != "dependsOn"}
    settings_new = {k: v for k, v in new.settings_raw.items() if k != "dependsOn"}
    setting_paths: List[str] = []
    _paths(settings_old, settings_new, SETTINGS_KEY, setting_paths)
    what.extend(setting_paths)
    if _deps(old_chain, old) != _deps(new_chain, new):
        was = ", ".join(_deps(old_chain, old)) or "nothing"
        what.append(f"needs {', '.join(_deps(new_chain, new)) or 'nothing'} (was {was})")
    return what


def _descendants(chain: Chain, names: Iterable[str]) -> Set[str]:
    found: Set[str] = set()
    todo = [chain.named(n) for n in names if chain.named(n) is not None]
    while todo:
        step = todo.pop()
        for child in chain.dependents(step.index):  # type: ignore[union-attr]
            if child.name not in found:
                found.add(child.name)
                todo.append(child)
    return found


def _ancestors(chain: Chain, step: Step) -> Set[str]:
    found: Set[str] = set()
    todo = [step]
    while todo:
        current = todo.pop()
        for dep in current.depends_on:
            parent = chain.step(dep)
            if parent is not None and parent.name not in found:
                found.add(parent.name)
                todo.append(parent)
    return found


def revise(old: Chain, new: Chain, *, done: Set[str], latest: Dict[str, int], rerun: Iterable[str],
           revision: int) -> Tuple[Chain, List[Change]]:
    """The run's next revision: ``new`` (the file now) applied to ``old`` (the frozen run) by name.

    ``done``: steps that succeeded in the run (or were excluded from it); ``latest``: each
    step's highest attempt so far. A succeeded step keeps its frozen content unless named in
    ``rerun``, which re-runs it and everything that depends on it with what the file says now.
    A step added upstream of a succeeded one does not run in this run. Nothing borrows another
    step's jobs: history follows names.
    """
    from dataclasses import replace

    again = set(rerun)
    again |= _descendants(new, again)
    changes: List[Change] = []
    steps: List[Step] = []
    kept_done = {n for n in done if n not in again}
    params_changed = old.params != new.params
    for fresh in new.steps:
        before = old.named(fresh.name)
        if before is None:
            step = replace(fresh, body=copy.deepcopy(fresh.body), changed_in=revision,
                           first_attempt=max(1, latest.get(fresh.name, 0) + 1))
            downstream = _descendants(new, [fresh.name]) & kept_done
            change = Change(fresh.display, "added")
            if downstream and not fresh.is_handler:
                step.excluded = (f"added in revision {revision} upstream of steps that had already succeeded "
                                 f"({', '.join(sorted(downstream))}): it does not run in this run")
                change.applied, change.note = False, "upstream of succeeded steps: it does not run in this run"
            changes.append(change)
            steps.append(step)
            continue
        what = step_differences(old, before, new, fresh)
        if fresh.name in kept_done and fresh.name not in again:
            step = replace(before, index=fresh.index, depends_on=fresh.depends_on)
            if what:
                changes.append(Change(fresh.display, "changed", what, applied=False,
                                      note=f"already succeeded: not applied (resume --rerun {fresh.name} applies "
                                           "it and re-runs what depends on it)"))
        else:
            content = params_changed or any(not w.startswith("needs ") for w in what)  # a new request: a new token
            changed_in = revision if content else before.changed_in
            first = before.first_attempt
            if fresh.name in again:
                first = latest.get(fresh.name, 0) + 1
            step = replace(fresh, body=copy.deepcopy(fresh.body), first_attempt=first, excluded=before.excluded,
                           changed_in=changed_in)
            if fresh.name in again:
                changes.append(Change(fresh.display, "changed", what, note=f"re-runs as attempt {first}"))
            elif what:
                changes.append(Change(fresh.display, "changed", what))
        steps.append(step)
    for gone in old.steps:
        if new.named(gone.name) is None:
            changes.append(Change(gone.display, "removed"))
    revised = Chain(path=old.path, pool=new.pool, steps=steps, api_config=dict(old.api_config),
                    scrips_path=old.scrips_path, config_path=old.config_path, notify=new.notify, graph=new.graph,
                    revision=revision, params=dict(new.params), params_set=dict(new.params_set),
                    max_running=new.max_running)
    if params_changed:
        changes.append(Change("params", "changed", [f"{n}: {old.params.get(n)} -> {new.params.get(n)}" for n in
                                                    sorted(set(old.params) | set(new.params), key=str)
                                                    if old.params.get(n) != new.params.get(n)],
                              note="for every step that has not succeeded (succeeded steps keep the values they "
                                   "ran with; --rerun NAME runs one again)"))
    if old.max_running != new.max_running:
        changes.append(Change("maxRunning", "changed", [f"{old.max_running} -> {new.max_running}"]))
    if old.notify != new.notify:
        changes.append(Change("notify", "changed", ["notify"]))
    if old.pool != new.pool:
        changes.append(Change("resourcePoolId", "changed", [f"{old.pool} -> {new.pool}"], applied=False,
                              note="a run stays in its pool: not applied"))
        revised.pool = old.pool
    return revised, changes


def ancestors_of(chain: Chain, name: str) -> Set[str]:
    """Names of the steps ``name`` waits for, directly or not (for messages)."""
    step = chain.named(name)
    return _ancestors(chain, step) if step is not None else set()
