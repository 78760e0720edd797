"""``job-chain ui``: the web console for the chains under PATH (see docs/web-console.md)."""

from __future__ import annotations

from typing import Tuple

import click


@click.command()
@click.argument("paths", metavar="[PATH]...", nargs=-1, type=click.Path(exists=True))
@click.option("--local", is_flag=True, help="Runs started here (submit page) use the local server.")
@click.option("--port", type=click.IntRange(0, 65535), default=8780, show_default=True,
              help="Port to listen on (0: any free port).")
@click.option("--bind", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--no-token", is_flag=True,
              help="Loopback only: let anyone on this machine in without the URL's token; the console "
                   "then only shows (no submit, stop, resume or delete).")
def ui(paths: Tuple[str, ...], local: bool, port: int, bind: str, no_token: bool) -> None:
    """Serve a web console for the chains under PATH (default: here).

    The first line of output is its URL, carrying the token every visitor needs (as Jupyter's
    does): open it as printed.
    """
    from job_chain.ui.server import serve

    serve(list(paths) or ["."], local=local, bind=bind, port=port, token=not no_token, echo=click.echo)
