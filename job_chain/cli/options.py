"""Options shared by every command that talks to AIHC, and the client they build."""

from __future__ import annotations

import functools
import json
import os
from typing import Any, Callable, Dict, Mapping, Optional

import click

from job_chain.errors import UsageError

POOL_ENV = "AIHC_RESOURCE_POOL_ID"


def sk_on_command_line(instead: str, flag: str = "--sk", what: str = "the secret key") -> Callable[
        [click.Context, click.Parameter, Optional[str]], Optional[str]]:
    """A ``--sk`` (or ``--session-token``) callback: when the secret was typed on the command line
    (not from the environment), warn that every local user can read it there (``ps``,
    ``/proc/PID/cmdline``) for as long as the process runs, and name the way that keeps it out:
    ``instead``."""
    def warn(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[str]:
        if value and ctx.get_parameter_source(param.name or "sk") == click.core.ParameterSource.COMMANDLINE:
            click.echo(f"job-chain: warning: {flag} puts {what} in this process's command line, which every "
                       f"user of this machine can read (ps, /proc/PID/cmdline) while it runs: {instead}", err=True)
        return value
    return warn


SK_INSTEAD = ("set env AIHC_SK (and AIHC_SESSION_TOKEN), or keep host/ak/sk (and sessionToken) in a credentials "
              "file of mode 0600 (--credentials FILE or env JOB_CHAIN_CREDENTIALS) instead")


def api_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add --host/--ak/--sk/--session-token/--credentials/--local to a command (all optional)."""
    options = [
        click.option("--host", default=None, help="AIHC endpoint, e.g. aihc.bj.baidubce.com (env AIHC_HOST)."),
        click.option("--ak", default=None, help="Access key id (env AIHC_AK)."),
        click.option("--sk", default=None, callback=sk_on_command_line(SK_INSTEAD),
                     help="Secret access key (env AIHC_SK; prefer env or a file: a command line is public)."),
        click.option("--session-token", "session_token", default=None,
                     callback=sk_on_command_line(SK_INSTEAD, "--session-token", "the session token"),
                     help="BCE session token of temporary (STS) keys given with --ak/--sk (env AIHC_SESSION_TOKEN)."),
        click.option("--credentials", "credentials_file", default=None, metavar="FILE",
                     help="JSON file with host, ak, sk and, for temporary keys, sessionToken "
                     "(env JOB_CHAIN_CREDENTIALS)."),
        click.option("--local", "use_local", is_flag=True,
                     help="Use the background local server (job-chain local start)."),
        click.option("--api-version", "api_version", type=click.Choice(["v1", "v2"]), default=None,
                     help="AIHC OpenAPI version (env AIHC_API_VERSION, or api_config.version; "
                     "default v1)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def pool_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--pool", default=None, metavar="ID",
                        help=f"Resource pool id (env {POOL_ENV}).")(func)


def resolve_pool(pool: Optional[str], chain_pool: Optional[str] = None) -> str:
    """--pool, then env AIHC_RESOURCE_POOL_ID, then a chain file's resourcePoolId (--chain)."""
    ctx = click.get_current_context(silent=True)
    chain_pool = chain_pool or (ctx.meta.get("job_chain.chain_pool") if ctx else None)
    value = pool or os.environ.get(POOL_ENV) or chain_pool
    if not value:
        raise UsageError(f"no resource pool: pass --pool ID, set {POOL_ENV}, or name a chain file with --chain")
    return value


def with_client(func: Optional[Callable[..., Any]] = None, *,
                read_only: bool = False) -> Callable[..., Any]:
    """Decorator: consume the api options and pass ``client=`` to the command.

    ``@with_client(read_only=True)``: a command that only looks; with ``--local`` it never starts a
    stopped local server behind the user's back (it says the server is stopped and how to start it).
    """
    if func is None:
        return functools.partial(with_client, read_only=read_only)

    @api_options
    @click.option("--chain", "chain_file", default=None, metavar="CHAIN.json",
                  help="Take the resource pool and api_config from a chain file.")
    @functools.wraps(func)
    def wrapper(host: Optional[str], ak: Optional[str], sk: Optional[str], session_token: Optional[str],
                credentials_file: Optional[str], use_local: bool, api_version: Optional[str],
                chain_file: Optional[str], **kwargs: Any) -> Any:
        api_config: Optional[Mapping[str, Any]] = None
        if chain_file:
            data = read_json_file(chain_file)
            api_config = data.get("api_config") if isinstance(data.get("api_config"), dict) else None
            if isinstance(data.get("resourcePoolId"), str):
                click.get_current_context().meta["job_chain.chain_pool"] = data["resourcePoolId"]
        from job_chain.session.places import connect_to

        client = connect_to(host=host, ak=ak, sk=sk, session_token=session_token,
                            credentials_file=credentials_file, local=use_local,
                         api_config=api_config, api_config_origin=f"{chain_file} api_config",
                         api_version=api_version, start_local=not read_only)
        return func(client=client, **kwargs)

    return wrapper


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def read_json_file(path: str) -> Dict[str, Any]:
    """Load a JSON object from a file with a file:line:column error on bad input."""
    from job_chain.util.jsonfile import load_json_object

    return load_json_object(path)
