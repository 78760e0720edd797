"""Issue 30, items 1 and 2: what passes locally passes on AIHC.

The local server gives a pod exactly what AIHC gives it (tests/test_local_exec.py checks the
variables): no API host, no keys, no job id, no ``POD_NAME``. So the in-job code must find the API
in the run record, whichever way ``run`` was given it, and must know the advancing pod by its RANK,
not by a host name that a host-network pod shares with its node.
"""

from __future__ import annotations

import json
import stat
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from chain_helpers import Ran, latest_run, write_chain
from conftest import LocalServer

CREDENTIAL_ENV = ("AIHC_HOST", "AIHC_AK", "AIHC_SK", "AIHC_SESSION_TOKEN", "AK", "SK", "HOST", "JOB_CHAIN_CREDENTIALS")


def bare_cli(*args: str, **env: str) -> Ran:
    """The CLI with no host or keys in its environment but those given, in this process (click's
    runner: the same command and words as a new Python, without its second of start-up on a busy
    machine). What runs in the jobs — each step's hop — is a real process in its pod regardless."""
    from click.testing import CliRunner

    from job_chain.cli import cli

    result = CliRunner().invoke(cli, list(args), env={**{name: None for name in CREDENTIAL_ENV}, **env})
    return Ran(result.exit_code, result.stdout, result.stderr)


def line(tmp_path: Path, server: LocalServer, **first: Any) -> Path:
    """A line of two steps whose storage (a datasource) holds the chain file and its record."""
    chain = write_chain(tmp_path, server.pool, [dict({"name": "a", "script": "echo a"}, **first),
                                                {"name": "b", "script": "echo b"}])
    data = json.loads(chain.read_text())
    for job in data["jobs"]:
        job["datasources"] = [{"type": "pfs", "name": "pfs", "mountPath": str(tmp_path)}]
    chain.write_text(json.dumps(data, indent=2))
    return chain


def outcome(chain: Path, wanted: str, timeout: float = 90) -> Dict[str, Any]:
    """The run's status once its outcome is ``wanted``, asked with no credentials anywhere: the
    record carries them."""
    end = time.monotonic() + timeout
    while True:
        done = bare_cli("status", str(chain), "--json")
        assert done.returncode == 0, done.stderr
        status = json.loads(done.stdout)
        if status["outcome"] == wanted:
            return status
        assert status["outcome"] in ("running", "pending") and time.monotonic() < end, status
        time.sleep(0.3)


@pytest.mark.parametrize("how", ["options", "env", "credentials file", "api_config"])
def test_a_chain_runs_to_the_end_however_run_was_given_its_host_and_keys(tmp_path: Path, shared_server: LocalServer,
                                                                        how: str) -> None:
    """On AIHC a pod has no host and no keys; before, a run given them any other way than the
    chain's api_config submitted its first step, whose hop then found no host and exited 75."""
    chain = line(tmp_path, shared_server)
    server = shared_server
    given: List[str] = []
    env: Dict[str, str] = {}
    if how == "options":
        given = ["--host", server.url, "--ak", server.ak, "--sk", server.sk]
    elif how == "env":
        env = {"AIHC_HOST": server.url, "AIHC_AK": server.ak, "AIHC_SK": server.sk}
    elif how == "credentials file":
        given = ["--credentials", server.credentials_file]
    else:
        data = json.loads(chain.read_text())
        data["api_config"] = {"host": server.url, "ak": server.ak, "sk": server.sk}
        chain.write_text(json.dumps(data))
    started = bare_cli("run", str(chain), *given, **env)
    assert started.returncode == 0, started.stderr
    status = outcome(chain, "succeeded")
    assert [(s["name"], s["status"]) for s in status["steps"]] == [("a", "Succeeded"), ("b", "Succeeded")]
    record = tmp_path / "chain_info.json.runs" / latest_run(chain) / "credentials.json"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert json.loads(record.read_text()) == {"host": server.url, "ak": server.ak, "sk": server.sk}
    with server.db() as db:  # never in a job's command or environment
        texts = [row["spec"] for row in db.execute("SELECT spec FROM jobs")] + \
                [row["env"] for row in db.execute("SELECT env FROM pods")]
    assert not [t for t in texts if server.sk in t]


def test_a_two_replica_host_network_step_hands_on_at_once(tmp_path: Path, shared_server: LocalServer) -> None:
    """In a host-network pod (AIHC's default with RDMA) HOSTNAME is the node's: the RANK 0 pod took
    itself for one of "the other replicas", waited for itself until the deadline and failed a step
    whose script succeeded. The deadline is 30 s here (600 by default)."""
    chain = line(tmp_path, shared_server, replicas=2)
    data = json.loads(chain.read_text())
    spec = data["jobs"][0]["jobSpec"]
    spec["enableRDMA"] = True  # hostNetwork follows, as on AIHC
    spec["envs"].append({"name": "JOB_CHAIN_ADVANCE_DEADLINE", "value": "30"})
    chain.write_text(json.dumps(data))
    started = time.monotonic()
    assert bare_cli("run", str(chain), "--credentials", shared_server.credentials_file).returncode == 0
    status = outcome(chain, "succeeded", timeout=60)
    assert [s["status"] for s in status["steps"]] == ["Succeeded", "Succeeded"]
    assert time.monotonic() - started < 25  # at once, not after the other replicas' deadline


def test_an_image_whose_python_is_older_than_3_8_is_told_which_it_has_and_what_is_needed() -> None:
    """Issue 30 item 3: the tail's ``python3 -m job_chain.hop`` in an image with Python 3.6 or 3.7
    failed after the user's script succeeded with an "internal error" (or a SyntaxError's traceback)."""
    import ast
    import sys

    import job_chain

    source = Path(job_chain.__file__).read_text()
    ast.parse(source, feature_version=(3, 4))  # the check itself runs on any Python 3 (no f-strings)
    older = ("import sys; sys.version_info = (3, 6, 9, 'final', 0); import runpy; "
             "runpy.run_module('job_chain.hop', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", older, "--run", "r", "--step", "a", "--exit-code", "0", "chain.json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 75, done.stderr  # the advance failed: a resume submits what it would have
    assert done.stderr.startswith("job-chain: error: this python3 is Python 3.6.9 (")
    assert "needs Python 3.8 or newer" in done.stderr and "job-chain resume" in done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


def test_a_job_mode_run_whose_jobs_could_not_read_its_record_is_refused_and_said_only_when_it_matters(
        tmp_path: Path, shared_server: LocalServer) -> None:
    """Issue 30 item 1 / issue 29 item 14: the record carries the API to the jobs, so a step whose
    mounts do not hold it could not advance the run: ``run`` refuses it with the fix, instead of a
    warning nobody heeds; ``--local``, ``--inline`` and watch runs are not told (it cannot matter)."""
    from job_chain.spec.loader import load_chain, reachability

    chain = line(tmp_path / "chains", shared_server)
    data = json.loads(chain.read_text())
    data["jobs"][1]["datasources"] = [{"type": "pfs", "name": "pfs", "mountPath": str(tmp_path / "elsewhere")}]
    chain.write_text(json.dumps(data))
    refused = bare_cli("run", str(chain), "--credentials", shared_server.credentials_file)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert f"config_path {chain} is under none of jobs[1]'s datasource mountPaths" in refused.stderr
    assert "could not read the run record" in refused.stderr and "set \"config_path\"" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not [p for p in Path(f"{chain}.runs").glob("*") if not p.name.startswith(".")]  # nothing recorded
    dry = bare_cli("run", str(chain), "--dry-run", "--credentials", shared_server.credentials_file)
    assert dry.returncode == 2 and "could not read the run record" in dry.stderr, dry.stderr  # as run would
    loaded = load_chain(str(chain), local=True)
    assert reachability(loaded, "job", local=True) == ([], [])  # a --local run's pods read this machine's files
    assert reachability(loaded, "inline")[0] == [] and reachability(loaded, "watch") == ([], [])
    said = bare_cli("validate", str(chain))
    assert said.returncode == 0 and "(a job-mode run on a cluster is refused)" in said.stderr + said.stdout
    assert "under none" not in (lambda d: d.stderr + d.stdout)(bare_cli("validate", str(chain), "--local"))
    inline = bare_cli("run", str(chain), "--inline", "--dry-run", "--credentials", shared_server.credentials_file)
    assert inline.returncode == 0 and "under none" not in inline.stderr, inline.stderr
