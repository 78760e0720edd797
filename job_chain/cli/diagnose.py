"""``job-chain diagnose LOGFILE...``: why a step failed, from logs a user already has."""

from __future__ import annotations

import json
import os
from typing import Any, Optional, Tuple

import click

from job_chain.errors import UsageError


@click.command()
@click.argument("logfiles", nargs=-1, required=True, metavar="LOGFILE...")
@click.option("--chain", "chain_file", default=None, metavar="CHAIN.json",
              help="Try this chain's failureRules first, as a run does (with --step: that step's).")
@click.option("--step", default=None, metavar="NAME", help="With --chain: the step whose failureRules apply.")
@click.option("--json", "as_json", is_flag=True, help="Print {class, signature, line, explanation, file} as JSON.")
def diagnose(logfiles: Tuple[str, ...], chain_file: Optional[str], step: Optional[str], as_json: bool) -> None:
    """Classify a failure from its log files (one per pod, the pod that failed first first): its class
    (infra, oom, hang, timeout, user, platform, unknown), the signature that matched, the line, and what to do.

    Only the last 256 KB of each file is read, so a huge log costs what a small one does.
    """
    from job_chain.failures.classify import classify_files

    rules = chain_rules(chain_file, step)
    for path in logfiles:
        if os.path.isdir(path):
            raise UsageError(f"{path}: is a directory; name the log files in it")
        if not os.path.isfile(path):
            raise UsageError(f"{path}: no such file")
    try:
        failure = classify_files(list(logfiles), rules)
    except OSError as exc:
        raise UsageError(f"{exc.filename or logfiles[0]}: cannot read it: {exc.strerror or exc}") from None
    if as_json:
        click.echo(json.dumps({"class": failure.cls, "signature": failure.signature or None,
                               "line": failure.line or None, "explanation": failure.explanation,
                               "file": failure.pod or None}, indent=2))
        return
    rows = [("class", failure.cls), ("signature", failure.signature or "-"), ("line", failure.line or "-")]
    if failure.words:
        rows.append(("in words", failure.words))
    if len(logfiles) > 1:
        rows.append(("file", failure.pod or "-"))
    rows.append(("what to do", failure.explanation))
    for key, value in rows:
        click.echo(f"{key + ':':<12} {value}")


def chain_rules(chain_file: Optional[str], step_name: Optional[str]) -> Tuple[Any, ...]:
    """The failureRules a run of ``chain_file`` would try first for ``step_name`` (or for every step,
    when they all have the same ones)."""
    if chain_file is None:
        if step_name is not None:
            raise UsageError("--step names a step of a chain: pass --chain CHAIN.json too")
        return ()
    from job_chain.spec.loader import load_chain
    from job_chain.util.suggest import did_you_mean

    chain = load_chain(chain_file, local=True)
    if step_name is not None:
        found = chain.find(step_name)
        if found is None:
            known = ", ".join(s.name for s in chain.steps[:20])
            raise UsageError(f"{chain_file}: no step named {step_name!r}"
                             f"{did_you_mean(step_name, [s.name for s in chain.steps])} (steps: {known})")
        return found.failure_rules
    distinct = {s.failure_rules for s in chain.steps}
    if len(distinct) > 1:
        raise UsageError(f"{chain_file}: its steps have different failureRules: pass --step NAME")
    return distinct.pop() if distinct else ()
