"""Chain commands: parse the options, call :class:`~job_chain.session.ChainSession`, render."""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, List, Optional, Tuple

import click

from job_chain.cli.options import api_options, echo_json
from job_chain.cli.run_view import quoted
from job_chain.errors import UsageError

CHAIN_FILE = click.argument("chain_file", metavar="CHAIN_FILE", type=click.Path(dir_okay=False))
# steering commands find a run by --run alone when the chain file is not given
OPTIONAL_CHAIN_FILE = click.argument("chain_file", metavar="[CHAIN_FILE]", required=False,
                                     type=click.Path(dir_okay=False))
RUN_OPTION = click.option("--run", "run_id", default=None, help="Run id (default: the latest run recorded here).")
PARAM_OPTION = click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
                            help="Set a parameter of the chain (its top-level \"params\"); repeatable.")


def _warn(message: str) -> None:
    click.secho(f"warning: {message}", fg="yellow", err=True)


def _session_kwargs(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    opts = {k: kwargs.pop(k) for k in ("host", "ak", "sk", "session_token", "credentials_file", "use_local",
                                       "api_version")}
    return dict(local=opts["use_local"], host=opts["host"], ak=opts["ak"], sk=opts["sk"],
                session_token=opts["session_token"], credentials=opts["credentials_file"],
                api_version=opts["api_version"])


def open_session(chain_file: str, kwargs: Dict[str, Any], warnings: bool = False) -> Any:
    """A ChainSession on a valid chain file, from the api options (which are removed from ``kwargs``)."""
    from job_chain.session import ChainSession

    return ChainSession.from_file(chain_file, warn=_warn if warnings else lambda _: None, **_session_kwargs(kwargs))


def open_runs(chain_file: Optional[str], run_id: Optional[str], kwargs: Dict[str, Any],
              read_only: bool = False, quiet: bool = False) -> Any:
    """A ChainSession for steering recorded runs: the chain file may be broken, changed or gone (the
    runs have their frozen copies; say so in one line), and may be left out when ``--run`` names a
    run recorded in one place only. ``read_only`` (status, runs, logs): a stopped local server is
    reported, never started. ``quiet``: the file's state is not said (a resume from the record alone)."""
    from job_chain.session import ChainSession

    if chain_file is None:
        chain_file = _locate(run_id)
    session = ChainSession.from_file(chain_file, strict=False, start_local=not read_only,
                                     **_session_kwargs(kwargs))
    if session.chain_problem is not None and not quiet:
        import os

        what = "is gone" if not os.path.exists(chain_file) else "cannot be used now"
        _warn(f"{chain_file} {what} ({str(session.chain_problem).splitlines()[0]}); "
              "working from the run's frozen copy")
    return session


def _locate(run_id: Optional[str]) -> str:
    from job_chain.record.index import locate

    if run_id is None:
        raise UsageError("name the chain file, or the run with --run ID")
    found = locate(run_id)
    if not found:
        raise UsageError(f"no run {run_id} is known here: name its chain file (job-chain runs CHAIN_FILE lists "
                         "a chain's runs)")
    if len(found) > 1:
        raise UsageError(f"run {run_id} is recorded beside several chain files ({', '.join(found)}): name one")
    return found[0]


def _follow(session: Any, run_id: str, watch_mode: bool) -> int:
    from job_chain.cli.run_view import follow

    return follow(session.watch(run_id, interval=0.5, on_error=lambda e: _warn(f"{e}; still watching")),
                  session.path, watch_mode)


@click.command()
@CHAIN_FILE
@click.option("--local", "use_local", is_flag=True, help="Skip checks that matter only in a cluster.")
def validate(chain_file: str, use_local: bool) -> None:
    """Check CHAIN_FILE: JSON syntax (line:column) and every schema problem (JSON path)."""
    from job_chain.spec.loader import load_chain

    chain = load_chain(chain_file, local=use_local)
    for warning in chain.warnings:
        _warn(warning)
    groups = {s.group for s in chain.steps if s.group}
    jobs = len(chain.steps) - sum(1 for s in chain.steps if s.group) + len(groups)
    expanded = f"{jobs} jobs, {len(chain.steps)} steps once its matrices are expanded" if groups else \
        f"{len(chain.steps)} steps"
    where = "on Slurm" if chain.engine == "slurm" else f"resource pool {chain.pool}"
    click.echo(f"{chain_file}: OK, {expanded}, {where}")
    from job_chain.rules.retry import composition

    said = set()
    for step in chain.steps:  # a step with AIHC's fault tolerance and retries of its own: how they compose
        text = composition(step, chain.engine_restarts(step))
        if text and (step.group or step.name) not in said:
            said.add(step.group or step.name)
            click.echo(text)


@click.command()
@CHAIN_FILE
@click.argument("start_index", metavar="[N]", required=False)
@click.option("--start", "start", default=None, metavar="N|NAME",
              help="The first step to submit: its number (from 0) or its name.")
@click.option("--dry-run", is_flag=True, help="Print the exact request, secrets redacted; submit nothing.")
@click.option("--follow", "-f", is_flag=True, help="Stay and show live status until the chain ends.")
@click.option("--advance", "advance_mode", type=click.Choice(["job", "watch"]), default="job",
              help="job: each job submits the next (default). watch: this process does it (implies --follow).")
@click.option("--inline", is_flag=True,
              help="Embed a compressed snapshot of the remaining steps in each command (no shared storage).")
@click.option("--force", is_flag=True, help="Start even if another run of this chain is still going.")
@click.option("--no-cache", "no_cache", is_flag=True,
              help="Run every step: none reuses a cached success (jobChain.cache, docs/caching.md).")
@PARAM_OPTION
@api_options
def run(chain_file: str, start_index: Optional[str], start: Optional[str], dry_run: bool, follow: bool,
        advance_mode: str, inline: bool, force: bool, no_cache: bool, params: Tuple[str, ...], **kwargs: Any) -> None:
    """Freeze CHAIN_FILE into a new run and submit step N (default 0); each later step starts when the
    steps it needs succeeded."""
    if start is not None and start_index is not None and start != start_index:
        raise UsageError(f"two different start steps given: {start_index} and --start {start}")
    if inline and advance_mode == "watch":
        raise UsageError("--inline and --advance watch exclude each other: watch mode needs no snapshot")
    from job_chain.spec.params import parse_param_args

    first = start if start is not None else (start_index or "0")
    mode = "watch" if advance_mode == "watch" else ("inline" if inline else "job")
    secrets = [v for v in (kwargs.get("sk"), kwargs.get("session_token")) if v]
    given = parse_param_args(params)
    session = open_session(chain_file, kwargs, warnings=True)
    if dry_run:
        _dry_run(session, first, mode, secrets, given)
        return
    started = session.start(first, mode=mode, force=force, params=given, cache=not no_cache)
    now, later = session.waves(first)
    reused = {e["step"] for e in session.records.cached(started.run_id)}
    for step in now:
        submitted = session.records.submission(started.run_id, step.name, 1) or {}
        if step.name in reused:
            click.echo(f"run {started.run_id}: step {step.display} reused a cached success (no job; "
                       "'job-chain status' says from where)")
            continue
        click.echo(f"run {started.run_id}: step {step.display} submitted as job {submitted.get('jobId', '?')}")
    if later:
        click.echo(f"{len(later)} more wait for a slot (maxParallel, maxRunning): each starts as one ends")
    for seen in session.checkpoints(started.run_id):
        click.echo(seen.line())
    if mode == "watch":
        click.echo("this process submits each next step (--advance watch): keep it running")
    else:
        click.echo(f"later steps start by themselves; watch with: job-chain status {quoted(chain_file)} --watch")
    if follow or mode == "watch":
        sys.exit(_follow(session, started.run_id, mode == "watch"))


def _print_notify(chain: Any) -> None:
    """Which variables ``notify`` reads at start (names only, never values), and which are not set."""
    import os

    from job_chain.spec.notify import references

    names = references(chain.notify)
    if names:
        missing = [f"${n}" for n in names if not os.environ.get(n)]
        click.echo("# notify: reads " + ", ".join(f"${n}" for n in names) + " from this environment at start"
                   + (f"; not set here: {', '.join(missing)} (the run would be refused)" if missing else ""), err=True)


def _dry_run(session: Any, first: str, mode: str, secrets: List[str], params: Dict[str, str]) -> None:
    from job_chain.session.plan import chain_to_freeze, check_mode, check_reachable, planned_host
    from job_chain.submit.command import tail_size
    from job_chain.util.redaction import redact

    host = planned_host(session.context)
    hidden = session.chain.secrets + secrets
    chain = chain_to_freeze(session.context, first, params=params)
    check_mode(chain, mode)
    for line in check_reachable(chain, mode, session.context.places.local):  # as run refuses and says it
        _warn(line)
    plans = session.plan(first, mode, params)
    for plan in plans:
        body = redact(plan["body"], hidden)
        if session.api_version == "v2":
            from job_chain.aihc.v2 import describe_create

            text = describe_create(host, plan["resourcePoolId"], body, plan["clientToken"])
        else:
            text = (f"POST {host}/api/v1/aijobs?resourcePoolId={plan['resourcePoolId']}"
                    f"&clientToken={plan['clientToken']}\n" + json.dumps(body, indent=2, ensure_ascii=False))
        if len(plans) > 1:
            click.echo(f"# step {plan['step']}")
        click.echo(redact(text, hidden))
    if chain.params:
        click.echo("# params: " + ", ".join(f"{k}={v}" for k, v in chain.params.items()), err=True)
    _print_notify(chain)
    _print_expansion(chain)
    if chain.graph or chain.handlers:
        from job_chain.rules.plan import levels

        names = {s.index: s.display for s in chain.steps}
        for wave, indexes in enumerate(levels(chain)):
            click.echo(f"# wave {wave}: " + ", ".join(f"{i} {names[i]}" for i in indexes), err=True)
        for handler in chain.handlers:
            click.echo(f"# after the run ({handler.run_on}): {handler.index} {handler.name}", err=True)
    from job_chain.session.plan import checkpoints
    from job_chain.spec.params import RUN_ID

    for seen in checkpoints(chain, RUN_ID):  # the run id is not known yet: ${run.id} stays in the path
        click.echo(f"# {seen.line()}", err=True)
    now, later = session.waves(first)
    if later:
        click.echo("# first wave (the caps allow): " + ", ".join(s.display for s in now) + f"; {len(later)} more "
                   "wait for a slot and start as steps end", err=True)
    first_step = chain.named(plans[0]["step"])
    assert first_step is not None  # the plans were made from this chain's steps
    added = tail_size(plans[0]["body"]["jobSpec"]["command"], first_step.script)
    click.echo(f"# the run id is chosen at submission; job-chain adds {added} bytes around your script", err=True)


@click.command()
@OPTIONAL_CHAIN_FILE
@RUN_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@click.option("--watch", "-w", "watch", is_flag=True, help="Keep showing the run live until it ends.")
@click.option("--points", is_flag=True, help="List every point of each matrix (default: one line per matrix, "
                                              "plus its points that run or failed).")
@api_options
def status(chain_file: Optional[str], run_id: Optional[str], as_json: bool, watch: bool, points: bool,
           **kwargs: Any) -> None:
    """Show every step of a run: status, attempt, exit code, reason, and the run's outcome."""
    from job_chain.cli.run_view import print_status, status_json
    from job_chain.util.gcpause import paused

    session = open_runs(chain_file, run_id, kwargs, read_only=True)
    if watch:
        run = session.run(run_id)
        sys.exit(_follow(session, run.run_id, run.mode == "watch"))
    with paused(for_good=True):  # the look and its table live until the command ends (util.gcpause)
        result = session.status(run_id, outputs=as_json, patient=True)  # a one-off look: as patient as run
        changes = session.file_changes(result.run_id, reread=False)  # open_runs read it a moment ago
        if as_json:
            echo_json({**status_json(result), "fileChanges": [c.as_json() for c in changes]})
        else:
            print_status(result, points=points, changes=changes)


@click.command()
@CHAIN_FILE
@click.option("--json", "as_json", is_flag=True, help="Print the runs as JSON.")
@click.option("--limit", "limit", type=click.IntRange(min=1), default=None, metavar="N",
              help="Only the N newest runs.")
@click.option("--since", "since", default=None, metavar="WHEN",
              help="Only runs started since WHEN: an age (30m, 12h, 7d, 2w) or a UTC date or time "
                   "(2026-11-01, 2026-11-01T08:00).")
@click.option("--delete", "delete", default=None, metavar="RUN",
              help="Forget run RUN (its record; its jobs stay in AIHC). Refused while it is going.")
@api_options
def runs(chain_file: str, as_json: bool, limit: Optional[int], since: Optional[str], delete: Optional[str],
         **kwargs: Any) -> None:
    """List every run of CHAIN_FILE, newest first: id, start, outcome, what failed or is going, where."""
    from job_chain.cli.render import print_table
    from job_chain.cli.run_view import runs_columns, runs_rows
    from job_chain.session.summaries import parse_since

    since_at = parse_since(since) if since is not None else None
    session = open_runs(chain_file, None, kwargs, read_only=delete is None)
    if delete is not None:
        session.delete_run(delete)
        click.echo(f"run {delete} of {chain_file} deleted (its jobs stay in AIHC)")
        return
    entries = [found.as_json() for found in session.summaries(limit=limit, since=since_at)]
    if as_json:
        echo_json(entries)
    elif not entries:
        if limit is None and since is None:
            click.echo(f"no run of {chain_file} is recorded here: start one with 'job-chain run {quoted(chain_file)}'")
        else:
            click.echo(f"no run of {chain_file} started since {since}")
    else:
        print_table(runs_columns(entries), runs_rows(entries))


@click.command()
@OPTIONAL_CHAIN_FILE
@RUN_OPTION
@api_options
def stop(chain_file: Optional[str], run_id: Optional[str], **kwargs: Any) -> None:
    """Stop a run: every step still going is stopped and no later step starts."""
    session = open_runs(chain_file, run_id, kwargs)
    run = session.run(run_id)
    for step in session.stop(run.run_id):
        click.echo(f"stopping step {step.name} job {step.job_id}")
    click.echo(f"run {run.run_id} stopped: no later step will start; continue it with: "
               f"job-chain resume {quoted(session.path)} --run {run.run_id}")


@click.command()
@OPTIONAL_CHAIN_FILE
@RUN_OPTION
@click.option("--rerun", "rerun", multiple=True, metavar="NAME",
              help="Run this succeeded step again, with what the file says now, and everything that depends "
                   "on it (repeatable).")
@click.option("--rename", "renames", multiple=True, metavar="OLD=NEW",
              help="The file's step NEW is the run's step OLD renamed: if OLD succeeded, NEW does not run again "
                   "(repeatable).")
@click.option("--dry-run", is_flag=True, help="Show the changes and what would be submitted; submit nothing.")
@click.option("--follow", "-f", is_flag=True, help="Stay and show live status until the chain ends.")
@click.option("--advance", "advance_mode", type=click.Choice(["job", "watch"]), default=None,
              help="Advance mode for the rest of the run (default: as the run started).")
@PARAM_OPTION
@api_options
def resume(chain_file: Optional[str], run_id: Optional[str], rerun: Tuple[str, ...], renames: Tuple[str, ...],
           dry_run: bool, follow: bool, advance_mode: Optional[str], params: Tuple[str, ...], **kwargs: Any) -> None:
    """Apply CHAIN_FILE's changes to a run (by step name, to steps that did not succeed) and start it
    again at the steps that did not succeed, never creating a step twice.

    Without CHAIN_FILE (--run ID alone), the run continues from its record as it was frozen.
    A run in --advance watch mode whose watcher was stopped (Ctrl-C) is watched from here again.
    """
    as_frozen = chain_file is None
    session = open_runs(chain_file, run_id, kwargs, quiet=as_frozen)
    run = session.run(run_id)
    if run.mode == "watch" and advance_mode != "job" and not (rerun or params):
        going = [s for s in session.status(run.run_id).steps if s.active]
        if going and dry_run:
            click.echo(f"run {run.run_id}: step {going[0].name} is {going[0].status}; without --dry-run this "
                       "process would watch the run and submit each next step (--advance watch)")
            return
        if going:  # nothing to submit again, only its watcher is gone (Ctrl-C): watch it from here
            click.echo(f"run {run.run_id}: step {going[0].name} is {going[0].status}; this process now submits "
                       "each next step (--advance watch): keep it running")
            sys.exit(_follow(session, run.run_id, True))
    mode = advance_mode if advance_mode != "job" or run.mode != "inline" else None
    from job_chain.spec.params import parse_param_args

    given = parse_param_args(params)
    renamed = _renames(renames)
    if renamed and as_frozen:
        raise UsageError("--rename compares the chain file with the run: name the chain file")
    plan = session.preview_resume(run.run_id, rerun=rerun, params=given, as_frozen=as_frozen, renamed=renamed)
    if plan.going and not dry_run:  # the steps not submitted yet take the changes; nothing stops
        plan = session.revise_running(run.run_id)
        _print_plan(plan, run.revision)
        click.echo(f"run {run.run_id} goes on at revision {plan.revision}" if plan.revision != run.revision else
                   f"run {run.run_id} goes on unchanged")
        if follow:
            sys.exit(_follow(session, run.run_id, run.mode == "watch"))
        return
    _print_plan(plan, run.revision)
    if dry_run:
        return
    submitted = session.resume(run.run_id, mode=mode, rerun=rerun, params=given, as_frozen=as_frozen, renamed=renamed)
    if not submitted:
        click.echo(f"run {run.run_id}: every step succeeded; nothing to resume")
        return
    for done in submitted:
        verb = ("was already submitted as" if not done.created else
                "submitted as" if done.attempt == 1 else "resubmitted as")  # a first submission is not a resubmission
        click.echo(f"run {run.run_id}: step {done.step} {verb} job {done.job_id} (attempt {done.attempt})")
    watch_mode = (mode or run.mode) == "watch"
    if follow or watch_mode:
        sys.exit(_follow(session, run.run_id, watch_mode))


def _renames(renames: Tuple[str, ...]) -> Dict[str, str]:
    """``--rename OLD=NEW`` options: {old: new}."""
    out: Dict[str, str] = {}
    for item in renames:
        was, sep, now = item.partition("=")
        if not sep or not was.strip() or not now.strip():
            raise UsageError(f"--rename {item}: write it as OLD=NEW (the step's name in the run, then in the file)")
        out[was.strip()] = now.strip()
    return out


def _change_lines(changes: List[Any]) -> List[str]:
    """One line per change; the points of a matrix changed alike make one line (``~ train ×6 points: …``)."""
    from dataclasses import replace

    from job_chain.spec.model import display_group

    groups: Dict[Tuple[Any, ...], List[Any]] = {}
    for change in changes:
        group = display_group(change.name)
        groups.setdefault((group, change.kind, tuple(change.what), change.note, change.applied), []).append(change)
    out = []
    for (group, *_), alike in groups.items():
        first = alike[0]
        out.append(replace(first, name=f"{group} ×{len(alike)} points").line() if len(alike) > 1 else first.line())
    return out


def _print_expansion(chain: Any) -> None:
    """Each matrix: its points, their job names, and the cap."""
    groups: Dict[str, List[Any]] = {}
    for step in chain.steps:
        if step.group:
            groups.setdefault(step.group, []).append(step)
    for group, points in groups.items():
        cap = f", maxParallel {points[0].max_parallel}" if points[0].max_parallel else ""
        click.echo(f"# matrix {group}: {len(points)} points{cap}", err=True)
        for point in points:
            click.echo(f"#   {point.index} {point.display} (job name {point.name})", err=True)
    if chain.max_running:
        click.echo(f"# maxRunning {chain.max_running}: at most that many steps run at once", err=True)


def _print_plan(plan: Any, revision: int) -> None:
    if plan.note:
        click.echo(plan.note)
    in_file = [c for c in plan.changes if c.kind != "rerun"]  # --rerun is asked for, not a change in the file
    if in_file:
        click.echo(f"changes in the chain file since run {plan.run_id} was frozen (revision {revision}):")
        for line in _change_lines(in_file):
            click.echo(f"  {line}")
    elif revision and not plan.note:
        click.echo(f"the file matches the run as frozen (revision {revision})")
    reruns = [c for c in plan.changes if c.kind == "rerun"]
    if reruns:
        click.echo("--rerun: " + ", ".join(f"{c.name} {c.note}" for c in reruns))
    if plan.changes and plan.revision != revision:
        click.echo(f"the run becomes revision {plan.revision}")
    elif in_file and plan.going:
        click.echo("nothing here can be applied while the run goes")
    if plan.targets:
        click.echo("would submit: " + ", ".join(f"{name} (attempt {attempt})" for name, attempt in plan.targets))
    if plan.waiting:
        click.echo("then, as slots free up: " + ", ".join(f"{name} (attempt {attempt})"
                                                          for name, attempt in plan.waiting))
    for seen in plan.checkpoints:
        click.echo(seen.line())
