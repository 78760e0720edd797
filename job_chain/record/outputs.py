"""Outputs: ``KEY=VALUE`` lines a step appends to ``$JOB_CHAIN_OUTPUTS``, handed to its descendants.

When a step's script exits 0, its job's tail passes the file to ``advance``, which checks it
(bounded: :data:`MAX_KEYS` keys, :data:`MAX_BYTES` in all) and, before recording the success:

* in job mode writes ``outputs-<step>-attempt-N.json`` into the run record, where every later
  submission (a hop, a join, ``resume``) reads it;
* in every mode prints one line to the job's log, ``job-chain: outputs of <step>: {json}``. An
  inline run has no record: the snapshot each step hands on carries the outputs it knows, and a
  join reads the other branches' outputs from that line of their logs (the API keeps logs).

A file that breaks the rules makes the step fail (exit :data:`EXIT_BAD_OUTPUTS`): its
descendants would otherwise start with values it did not mean.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, Optional, Set, Tuple

from job_chain.record.layout import OUTPUTS, fact_name
from job_chain.spec.model import Chain, Step
from job_chain.spec.params import NAME_RE, step_refs

MAX_KEYS = 64
MAX_BYTES = 16384  # of one step's outputs (keys and values, UTF-8)
MAX_FILE = 4 * MAX_BYTES  # what is read of the file at all
EXIT_BAD_OUTPUTS = 65  # EX_DATAERR: the script succeeded, its outputs file is unusable
MARKER = "job-chain: outputs of "

Outputs = Dict[str, Dict[str, str]]  # step name -> its outputs


def parse(text: str) -> Tuple[Dict[str, str], Optional[str]]:
    """The outputs in ``text`` (a later line wins over an earlier one with the same key), or why not."""
    out: Dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not NAME_RE.fullmatch(key):
            return {}, (f"$JOB_CHAIN_OUTPUTS line {number}: {line[:60]!r} is not KEY=VALUE (KEY: letters, digits "
                        "and '_', not starting with a digit)")
        out[key] = value
    if len(out) > MAX_KEYS:
        return {}, f"$JOB_CHAIN_OUTPUTS has {len(out)} keys; at most {MAX_KEYS}"
    size = sum(len(k.encode("utf-8")) + len(v.encode("utf-8")) for k, v in out.items())
    if size > MAX_BYTES:
        return {}, f"$JOB_CHAIN_OUTPUTS holds {size} bytes; at most {MAX_BYTES}"
    return out, None


def read_file(path: str) -> Tuple[Dict[str, str], Optional[str]]:
    """Read and check the file a step wrote (a missing file: no outputs)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_FILE + 1)
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, f"cannot read $JOB_CHAIN_OUTPUTS ({path}): {exc.strerror}"
    if len(raw) > MAX_FILE:
        return {}, f"$JOB_CHAIN_OUTPUTS is larger than {MAX_FILE} bytes"
    if b"\x00" in raw:
        return {}, "$JOB_CHAIN_OUTPUTS contains a NUL byte"
    try:
        return parse(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return {}, f"$JOB_CHAIN_OUTPUTS is not UTF-8 text (byte offset {exc.start})"


# -- where they are kept ----------------------------------------------------------------------------
def keep(chain: Chain, records: Any, run_id: str, step: str, attempt: int, outputs: Dict[str, str],
         log: Callable[[str], None]) -> None:
    """A succeeded step's outputs: into the run record (job mode), into the chain a snapshot carries
    on (inline mode), and into the job's log (both)."""
    if not outputs:
        return
    chain.outputs[step] = dict(outputs)
    if records is not None:
        save(records, run_id, step, attempt, outputs)
    # the same line as MARKER: log() puts "job-chain: " before it
    log(f"outputs of {step}: " + json.dumps(outputs, sort_keys=True, ensure_ascii=True, separators=(",", ":")))


def save(records: Any, run_id: str, step: str, attempt: int, outputs: Dict[str, str]) -> bool:
    """False (not an error) when the record is not writable here."""
    return bool(records.write(run_id, fact_name(OUTPUTS, step, attempt), outputs))


def recorded(records: Any, run_id: str, listing: Any = None) -> Outputs:
    """Every step's outputs in the run record (its latest attempt that wrote some); ``listing``: the
    run's, when the caller has just made it."""
    latest: Dict[str, Tuple[int, str]] = {}
    for (step, attempt), name in (listing or records.listed(run_id))[OUTPUTS].items():
        if attempt >= latest.get(step, (0, ""))[0]:
            latest[step] = (attempt, name)
    out: Outputs = {}
    for step, (_, name) in latest.items():
        data = records.read(run_id, name)
        if data is not None:
            out[step] = {str(k): str(v) for k, v in data.items()}
    return out


def referenced(chain: Chain) -> Set[str]:
    """The steps whose outputs some step of the chain uses."""
    return {r.name for s in chain.steps for r in step_refs(s.body, s.script_origin != "inline") if r.kind == "steps"}


def uses(step: Step) -> Set[str]:
    return {r.name for r in step_refs(step.body, step.script_origin != "inline") if r.kind == "steps"}


def for_step(chain: Chain, step: Step, records: Any, run_id: str, mode: str) -> Outputs:
    """The outputs ``step``'s references need: from the run record in job mode, else those the chain carries."""
    names = uses(step)
    if not names:
        return {}
    if records is None or mode == "inline":
        return {n: chain.outputs[n] for n in names if n in chain.outputs}
    found = recorded(records, run_id)
    out = {n: found[n] for n in names if n in found}
    for name in names - set(out):  # a step renamed by a resume (--rename) wrote them under its old name
        step_now = chain.named(name)
        was = step_now.renamed_from if step_now is not None else None
        if was and was in found:
            out[name] = found[was]
    return out
