"""``job-chain cache``: list, explain and forget the cached successes of a chain's steps."""

from __future__ import annotations

import datetime as _dt
from typing import Any, Optional, Tuple

import click

from job_chain.cli.chain import CHAIN_FILE, PARAM_OPTION
from job_chain.cli.options import echo_json
from job_chain.cli.render import print_table


def _session(chain_file: str) -> Any:
    from job_chain.session import ChainSession

    return ChainSession.from_file(chain_file, start_local=False)


def _when(at: Any) -> str:
    if not isinstance(at, (int, float)):
        return "-"
    return _dt.datetime.fromtimestamp(at, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@click.group()
def cache() -> None:
    """Steps cached across runs (jobChain.cache): what is kept, why a step reuses it or not."""


@cache.command("list")
@CHAIN_FILE
@click.option("--json", "as_json", is_flag=True, help="Print the entries as JSON.")
def list_(chain_file: str, as_json: bool) -> None:
    """Every cached success CHAIN_FILE's steps can reuse, newest first."""
    from job_chain.status.cost import hours_text
    from job_chain.submit.cache import saved_hours

    entries = _session(chain_file).cache_entries()
    if as_json:
        echo_json(entries)
        return
    if not entries:
        click.echo(f"no cached success for {chain_file}: a step with \"cache\" in its jobChain keeps one when "
                   "it succeeds")
        return
    rows = []
    for entry in entries:
        origin = entry.get("from") or {}
        rows.append([str(origin.get("display") or origin.get("step")), str(entry["key"])[:12], _when(entry.get("at")),
                     f"{origin.get('run')} attempt {origin.get('attempt')}", hours_text(saved_hours(entry)),
                     ", ".join(f"{k}={v}" for k, v in sorted((entry.get("outputs") or {}).items())) or "-"])
    print_table(["STEP", "KEY", "KEPT", "FROM RUN", "GPU-H", "OUTPUTS"], rows)


@cache.command()
@CHAIN_FILE
@click.option("--step", "step", required=True, metavar="NAME", help="The cached step.")
@PARAM_OPTION
def explain(chain_file: str, step: str, params: Tuple[str, ...]) -> None:
    """The key STEP would have now, its parts, and which parts differ from the nearest cached success."""
    from job_chain.spec.params import parse_param_args

    found = _session(chain_file).cache_explain(step, parse_param_args(params))
    if found.key is None:
        click.echo(f"step {found.step}: its key cannot be computed now ({found.problem}): a run reaching it "
                   "runs it (a key that cannot be computed is a miss)")
        return
    click.echo(f"step {found.step}: key {found.key}")
    for name, value in found.parts.items():
        mark = "*" if name in found.differ else " "
        click.echo(f" {mark} {name} = {value}")
    if found.nearest is None:
        click.echo("no cached success to compare with: the next run runs it")
        return
    origin = found.nearest.get("from") or {}
    where = f"run {origin.get('run')} (step {origin.get('display') or origin.get('step')}, attempt " \
            f"{origin.get('attempt')}, kept {_when(found.nearest.get('at'))})"
    if found.differ:
        click.echo(f"differs from the nearest cached success, {where}, in: {', '.join(found.differ)} (marked *): "
                   "the next run runs it")
    elif found.missing_paths:
        click.echo(f"matches {where}, but {found.missing_paths[0]} (a declared path) does not exist here: the "
                   "next run runs it")
    else:
        click.echo(f"matches {where}: the next run reuses it")


@cache.command()
@CHAIN_FILE
@click.option("--step", "step", default=None, metavar="NAME", help="Only this step's (default: every step's).")
def forget(chain_file: str, step: Optional[str]) -> None:
    """Forget cached successes, so the next run runs those steps again."""
    gone = _session(chain_file).cache_forget(step)
    click.echo(f"forgot {gone} cached success{'es' if gone != 1 else ''}" + (f" of step {step}" if step else ""))
