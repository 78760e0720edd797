"""``aiak-gen``: write an AIAK training chain (convert → preprocess → train) from a description.

A thin layer over :mod:`job_chain.aiak.generator`: read the two files, check ``--force``, write
the chain and the step scripts atomically (or print the chain with ``--dry-run``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import click

from job_chain import __version__
from job_chain.cli import Command, run_cli

PROG = "aiak-gen"


def _table_rows(which: str, known: Any) -> List[Dict[str, Any]]:
    """The merged table as plain rows, each with where it came from (for the table and --json)."""
    def origin(row: Any) -> Dict[str, Any]:
        o = row.origin
        return {"source": o.layer, "file": o.file, "line": o.line}

    if which == "models":
        from job_chain.aiak.tables import MODEL_OPTIONAL_COLUMNS

        return [dict(series=m.series, model_name=m.name, hf_name=m.hf_name, url=m.url, tp=m.tp, pp=m.pp,
                     **{c: getattr(m, c) for c in MODEL_OPTIONAL_COLUMNS}, **origin(m))
                for m in known.models.values()]
    return [dict(dataset_name=d.name, url=d.url, **origin(d)) for d in known.datasets.values()]


def _print_tables(which: str, known: Any, as_json: bool) -> None:
    from job_chain.aiak.tables import SHIPPED
    from job_chain.cli.render import print_table

    rows = _table_rows(which, known)
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return

    def source(row: Dict[str, Any]) -> str:
        return SHIPPED if row["source"] == SHIPPED else f"{row['source']} {row['file']}:{row['line']}"

    if which == "models":
        print_table(["SERIES", "MODEL_NAME", "HF NAME", "DEFAULT TP", "DEFAULT PP", "EP", "MODEL_URL", "SOURCE"],
                    [[r["series"], r["model_name"], r["hf_name"], r["tp"] or "-", r["pp"] or "-", r["ep"] or "-",
                      r["url"] or "-", source(r)] for r in rows],
                    title="AIAK models (DEFAULT TP/PP '-': set TP and PP yourself; MODEL_URL '-': set "
                          "MODEL_URL; --json shows launchers and converter configs)")
    else:
        print_table(["DATASET_NAME", "DATASET_URL", "SOURCE"],
                    [[r["dataset_name"], r["url"], source(r)] for r in rows], title="AIAK datasets")


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
    from job_chain.util.files import write_private, write_public

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
    """The chain text with the template's api_config secrets (sk, sessionToken) hidden (for printing only)."""
    api = chain.get("api_config")
    for key in ("sk", "sessionToken"):
        secret = api.get(key) if isinstance(api, dict) else None
        if not isinstance(secret, str) or not secret:
            continue
        for shown in (json.dumps(secret, ensure_ascii=False), json.dumps(secret)):
            text = text.replace(shown, '"****"')
    return text


@click.command(PROG, cls=Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name=PROG)
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
@click.option("--dict", "dict_dir", default=None, metavar="DIR",
              help="Your own models.csv/datasets.csv, over the shipped tables (also: $AIAK_DICT, "
                   "and an aiak_dict/ beside CHAIN_FILE).")
@click.option("--list-models", is_flag=True,
              help="Print the merged model table (with each row's source) and exit.")
@click.option("--list-datasets", is_flag=True,
              help="Print the merged dataset table (with each row's source) and exit.")
@click.option("--json", "as_json", is_flag=True, help="With --list-*: print JSON.")
def aiak_gen(chain_file: Optional[str], aiak_job_info: Optional[str], pool: Optional[str],
             pfs: Optional[str], mount_path: Optional[str], dry_run: bool, force: bool,
             dict_dir: Optional[str], list_models: bool, list_datasets: bool, as_json: bool) -> None:
    """Write CHAIN_FILE: an AIAK training chain described by AIAK_JOB_INFO.

    \b
    aiak-gen chain_info.json aiak_job_info.json --pool POOL_ID --pfs PFS_NAME
    job-chain run chain_info.json --follow

    The chain's jobs convert the Hugging Face checkpoint to Megatron-core, preprocess the
    dataset and train (TRAINING_PHASE pretrain+sft: then preprocess the SFT data and fine-tune;
    EVAL: then evaluate each benchmark and report); their commands name aiak_convert.sh,
    aiak_preprocess.sh and aiak_train.sh (EVAL: aiak_eval.sh, aiak_report.sh), written beside
    CHAIN_FILE. If CHAIN_FILE exists, everything but its jobs is kept (resourcePoolId,
    api_config, ...) and its first job's datasources, labels and queue are reused; its jobs are
    replaced (--force if aiak-gen did not write them).

    Models and datasets come from the shipped tables, extended or overridden by your own
    models.csv/datasets.csv in --dict DIR, $AIAK_DICT, or aiak_dict/ beside CHAIN_FILE (that
    precedence); aiak-gen --list-models [CHAIN_FILE] shows the merged table.
    """
    from job_chain.aiak import tables
    from job_chain.aiak.generator import generate_chain, is_generated, notes, parse_spec
    from job_chain.errors import UsageError
    from job_chain.util.jsonfile import load_json_object

    if list_models or list_datasets:
        if aiak_job_info:
            raise UsageError("with --list-models/--list-datasets give at most CHAIN_FILE (its "
                             "aiak_dict/ is listed too)")
        known = tables.load(dict_dir, chain_file)
        if list_models:
            _print_tables("models", known, as_json)
        if list_datasets:
            _print_tables("datasets", known, as_json)
        return
    if as_json:
        raise UsageError("--json only goes with --list-models or --list-datasets")
    if not chain_file or not aiak_job_info:
        raise UsageError("missing arguments: aiak-gen CHAIN_FILE AIAK_JOB_INFO "
                         "(or --list-models / --list-datasets; see aiak-gen --help)")
    known = tables.load(dict_dir, chain_file)
    spec = parse_spec(load_json_object(aiak_job_info, "AIAK description"), aiak_job_info, known)
    template: Optional[Dict[str, Any]] = None
    if os.path.exists(chain_file):
        template = load_json_object(chain_file, "chain file")
        if not force and not is_generated(template):
            raise UsageError(f"{chain_file}: jobs: not generated by aiak-gen; pass --force to "
                             "replace them (everything else in the file is kept)")
    chain, scripts = generate_chain(spec, template, pool=pool, pfs=pfs, mount_path=mount_path,
                                    spec_source=aiak_job_info, template_source=chain_file,
                                    chain_path=os.path.abspath(chain_file))
    text = _chain_text(chain)
    for note in notes(spec):  # stderr: a dry run's stdout stays the chain alone
        click.echo(f"note: {note}", err=True)
    if dry_run:
        click.echo(_masked(chain, text), nl=False)
        return
    directory = os.path.dirname(os.path.abspath(chain_file))
    api = chain.get("api_config")
    has_secret = isinstance(api, dict) and bool(api.get("sk") or api.get("sessionToken"))
    files = {os.path.join(directory, name): (body, False, 0o755) for name, body in scripts.items()}
    files[chain_file] = (text, has_secret, 0o600 if has_secret else 0o644)  # last: a chain never lacks its scripts
    _write_all(files)
    click.echo(f"wrote {chain_file} ({', '.join(j['name'] for j in chain['jobs'])}; "
               f"TP={spec.tp} PP={spec.pp}) and {', '.join(scripts)}")
    click.echo(f"next: job-chain run {chain_file} --follow")


def main() -> None:
    """Console-script entry point for ``aiak-gen``."""
    run_cli(aiak_gen, PROG)
