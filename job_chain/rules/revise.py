"""How a run changes on purpose: ``resume`` compares the chain file with the run's frozen copy *by
step name* (:func:`revise`) and applies the difference to the steps that did not succeed, as the
run's next revision. History follows names: nothing borrows another step's jobs."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from job_chain.rules.state import next_attempt
from job_chain.spec.model import SETTINGS_KEY, Chain, Step


@dataclass
class Change:
    """One step's difference between the frozen run and the file, and what resume does with it."""

    name: str
    kind: str  # "added" | "removed" | "changed" | "renamed" (in the file) | "rerun" (asked for with --rerun only)
    what: List[str] = field(default_factory=list)  # "script content (train.sh)", "jobSpec.image", …
    applied: bool = True
    note: str = ""  # why not applied, or how it runs

    def line(self) -> str:
        sign = {"added": "+", "removed": "-", "changed": "~", "renamed": "~", "rerun": "*"}[self.kind]
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
    if old.script_runner != new.script_runner:
        what.append(f"script runner ({new.script_runner or 'its #! line'}, was {old.script_runner or 'its #! line'})")
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
           revision: int, held: Optional[Dict[str, str]] = None,
           renamed: Optional[Dict[str, str]] = None) -> Tuple[Chain, List[Change]]:
    """The run's next revision: ``new`` (the file now) applied to ``old`` (the frozen run) by name.

    ``done``: steps that succeeded in the run (or were excluded from it); ``latest``: each
    step's highest attempt so far. A succeeded step keeps its frozen content unless named in
    ``rerun``, which re-runs it and everything that depends on it with what the file says now.
    A step added upstream of a succeeded one does not run in this run. Nothing borrows another
    step's jobs: history follows names.

    A step that ran in the run and is no longer in the file stays in it as history (excluded,
    ``removed_in``): its attempts, logs and GPU-hours are the run's. ``renamed`` (new name -> old
    name, ``resume --rename OLD=NEW``) says a step is the same one under a new name: when the old
    one succeeded, the new one does not run again (and what needs it may start).

    ``held`` (a run still going): the steps that have been submitted in it, each with why a change
    cannot reach it now ("running", …); they keep their frozen content, and a removed one stays.
    Every other step takes the file's content but keeps its client token (``changed_in``): a hop
    that read the previous revision at the same moment creates it with the same token, so it is
    created once whichever revision its creator read (docs/graphs.md, "Changing a going run").
    """
    from dataclasses import replace

    again = set(rerun)
    again |= _descendants(new, again)
    changes: List[Change] = []
    steps: List[Step] = []
    kept_done = {n for n in done if n not in again}
    params_changed = old.params != new.params
    renamed = dict(renamed or {})
    for fresh in new.steps:
        before = old.named(fresh.name)
        if before is None and fresh.name in renamed:
            was = renamed[fresh.name]
            step = replace(fresh, body=copy.deepcopy(fresh.body), changed_in=revision, renamed_from=was)
            if was in kept_done:
                step.excluded = f"renamed from {was} in revision {revision}; {was} succeeded in this run"
            changes.append(Change(fresh.display, "renamed", [f"from {was}"],
                                  note="it does not run again: its old name succeeded" if was in kept_done else
                                  "it runs under its new name (its old name's attempts stay as history)"))
            steps.append(step)
            continue
        if before is None:
            step = replace(fresh, body=copy.deepcopy(fresh.body), changed_in=revision,
                           first_attempt=next_attempt(fresh, latest.get(fresh.name)))
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
        if held is not None and fresh.name in held and fresh.name not in kept_done:
            step = replace(before, index=fresh.index, depends_on=fresh.depends_on)
            if what:
                changes.append(Change(fresh.display, "changed", what, applied=False,
                                      note=f"{held[fresh.name]}: not applied (it runs what it was submitted with; "
                                           "stop the run and resume to apply it)"))
            steps.append(step)
            continue
        if fresh.name in kept_done and fresh.name not in again:
            step = replace(before, index=fresh.index, depends_on=fresh.depends_on)
            if what:
                changes.append(Change(fresh.display, "changed", what, applied=False,
                                      note=f"already succeeded: not applied (resume --rerun {fresh.name} applies "
                                           "it and re-runs what depends on it)"))
        else:
            content = params_changed or any(not w.startswith("needs ") for w in what)  # a new request: a new token
            changed_in = revision if content and held is None else before.changed_in
            first = before.first_attempt
            if fresh.name in again:
                first = next_attempt(before, latest.get(fresh.name))
            step = replace(fresh, body=copy.deepcopy(fresh.body), first_attempt=first, excluded=before.excluded,
                           changed_in=changed_in)
            if fresh.name in again:  # asked for (--rerun), not a change in the file unless it has one
                changes.append(Change(fresh.display, "changed" if what else "rerun", what,
                                      note=f"re-runs as attempt {first}"))
            elif what:
                changes.append(Change(fresh.display, "changed", what))
        steps.append(step)
    new_names = {old_name: new_name for new_name, old_name in renamed.items()}
    for gone in old.steps:
        if new.named(gone.name) is not None:
            continue
        ran = bool(latest.get(gone.name))  # it has attempts in this run
        if gone.removed_in or (held is None and ran and not gone.is_handler):  # it ran: it stays, as history
            why = (f"renamed to {new_names[gone.name]} in revision {revision}" if gone.name in new_names else
                   f"removed in revision {revision}")
            steps.append(replace(gone, index=max(s.index for s in steps) + 1 if steps else 0, depends_on=(),
                                 excluded=gone.excluded if gone.removed_in else why,
                                 removed_in=gone.removed_in or revision))
            if not gone.removed_in and gone.name not in new_names:
                changes.append(Change(gone.display, "removed", note="it ran in this run: its history stays"))
            continue
        if held is not None and gone.name in held:  # it runs in this run: it stays in it
            names = {s.name: s.index for s in steps}
            needs = tuple(names[p.name] for p in (old.step(d) for d in gone.depends_on)
                          if p is not None and p.name in names)
            steps.append(replace(gone, index=max(s.index for s in steps) + 1 if steps else 0, depends_on=needs))
            changes.append(Change(gone.display, "removed", applied=False,
                                  note=f"{held[gone.name]}: it stays in this run (stop the run and resume to "
                                       "remove it)"))
        else:
            changes.append(Change(gone.display, "removed"))
    kept = len(steps) > len(new.steps)  # steps that left the file stand apart: the line is said explicitly
    revised = Chain(path=old.path, pool=new.pool, steps=steps, api_config=dict(old.api_config),
                    scrips_path=old.scrips_path, config_path=old.config_path, notify=new.notify,
                    graph=new.graph or kept,
                    revision=revision, params=dict(new.params), params_set=dict(new.params_set),
                    max_running=new.max_running, engine=old.engine,
                    slurm=dict(new.slurm if new.engine == old.engine else old.slurm))
    if new.engine != old.engine:  # a run's jobs stay on the engine it started on
        changes.append(Change("engine", "changed", [f"{old.engine} -> {new.engine}"], applied=False,
                              note="a run stays on the engine it started on: start a new run there"))
    if params_changed:
        changes.append(Change("params", "changed", [f"{n}: {old.params.get(n)} -> {new.params.get(n)}" for n in
                                                    sorted(set(old.params) | set(new.params), key=str)
                                                    if old.params.get(n) != new.params.get(n)],
                              note="for every step that has not succeeded (succeeded steps keep the values they "
                                   "ran with; --rerun NAME runs one again)"))
    if old.max_running != new.max_running and held is not None:
        changes.append(Change("maxRunning", "changed", [f"{old.max_running} -> {new.max_running}"], applied=False,
                              note="its slots are in use while the run goes: not applied (stop and resume)"))
        revised.max_running = old.max_running
    elif old.max_running != new.max_running:
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
