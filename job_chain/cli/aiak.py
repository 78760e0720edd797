"""``aiak-gen``: write an AIAK training chain (convert → preprocess → train) from a description.

A thin layer over :mod:`job_chain.aiak.generator`: read the two files, check ``--force``, write
the chain and the step scripts atomically (or print the chain with ``--dry-run``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import click

from job_chain.cli import Command, run_cli

PROG = "aiak-gen"


def _print_tables(which: str) -> None:
    from job_chain.aiak import tables
    from job_chain.cli.render import print_table

    if which == "models":
        print_table(["SERIES", "MODEL_NAME", "HF NAME", "DEFAULT TP", "DEFAULT PP", "MODEL_URL"],
                    [[m.series, m.name, m.hf_name, m.tp or "-", m.pp or "-", m.url]
                     for m in tables.models().values()],
                    title="AIAK models (DEFAULT TP/PP '-': set TP and PP yourself)")
    else:
        print_table(["DATASET_NAME", "DATASET_URL"],
                    [[d.name, d.url] for d in tables.datasets().values()], title="AIAK datasets")


def _chain_text(chain: Dict[str, Any]) -> str:
    """The chain as the file's text: UTF-8 as is, escapes only for text that is not valid Unicode."""
    text = json.dumps(chain, indent=4, ensure_ascii=False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800" in the template) can only be escaped
        text = json.dumps(chain, indent=4) + "\n"
    return text


def _write_all(files: Dict[str, Tuple[str, bool, int]]) -> None:
    """Write ``{path: (text, private, mode)}`` in order; on failure restore what was there."""
    from job_chain.errors import UsageError
    from job_chain.files import write_private, write_public

    before: Dict[str, Optional[bytes]] = {}
    current = ""
    try:
        for current, (text, private, mode) in files.items():
            before[current] = Path(current).read_bytes() if os.path.isfile(current) else None
            (write_private if private else write_public)(current, text)
            os.chmod(current, mode)
    except OSError as exc:
        for path, old in before.items():
            try:
                if old is None:
                    os.unlink(path)
                else:
                    with open(path, "wb") as handle:
                        handle.write(old)
            except OSError:
                pass
        raise UsageError(f"cannot write {current}: {exc.strerror or exc}; nothing written") from None


def _masked(chain: Dict[str, Any], text: str) -> str:
    """The chain text with the template's api_config secret hidden (for printing only)."""
    api = chain.get("api_config")
    secret = api.get("sk") if isinstance(api, dict) else None
    if not isinstance(secret, str) or not secret:
        return text
    for shown in (json.dumps(secret, ensure_ascii=False), json.dumps(secret)):
        text = text.replace(shown, '"****"')
    return text


@click.command(PROG, cls=Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("chain_file", required=False)
@click.argument("aiak_job_info", required=False)
@click.option("--pool", default=None, metavar="ID",
              help="Resource pool id (required unless CHAIN_FILE exists and has one).")
@click.option("--pfs", default=None, metavar="NAME",
              help="PFS datasource name (required unless CHAIN_FILE exists and has datasources).")
@click.option("--mount-path", default=None, metavar="PATH",
              help="Where the PFS is mounted in the jobs (default: MOUNT_PATH, else /root/pfs).")
@click.option("--dry-run", is_flag=True, help="Print the chain instead of writing any file.")
@click.option("--force", is_flag=True,
              help="Replace the jobs of a CHAIN_FILE that aiak-gen did not generate.")
@click.option("--list-models", is_flag=True, help="Print the AIAK model table and exit.")
@click.option("--list-datasets", is_flag=True, help="Print the AIAK dataset table and exit.")
def aiak_gen(chain_file: Optional[str], aiak_job_info: Optional[str], pool: Optional[str],
             pfs: Optional[str], mount_path: Optional[str], dry_run: bool, force: bool,
             list_models: bool, list_datasets: bool) -> None:
    """Write CHAIN_FILE: an AIAK training chain described by AIAK_JOB_INFO.

    \b
    aiak-gen chain_info.json aiak_job_info.json --pool POOL_ID --pfs PFS_NAME
    job-chain run chain_info.json --follow

    The chain's three jobs convert the Hugging Face checkpoint to Megatron-core, preprocess
    the dataset and train; their commands name aiak_convert.sh, aiak_preprocess.sh and
    aiak_train.sh, written beside CHAIN_FILE. If CHAIN_FILE exists, everything but its jobs is
    kept (resourcePoolId, api_config, ...) and its first job's datasources, labels and queue
    are reused; its jobs are replaced (--force if aiak-gen did not write them).
    """
    from job_chain.aiak.generator import SCRIPT_NAMES, generate_chain, is_generated, parse_spec
    from job_chain.errors import UsageError
    from job_chain.jsonfile import load_json_object

    if list_models or list_datasets:
        if list_models:
            _print_tables("models")
        if list_datasets:
            _print_tables("datasets")
        return
    if not chain_file or not aiak_job_info:
        raise UsageError("missing arguments: aiak-gen CHAIN_FILE AIAK_JOB_INFO "
                         "(or --list-models / --list-datasets; see aiak-gen --help)")
    spec = parse_spec(load_json_object(aiak_job_info, "AIAK description"), aiak_job_info)
    template: Optional[Dict[str, Any]] = None
    if os.path.exists(chain_file):
        template = load_json_object(chain_file, "chain file")
        if not force and not is_generated(template):
            raise UsageError(f"{chain_file}: jobs: not generated by aiak-gen; pass --force to "
                             "replace them (everything else in the file is kept)")
    chain, scripts = generate_chain(spec, template, pool=pool, pfs=pfs, mount_path=mount_path,
                                    spec_source=aiak_job_info, template_source=chain_file)
    text = _chain_text(chain)
    if dry_run:
        click.echo(_masked(chain, text), nl=False)
        return
    directory = os.path.dirname(os.path.abspath(chain_file))
    api = chain.get("api_config")
    has_secret = isinstance(api, dict) and bool(api.get("sk"))
    files = {os.path.join(directory, name): (body, False, 0o755) for name, body in scripts.items()}
    files[chain_file] = (text, has_secret, 0o600 if has_secret else 0o644)  # last: a chain never lacks its scripts
    _write_all(files)
    click.echo(f"wrote {chain_file} ({', '.join(j['name'] for j in chain['jobs'])}; "
               f"TP={spec.tp} PP={spec.pp}) and {', '.join(SCRIPT_NAMES.values())}")
    click.echo(f"next: job-chain run {chain_file} --follow")


def main() -> None:
    """Console-script entry point for ``aiak-gen``."""
    run_cli(aiak_gen, PROG)
