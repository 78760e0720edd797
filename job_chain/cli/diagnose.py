"""``job-chain diagnose LOGFILE...``: why a step failed, from logs a user already has."""

from __future__ import annotations

import json
import os
from typing import Tuple

import click

from job_chain.errors import UsageError


@click.command()
@click.argument("logfiles", nargs=-1, required=True, metavar="LOGFILE...")
@click.option("--json", "as_json", is_flag=True, help="Print {class, signature, line, explanation, file} as JSON.")
def diagnose(logfiles: Tuple[str, ...], as_json: bool) -> None:
    """Classify a failure from its log files (one per pod, the pod that failed first first): its class
    (infra, oom, hang, timeout, user, unknown), the signature that matched, the line, and what to do.

    Only the last 256 KB of each file is read, so a huge log costs what a small one does.
    """
    from job_chain.chain.classify import classify_files

    for path in logfiles:
        if os.path.isdir(path):
            raise UsageError(f"{path}: is a directory; name the log files in it")
        if not os.path.isfile(path):
            raise UsageError(f"{path}: no such file")
    try:
        failure = classify_files(list(logfiles))
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
