"""``job-chain jobs …``: every AIHC training-job endpoint as a command."""

from __future__ import annotations

from typing import Any, Callable, Optional

import click

from job_chain.aihc import spec, timefmt
from job_chain.cli.follow import detach_on_ctrl_c
from job_chain.cli.options import echo_json, pool_option, read_json_file, resolve_pool, with_client

PRIORITIES = click.Choice(list(spec.PRIORITIES))
JSON_FLAG = click.option("--json", "as_json", is_flag=True, help="Print the API answer as JSON.")


@click.group()
def jobs() -> None:
    """The AIHC training-job API as commands: list, get, create, stop, delete, logs, events, ..."""


def _first_pod(client: Any, pool: str, job_id: str, pod: Optional[str]) -> str:
    from job_chain.aihc.client import pod_names
    from job_chain.errors import UsageError

    if pod:
        return pod
    names = pod_names(client.get_job(pool, job_id))
    if not names:
        raise UsageError(f"job {job_id} has no pods yet; pass --pod NAME once it is scheduled")
    return names[0]


@jobs.command("list")
@pool_option
@click.option("--queue", default=None, help="Only this queue ('all' or empty: every queue).")
@click.option("--order-by", type=click.Choice(["createdAt", "finishedAt"]), default=None,
              help="Sort by creation or finish time (default: as the API lists them).")
@click.option("--order", type=click.Choice(["asc", "desc"]), default=None,
              help="Oldest first (asc) or newest first (desc).")
@click.option("--page", "page_no", type=click.IntRange(min=1), default=None, help="One page only.")
@click.option("--page-size", type=click.IntRange(1, 1000), default=None,
              help="Jobs asked per API call (1-1000; default 100, or the API's own with --page).")
@click.option("--status", default=None, help="Only jobs with this status, e.g. Running.")
@click.option("--name", default=None, help="Only jobs whose name contains this.")
@JSON_FLAG
@with_client(read_only=True)
def list_cmd(client: Any, pool: Optional[str], queue: Optional[str], order_by: Optional[str],
             order: Optional[str], page_no: Optional[int], page_size: Optional[int],
             status: Optional[str], name: Optional[str], as_json: bool) -> None:
    """List jobs (every page unless --page is given). --status/--name: the v2 API filters on
    the server; v1 has no filter, so its pages are filtered here."""
    from job_chain.cli.render import age, print_table, styled_status

    pool_id = resolve_pool(pool)
    if page_no is not None:
        jobs_ = client.list_jobs(pool_id, queue=queue, order_by=order_by, order=order,
                                 page_no=page_no, page_size=page_size, status=status,
                                 name=name).get("jobs") or []
    else:
        jobs_ = list(client.iter_jobs(pool_id, queue=queue, order_by=order_by, order=order,
                                      page_size=page_size or 100, status=status, name=name))
    if as_json:
        echo_json(jobs_)
        return
    print_table(
        ["NAME", "JOB ID", "STATUS", "QUEUE", "PRIORITY", "AGE"],
        [[j.get("name"), j.get("jobId"), styled_status(j.get("status", "")), j.get("queue"),
          j.get("priority"), age(j.get("createdAt"))] for j in jobs_],
    )


@jobs.command("get")
@click.argument("job_id")
@pool_option
@JSON_FLAG
@with_client(read_only=True)
def get_cmd(client: Any, job_id: str, pool: Optional[str], as_json: bool) -> None:
    """Show one job and its pods."""
    from job_chain.cli.render import age, print_table, styled_status

    job = client.get_job(resolve_pool(pool), job_id)
    if as_json:
        echo_json(job)
        return
    shown = dict(job, queueId=job.get("queue"))  # v1 answers the queue, v2 its queueId: the same here
    for key in ("name", "jobId", "status", "queueId", "priority", "image", "createdAt", "scheduledAt", "runningAt",
                "finishedAt"):
        click.echo(f"{key + ':':<12} {shown.get(key) or '-'}")
    pods = ((job.get("podList") or {}).get("pods")) or []
    print_table(
        ["POD", "PHASE", "NODE", "RESTARTS", "AGE"],
        [[(p.get("objectMeta") or {}).get("name"),
          styled_status((p.get("podStatus") or {}).get("status", "")), p.get("nodeName"),
          p.get("restartCount"), age((p.get("objectMeta") or {}).get("creationTimestamp"))]
         for p in pods],
    )


@jobs.command("create")
@click.option("-f", "--file", "path", required=True, metavar="JOB.json",
              help="A create-job body, as AIHC's create-job API takes it (a job of a chain file).")
@click.option("--client-token", default=None, help="Makes the create idempotent (safe to retry).")
@pool_option
@JSON_FLAG
@with_client
def create_cmd(client: Any, path: str, client_token: Optional[str], pool: Optional[str],
               as_json: bool) -> None:
    """Create a job from a JSON body."""
    body = read_json_file(path)
    chain_pool = body.pop("resourcePoolId", None)
    result = client.create_job(resolve_pool(pool, chain_pool), body, client_token=client_token)
    if as_json:
        echo_json(result)
    else:
        click.echo(f"created {result.get('jobName', body.get('name'))} {result.get('jobId')}")


@jobs.command("clone")
@click.argument("job_id")
@click.option("--name", "new_name", required=True, help="Name of the new job.")
@pool_option
@JSON_FLAG
@with_client
def clone_cmd(client: Any, job_id: str, new_name: str, pool: Optional[str], as_json: bool) -> None:
    """Re-create a job from an existing job's spec under a new name."""
    from job_chain.aihc.clone import clone_body
    from job_chain.aihc.names import job_name_problem
    from job_chain.errors import UsageError

    problem = job_name_problem(new_name)
    if problem:
        raise UsageError(f"--name {new_name!r}: {problem}")
    pool_id = resolve_pool(pool)
    result = client.create_job(pool_id, clone_body(client.get_job(pool_id, job_id), new_name))
    if as_json:
        echo_json(result)
    else:
        click.echo(f"created {new_name} {result.get('jobId')} (clone of {job_id})")


def _simple(name: str, method: str, verb: str, doc: str) -> None:
    """Commands that take a job id and print what happened: delete, stop."""

    @jobs.command(name, help=doc)
    @click.argument("job_id")
    @pool_option
    @JSON_FLAG
    @with_client
    def command(client: Any, job_id: str, pool: Optional[str], as_json: bool) -> None:
        result = getattr(client, method)(resolve_pool(pool), job_id)
        if as_json:
            echo_json(result)
        else:
            click.echo(f"{verb} {job_id}")


_simple("delete", "delete_job", "deleted", "Delete a job (stopping it first if it runs).")
_simple("stop", "stop_job", "stopping", "Stop a running job.")


@jobs.command("set-priority")
@click.argument("job_id")
@click.argument("priority", type=PRIORITIES, metavar="PRIORITY")
@pool_option
@JSON_FLAG
@with_client
def set_priority_cmd(client: Any, job_id: str, priority: str, pool: Optional[str], as_json: bool) -> None:
    """Change a job's scheduling priority (high, normal, low)."""
    result = client.update_job(resolve_pool(pool), job_id, priority)
    if as_json:
        echo_json(result)
    else:
        click.echo(f"{job_id} priority is now {priority}")


@jobs.command("events")
@click.argument("job_id")
@click.option("--start", "start_time", default=None, help="Start time (default: job creation).")
@click.option("--end", "end_time", default=None, help="End time (default: now).")
@pool_option
@JSON_FLAG
@with_client(read_only=True)
def events_cmd(client: Any, job_id: str, start_time: Optional[str], end_time: Optional[str],
               pool: Optional[str], as_json: bool) -> None:
    """Show a job's system events."""
    from job_chain.cli.render import events_rows, print_table

    result = client.job_events(resolve_pool(pool), job_id, start_time=start_time, end_time=end_time)
    if as_json:
        echo_json(result)
        return
    print_table(["TIME", "TYPE", "REASON", "COUNT", "MESSAGE"], events_rows(result.get("events") or []))


@jobs.command("pod-events")
@click.argument("job_id")
@click.option("--pod", default=None, help="Pod name (default: the job's first pod).")
@pool_option
@JSON_FLAG
@with_client(read_only=True)
def pod_events_cmd(client: Any, job_id: str, pod: Optional[str], pool: Optional[str], as_json: bool) -> None:
    """Show one pod's system events."""
    from job_chain.aihc.client import naming_pods
    from job_chain.cli.render import events_rows, print_table

    pool_id = resolve_pool(pool)
    pod_name = _first_pod(client, pool_id, job_id, pod)
    with naming_pods(client, pool_id, job_id, pod_name):
        result = client.pod_events(pool_id, job_id, pod_name)
    if as_json:
        echo_json(result)
        return
    print_table(["TIME", "TYPE", "REASON", "COUNT", "MESSAGE"], events_rows(result.get("events") or []))


@jobs.command("logs")
@click.argument("job_id")
@click.option("--pod", default=None, help="Pod name (default: the job's first pod).")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until the job ends.")
@click.option("--tail", type=click.IntRange(min=0), default=None, help="Only the last N lines.")
@pool_option
@JSON_FLAG
@with_client(read_only=True)
@detach_on_ctrl_c("the job keeps running")
def logs_cmd(client: Any, job_id: str, pod: Optional[str], follow: bool, tail: Optional[int],
             pool: Optional[str], as_json: bool) -> None:
    """Print a pod's log."""
    from job_chain.aihc.client import naming_pods
    from job_chain.cli.follow import follow_logs

    pool_id = resolve_pool(pool)
    pod_name = _first_pod(client, pool_id, job_id, pod)
    with naming_pods(client, pool_id, job_id, pod_name):
        if as_json:  # one answer, as the API gives it (its nextMarker names the next page)
            echo_json(client.pod_logs(pool_id, job_id, pod_name, max_lines=tail))
            return
        follow_logs(client, pool_id, job_id, pod_name, tail, follow)


def _parsed_by(parse: Callable[[str], int]) -> Callable[[click.Context, click.Parameter, Optional[str]], Optional[int]]:
    """A click callback: the option's text read by ``parse``, its ValueError said as the option's."""
    def callback(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[int]:
        try:
            return None if value is None else parse(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return callback


_metric_time, _metric_step = _parsed_by(timefmt.metric_instant), _parsed_by(timefmt.metric_step)


@jobs.command("metrics")
@click.argument("job_id")
@click.option("--type", "metric_type", required=True,
              help="CpuUsage, MemoryUsage, CpuTime, MemoryAllocation, GpuUsage, … (AIHC's metric types).")
@click.option("--start", "start_time", callback=_metric_time, default=None,
              help="From (ISO 8601 like 2026-01-15T14:00:00Z, or unix seconds; default: the earliest there is).")
@click.option("--end", "end_time", callback=_metric_time, default=None,
              help="Until (ISO 8601 or unix seconds; default: now).")
@click.option("--step", "time_step", callback=_metric_step, default=None,
              help="Time between points: 5m, 30s, 1h or seconds (AIHC's default: 5m).")
@pool_option
@JSON_FLAG
@with_client(read_only=True)
def metrics_cmd(client: Any, job_id: str, metric_type: str, start_time: Optional[int],
                end_time: Optional[int], time_step: Optional[int], pool: Optional[str], as_json: bool) -> None:
    """Show a job's monitoring series per pod (v1 GET .../metrics, v2 DescribeJobMetrics). The local
    server measures CPU and memory of its pods' processes; it has no GPU, so GPU, RDMA, PCIe and
    NVLink series are empty and say so."""
    from job_chain.cli.render import print_table

    result = client.job_metrics(resolve_pool(pool), job_id, metric_type, start_time=start_time,
                                end_time=end_time, time_step=time_step)
    if as_json:
        echo_json(result)
        return
    if result.get("message"):
        click.echo(result["message"])
    rows = []
    for pod in result.get("podMetrics") or []:
        points = pod.get("metrics") or []
        values = [float(p["value"]) for p in points if p.get("value") is not None]
        last = values[-1] if values else None
        rows.append([pod.get("podName"), len(points),
                     "-" if last is None else f"{last:g}",
                     "-" if not values else f"{max(values):g}"])
    print_table(["POD", "POINTS", "LAST", "MAX"], rows, title=metric_type)


@jobs.command("nodes")
@click.argument("job_id")
@pool_option
@JSON_FLAG
@with_client(read_only=True)
def nodes_cmd(client: Any, job_id: str, pool: Optional[str], as_json: bool) -> None:
    """Show the nodes a job runs on."""
    result = client.job_nodes(resolve_pool(pool), job_id)
    if as_json:
        echo_json(result)
    else:
        for node in result.get("nodeName") or []:
            click.echo(node)


@jobs.command("webterminal")
@click.argument("job_id")
@click.option("--pod", default=None, help="Pod name (default: the job's first pod).")
@pool_option
@JSON_FLAG
@with_client
def webterminal_cmd(client: Any, job_id: str, pod: Optional[str], pool: Optional[str], as_json: bool) -> None:
    """Print the web-terminal URL of a pod."""
    from job_chain.aihc.client import naming_pods

    pool_id = resolve_pool(pool)
    pod_name = _first_pod(client, pool_id, job_id, pod)
    with naming_pods(client, pool_id, job_id, pod_name):
        result = client.webterminal(pool_id, job_id, pod_name)
    if as_json:
        echo_json(result)
    else:
        click.echo(result.get("WebTerminalUrl", ""))
