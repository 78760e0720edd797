"""A look at an ended run, kept whole: what :func:`job_chain.session.look.status` answered, as JSON
and back, so that the next look at a run whose record has not changed since reads one file instead
of thawing its chain and working out every step again (a 5,000-step run: one file, not the chain,
the attempts and the rules).

When such a kept look stands in for a new one is decided where the run's summary's is
(:func:`job_chain.record.summary.usable`; the file sits beside the summary, with the same basis):
an ended run cannot change without its record changing. This module only turns a
:class:`~job_chain.status.types.RunStatus` into JSON and back, exactly: :func:`load` of
:func:`dump` equals the status dumped (``tests/test_run_summaries.py`` checks every field, so a
field added to the types without being kept here fails there). Anything it does not recognise
gives None: the caller looks at the run again.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import MISSING, fields
from functools import lru_cache
from typing import TYPE_CHECKING, AbstractSet, Any, Callable, Dict, List, Optional, Tuple

from job_chain.engine.states import FAILED
from job_chain.status.types import Attempt, Outcome, RunStatus, StepStatus

if TYPE_CHECKING:  # read when a kept look holds a failure (a cold look of a run that never failed: never)
    from job_chain.failures.classify import Failure

VERSION = 1
_WHEN = frozenset(("started", "finished", "running"))


def _iso(when: _dt.datetime, said: Dict[_dt.datetime, str]) -> str:
    text = said.get(when)
    if text is None:
        text = said[when] = when.isoformat()  # a run's times repeat (a second holds many): written once each
    return text


def _out(value: Any, name: str, said: Dict[_dt.datetime, str]) -> Any:
    if name in _WHEN:
        return _iso(value, said)
    if name == "failure":
        return value.to_record()
    if name in ("attempts", "history"):
        return [_fields_of(a, said) for a in value]
    if name == "notes":
        return {str(k): v for k, v in value.items()}
    if name == "outcome":
        return value.value
    return value


def _fields_of(item: Any, said: Dict[_dt.datetime, str]) -> Dict[str, Any]:
    """The fields of a dataclass that differ from their defaults (an empty list or dict is a default),
    JSON-ready (``said``: each time as text, once per dump)."""
    out: Dict[str, Any] = {}
    values = item.__dict__
    for name, default, empty in _shape(type(item)):
        value = values[name]
        if name == "steps":
            out["steps"] = [_fields_of(s, said) for s in value]
        elif not (value == default or (empty and not value)):
            out[name] = None if value is None else _out(value, name, said)  # (a None whose default is not)
    return out


_SHAPES: Dict[type, List[Tuple[str, Any, bool]]] = {}
_REQUIRED = object()  # the "default" of a field that has none: no value equals it


def _shape(kind: type) -> List[Tuple[str, Any, bool]]:
    """(name, default, whether its default is an empty container) of each field of ``kind``; a field
    without a default gets :data:`_REQUIRED`, which no value equals, so it is always kept."""
    if kind not in _SHAPES:
        _SHAPES[kind] = [(f.name, _REQUIRED if f.default is MISSING and f.default_factory is MISSING else f.default,
                          f.default_factory is not MISSING) for f in fields(kind)]
    return _SHAPES[kind]


def complete(status: RunStatus, settled: AbstractSet[str]) -> bool:
    """Whether a look has nothing left to find out that a later look would: every failed attempt's
    cause (a job whose logs could not be read is explained by the next look) and every job settled
    (``settled``: those a later look does not ask the API about again; the others, say one whose
    events did not answer, it does). Only such a look is kept whole: kept, it would stand in for
    the looks that would have found them."""
    return all(not a.job_id or (a.job_id in settled and (a.failure is not None or a.status not in FAILED))
               for s in status.steps for a in s.history + s.attempts)


def dump(status: RunStatus) -> Dict[str, Any]:
    """The look as JSON (its fields that differ from their defaults)."""
    return {"version": VERSION, "status": _fields_of(status, {})}


@lru_cache(maxsize=4096)
def _when(text: str) -> _dt.datetime:
    return _dt.datetime.fromisoformat(text)  # a run's times repeat (a second holds many): parsed once each


def _failure(data: Any) -> Failure:
    from job_chain.failures.classify import Failure

    found = Failure.from_record(data)
    if found is None:
        raise ValueError("failure")
    return found


def _attempts(items: List[Dict[str, Any]]) -> List[Attempt]:
    return [_made(Attempt, _converted(a)) for a in items]


def _made(kind: Any, values: Dict[str, Any]) -> Any:
    """An instance of dataclass ``kind`` with ``values`` and the defaults of the fields they leave out,
    made without its ``__init__`` (a frozen one sets each field through ``object.__setattr__``: a
    third of a 5,000-step load). Its fields are set exactly as ``__init__`` would set them: these
    classes have no ``__post_init__``; a field without a default that ``values`` lacks is a
    :class:`KeyError` (what :func:`dump` made always has them)."""
    made = object.__new__(kind)
    state = made.__dict__
    for name, default, empty in _shape(kind):
        if name not in values:
            if default is _REQUIRED:
                raise KeyError(name)  # not a look this module kept
            state[name] = _factory(kind, name)() if empty else default
    state.update(values)
    return made


def _factory(kind: Any, name: str) -> Callable[[], Any]:
    return kind.__dataclass_fields__[name].default_factory


_IN: Dict[str, Callable[[Any], Any]] = {
    "started": _when, "finished": _when, "running": _when, "failure": _failure, "attempts": _attempts,
    "history": _attempts, "notes": lambda v: {int(k): t for k, t in v.items()},
    "resume_from": lambda v: (int(v[0]), str(v[1])), "outcome": Outcome}


def _converted(data: Dict[str, Any]) -> Dict[str, Any]:
    """``data`` (a kept dataclass's fields, parsed for this load) with its values turned back into
    the types they were (in place: no copy of 5,000 steps)."""
    for name, value in data.items():
        turn = _IN.get(name)
        if turn is not None and value is not None:
            data[name] = turn(value)
    return data


def load(data: Any, chain_path: str) -> Optional[RunStatus]:
    """The look :func:`dump` kept (its chain named by ``chain_path``: the file its runs are kept
    beside now), or None when ``data`` is not one this version kept. ``data`` is used up (its
    values are turned into the look's)."""
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("status"), dict):
        return None
    try:
        kept = data["status"]
        steps: List[StepStatus] = [_made(StepStatus, _converted(s)) for s in kept.pop("steps")]
        found = _made(RunStatus, dict(_converted(kept), steps=steps))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None
    found.chain_path = chain_path
    return found
