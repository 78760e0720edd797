"""``aiak-gen``: write an AIAK training chain (convert → preprocess → train) from a description."""

from __future__ import annotations

import json
import os
from typing import Optional

import click

from job_chain.cli import Command, run_cli


def _print_tables(which: str) -> None:
    from job_chain.aiak import tables
    from job_chain.cli.render import print_table

    if which == "models":
        print_table(["SERIES", "MODEL_NAME", "HF NAME", "DEFAULT TP", "DEFAULT PP", "MODEL_URL"],
                    [[m.series, m.name, m.hf_name, m.tp or "-", m.pp or "-", m.url]
                     for m in tables.models().values()])
    else:
        print_table(["DATASET_NAME", "DATASET_URL"], [[d.name, d.url] for d in tables.datasets().values()])


@click.command(cls=Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("chain_file", required=False, type=click.Path(dir_okay=False))
@click.argument("aiak_job_info", required=False, type=click.Path(dir_okay=False))
@click.option("--pool", default=None, metavar="ID", help="Resource pool (when CHAIN_FILE does not exist yet).")
@click.option("--pfs", default=None, metavar="NAME", help="PFS datasource name (when CHAIN_FILE does not exist).")
@click.option("--mount-path", default=None, metavar="PATH", help="Where the PFS is mounted (default /root/pfs).")
@click.option("--dry-run", is_flag=True, help="Print the chain instead of writing files.")
@click.option("--force", is_flag=True, help="Replace jobs of CHAIN_FILE that aiak-gen did not generate.")
@click.option("--list-models", is_flag=True, help="Print the AIAK model table and exit.")
@click.option("--list-datasets", is_flag=True, help="Print the AIAK dataset table and exit.")
def aiak_gen(chain_file: Optional[str], aiak_job_info: Optional[str], pool: Optional[str], pfs: Optional[str],
             mount_path: Optional[str], dry_run: bool, force: bool, list_models: bool, list_datasets: bool) -> None:
    """Generate an AIAK LLM training chain: CHAIN_FILE from the description in AIAK_JOB_INFO.

    \b
    aiak-gen chain_info.json aiak_job_info.json --pool cce-xxxx --pfs pfs-xxxx
    job-chain run chain_info.json --follow

    If CHAIN_FILE exists, its top level (resourcePoolId, api_config, datasources, labels,
    queue) is kept and its jobs are replaced; the step scripts are written beside it.
    """
    from job_chain.aiak.generator import SCRIPT_NAMES, generate_chain, is_generated, parse_spec
    from job_chain.errors import UsageError
    from job_chain.files import write_private, write_public
    from job_chain.jsonfile import load_json_object

    if list_models or list_datasets:
        for which in (["models"] if list_models else []) + (["datasets"] if list_datasets else []):
            _print_tables(which)
        return
    if not chain_file or not aiak_job_info:
        raise UsageError("usage: aiak-gen CHAIN_FILE AIAK_JOB_INFO (see aiak-gen --help)")
    spec = parse_spec(load_json_object(aiak_job_info, "AIAK description"), aiak_job_info)
    template: Optional[dict] = None
    if os.path.exists(chain_file):
        template = load_json_object(chain_file, "chain file")
        if not force and not is_generated(template):
            raise UsageError(f"{chain_file} has jobs that aiak-gen did not generate: pass --force to replace "
                             "them (its top level is kept)")
    chain, scripts = generate_chain(spec, template, pool=pool, pfs=pfs, mount_path=mount_path)
    secret = (chain.get("api_config") or {}).get("sk") if isinstance(chain.get("api_config"), dict) else None
    text = json.dumps(chain, indent=4, ensure_ascii=False) + "\n"
    if dry_run:
        click.echo(text.replace(secret, "****") if isinstance(secret, str) and secret else text, nl=False)
        return
    directory = os.path.dirname(os.path.abspath(chain_file))
    for name, body in scripts.items():
        path = os.path.join(directory, name)
        write_public(path, body)
        os.chmod(path, 0o755)
    (write_private if secret else write_public)(chain_file, text)
    click.echo(f"wrote {chain_file} ({', '.join(j['name'] for j in chain['jobs'])}) and "
               f"{', '.join(SCRIPT_NAMES.values())}; TP={spec.tp} PP={spec.pp}")
    click.echo(f"next: job-chain run {chain_file} --follow")


def main() -> None:
    """Console-script entry point for ``aiak-gen``."""
    run_cli(aiak_gen, "aiak-gen")
