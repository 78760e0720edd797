"""``job-chain pools`` and ``job-chain queues``: where jobs can run (thin: the client does it)."""

from __future__ import annotations

from typing import Any, Optional

import click

from job_chain.cli.options import echo_json, pool_option, resolve_pool, with_client

JSON_FLAG = click.option("--json", "as_json", is_flag=True, help="Print the API answer as JSON.")


def _none_here(client: Any, what: str) -> str:
    """Why a listing is empty, and what to do: the local server lists only pools it was given."""
    from urllib.parse import urlsplit

    from job_chain.aihc.endpoint import is_loopback

    endpoint = str(getattr(client, "endpoint", ""))
    if is_loopback(urlsplit(endpoint).hostname or ""):  # the local server (or something posing as it)
        return (f"no {what} are configured on the local server: it accepts any resource pool id (a chain's "
                "resourcePoolId runs here as it is). To define pools and queues with limits, restart it with "
                "them: job-chain local stop; job-chain local start --pool ID[:N] [--queue [POOL/]NAME[:N]]")
    return f"no {what}: these credentials see none at {endpoint or 'this endpoint'}"


def _shown(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


@click.command()
@JSON_FLAG
@with_client(read_only=True)
def pools(client: Any, as_json: bool) -> None:
    """List the resource pools (v1 /api/v1/resourcepools or v2 DescribeResourcePools)."""
    from job_chain.aihc.pools import pool_row
    from job_chain.cli.render import print_table

    found = client.list_pools()
    if as_json:
        echo_json(found)
        return
    if not found:
        click.echo(_none_here(client, "resource pools"))
        return
    keys = ("resourcePoolId", "name", "type", "phase", "region", "nodes", "maxRunningJobs")
    print_table(["POOL", "NAME", "TYPE", "PHASE", "REGION", "NODES", "MAX RUNNING"],
                [[_shown(pool_row(p)[k]) for k in keys] for p in found])


@click.command()
@pool_option
@JSON_FLAG
@with_client(read_only=True)
def queues(client: Any, pool: Optional[str], as_json: bool) -> None:
    """List the queues of a resource pool (v1 .../queue or v2 DescribeQueues)."""
    from job_chain.aihc.pools import queue_row
    from job_chain.cli.render import print_table

    found = client.list_queues(resolve_pool(pool))
    if as_json:
        echo_json(found)
        return
    if not found:
        click.echo(_none_here(client, "queues"))
        return
    keys = ("queueName", "queueId", "type", "opened", "running", "inqueue", "pending", "maxRunningJobs")
    print_table(["QUEUE", "ID", "TYPE", "OPEN", "RUNNING", "SCHEDULED", "PENDING", "MAX RUNNING"],
                [[_shown(queue_row(q)[k]) for k in keys] for q in found])
