"""``job-chain local …``: run the AIHC-compatible server here (foreground or background)."""

from __future__ import annotations

import functools
import json
from typing import Any, Callable, Dict, List, Optional, Tuple

import click

from job_chain.cli.options import sk_on_command_line
from job_chain.local import HANG_MINUTE


class Delay(click.ParamType):
    """A duration such as ``20s``, ``1m``, ``0`` or a number of seconds (``2.5``)."""

    name = "duration"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        from job_chain.util.durations import seconds_of

        if isinstance(value, float):
            return value
        text = str(value).strip()
        try:
            seconds: Optional[float] = float(text)  # plain seconds, as `local start` passes them on
        except ValueError:
            seconds = seconds_of(text)
        if seconds is None or not 0 <= seconds <= 86400:
            self.fail(f"{value!r} is not a duration of at most a day (e.g. 20s, 1m, 0)", param, ctx)
        return seconds


def _server_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on."),
        click.option("--port", type=click.IntRange(0, 65535), default=None,
                     help="Port (default: the one this state dir's jobs expect, else a free one)."),
        click.option("--state-dir", default=None, metavar="DIR",
                     help="Jobs, logs and keys (env JOB_CHAIN_LOCAL_DIR)."),
        click.option("--ak", default=None, envvar="JOB_CHAIN_LOCAL_AK",
                     help="Access key to accept (default: a generated pair)."),
        click.option("--sk", default=None, envvar="JOB_CHAIN_LOCAL_SK",
                     callback=sk_on_command_line("set env JOB_CHAIN_LOCAL_SK instead"),
                     help="Secret key to accept (prefer env JOB_CHAIN_LOCAL_SK: a command line is public)."),
        click.option("--max-running", type=click.IntRange(min=1), default=None,
                     help="At most N jobs run at once (with --pool: in each queue without its "
                     "own capacity); others queue by priority."),
        click.option("--pool", "pools", multiple=True, metavar="ID[:N]",
                     help="A resource pool (repeatable); N jobs may run in it at once. "
                     "None given: any pool id is accepted."),
        click.option("--queue", "queues", multiple=True, metavar="[POOL/]NAME[:N]",
                     help="A queue of every --pool (or of POOL; repeatable); N jobs may run in "
                     "it at once (default --max-running). A pool without one has 'default'."),
        click.option("--stop-grace", type=click.FloatRange(min=0), default=10.0, show_default=True,
                     help="Seconds between SIGTERM and SIGKILL when stopping a job."),
        click.option("--sample-interval", type=click.FloatRange(min=0.05), default=5.0,
                     show_default=True, help="Seconds between metric samples."),
        click.option("--inject-faults", "inject_faults", type=click.FloatRange(0, 1), default=0.0,
                     metavar="RATE", help="Fail this fraction (0..1) of API requests like a cloud: "
                     "5xx, 429, dropped connections, creates lost after commit."),
        click.option("--fault-seed", type=int, default=None, metavar="S",
                     help="Seed for --inject-faults, so the same requests meet the same faults."),
        click.option("--schedule-delay", type=Delay(), default="0", metavar="DURATION",
                     help="How long each job stays Scheduled before its pods start, as image pulls "
                     "make it on AIHC (e.g. 20s, 1m; default 0)."),
        click.option("--hang-minute", type=Delay(), default=HANG_MINUTE, metavar="DURATION",
                     help="How long a minute of a job's hang detection (hangDetectionTimeoutMinutes) "
                     f"lasts here (default {HANG_MINUTE:g}s; e.g. 1s to see a hang detected quickly)."),
    ]
    for option in reversed(options):
        func = option(func)
    return functools.wraps(func)(func)


@click.group()
def local() -> None:
    """An AIHC-compatible server on this machine: jobs run as local processes."""


@local.command()
@_server_options
def serve(host: str, port: Optional[int], state_dir: Optional[str], ak: Optional[str],
          sk: Optional[str], max_running: Optional[int], pools: Tuple[str, ...],
          queues: Tuple[str, ...], stop_grace: float, sample_interval: float, inject_faults: float,
          fault_seed: Optional[int], schedule_delay: float, hang_minute: float) -> None:
    """Run the server in the foreground (Ctrl-C stops it; running jobs keep going)."""
    from job_chain.local.server import serve as run

    middleware: List[Tuple[Any, Dict[str, Any]]] = []
    if inject_faults > 0:
        from job_chain.local.faults import FaultInjector

        middleware.append((FaultInjector, {"rate": inject_faults, "seed": fault_seed}))
    run(host=host, port=port, state_dir=state_dir, ak=ak, sk=sk, max_running=max_running,
        stop_grace=stop_grace, sample_interval=sample_interval, middleware=middleware,
        pools=pools, queues=queues, schedule_delay=schedule_delay, hang_minute=hang_minute)


@local.command()
@_server_options
def start(host: str, port: Optional[int], state_dir: Optional[str], ak: Optional[str],
          sk: Optional[str], max_running: Optional[int], pools: Tuple[str, ...],
          queues: Tuple[str, ...], stop_grace: float, sample_interval: float, inject_faults: float,
          fault_seed: Optional[int], schedule_delay: float, hang_minute: float) -> None:
    """Start the server in the background (no-op if one is running)."""
    from job_chain.local import daemon
    from job_chain.local.server import pool_config

    pool_config(pools, queues)  # refuse a mistake here, not in the background server's log
    info = daemon.start(state_dir=state_dir, port=port, host=host, max_running=max_running,
                        pools=pools, queues=queues,
                        stop_grace=stop_grace, sample_interval=sample_interval, ak=ak, sk=sk,
                        inject_faults=inject_faults, fault_seed=fault_seed, schedule_delay=schedule_delay,
                        hang_minute=hang_minute)
    click.echo(f"local AIHC server at {info['url']} (pid {info['pid']})")
    if not daemon.answers(info):
        click.echo("(running, but it did not answer /healthz within 1s: busy; clients retry)")
    click.echo(f"credentials: {info['credentials_file']}")


@local.command()
@click.argument("job_id")
@click.argument("signature")
@click.option("--pod", default=None, metavar="NAME", help="The pod to kill (default: the job's first running pod).")
@click.option("--state-dir", default=None, metavar="DIR", help="State dir of the server.")
def fault(job_id: str, signature: str, pod: Optional[str], state_dir: Optional[str]) -> None:
    """Make a running pod of JOB_ID die with SIGNATURE (a failure catalogue name, e.g.
    nccl-watchdog-timeout, ib-completion-error, ecc-uncorrectable): its line goes into the pod's
    log and its training processes get SIGABRT."""
    from job_chain.errors import UsageError
    from job_chain.local.faults import kill_pod
    from job_chain.local.server import default_state_dir

    try:
        name = kill_pod(default_state_dir(state_dir), job_id, signature, pod)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    click.echo(f"pod {name} of job {job_id}: killed with {signature}")


@local.command()
@click.option("--state-dir", default=None, metavar="DIR", help="State dir of the server.")
def stop(state_dir: Optional[str]) -> None:
    """Stop the background server (its running jobs keep going)."""
    from job_chain.local import daemon

    click.echo("stopped" if daemon.stop(state_dir) else "no local server was running")


@local.command()
@click.option("--state-dir", default=None, metavar="DIR", help="State dir of the server.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def status(state_dir: Optional[str], as_json: bool) -> None:
    """Show where the server listens and how many jobs it has by status."""
    from job_chain.local import daemon

    info = daemon.status(state_dir)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return

    running = "no"
    if info["running"]:
        running = "yes" if info["answering"] else "yes, but not answering /healthz (busy?)"
    rows = [["running", running]]
    rows += [[key.replace("_", " "), str(info[key] or "-")] for key in ("url", "pid", "state_dir", "credentials_file")]
    rows.append(["jobs", ", ".join(f"{k} {v}" for k, v in sorted(info["jobs"].items())) or "none"])
    for key, value in rows:
        click.echo(f"{key:<17} {value}")


@local.command()
@click.option("--duration", default="12h", show_default=True, metavar="DURATION",
              help="How long the credentials last (e.g. 1h, 30m, 90s; at most 36h).")
@click.option("--out", "-o", default=None, metavar="FILE",
              help="Where to write them (mode 0600; default: STATE_DIR/sts/credentials-TIME.json).")
@click.option("--state-dir", default=None, metavar="DIR", help="State dir of the server.")
def sts(duration: str, out: Optional[str], state_dir: Optional[str]) -> None:
    """Get temporary credentials (AK, SK and a BCE session token, as BCE STS gives them) from the
    running server, written to a credentials file for --credentials; the secrets are never printed."""
    from job_chain.local.sts import mint, session_seconds

    made = mint(session_seconds(duration), out, state_dir)
    click.echo(f"temporary credentials for {made['host']} (access key {made['ak']}), valid until "
               f"{made['expiration']}, written to {made['path']} (mode 0600)")
    click.echo(f"use them with: --credentials {made['path']} (or env JOB_CHAIN_CREDENTIALS)")
