"""``job-chain notify test CHAIN_FILE``: a sample message to every notify target of a chain, so a
bot is known to work before a week-long run."""

from __future__ import annotations

import click

from job_chain.errors import JobChainError, UsageError
from job_chain.spec.notify import EVENTS


@click.group()
def notify() -> None:
    """Check where a chain's notifications go."""


@notify.command("test")
@click.argument("chain_file", metavar="CHAIN_FILE", type=click.Path(dir_okay=False))
@click.option("--event", type=click.Choice(EVENTS), default="failed", show_default=True,
              help="The event the sample message is about.")
def test(chain_file: str, event: str) -> None:
    """Send a sample EVENT message to every target in CHAIN_FILE's notify, as a run would (signed,
    within each bot's rate limit), with $NAME of {"env": "NAME"} from this environment; say which
    took it. Exit 1 when one did not."""
    import os

    from job_chain.hop.notify import send_samples
    from job_chain.record.records import RunRecords
    from job_chain.spec.loader import load_chain
    from job_chain.spec.notify import resolve

    chain = load_chain(chain_file, local=True)
    if not chain.notify:
        raise UsageError(f"{chain_file} has no notify targets: add a top-level \"notify\" list "
                         "(docs/notifications.md)")
    secrets = resolve(chain.notify, os.environ, chain_file)
    results = send_samples(chain, secrets, RunRecords(chain_file), event)
    for target, why in results:
        if why is None:
            click.echo(f"{target}: sent")
        else:
            click.secho(f"{target}: not sent: {why}", fg="red")
    failed = sum(1 for _, why in results if why is not None)
    if failed:
        raise JobChainError(f"{failed} of {len(results)} notify targets did not take the sample message")
