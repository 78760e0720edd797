"""Issue 18's items 14 and 18 in-process (CliRunner, no server needed): where a run starts, what a
dry run of a graph prints, and why ``runs`` cannot read a run."""

from __future__ import annotations

import json
import time
from pathlib import Path

from chain_helpers import write_chain
from click.testing import CliRunner

from job_chain.cli import cli as job_chain_cli
from job_chain.local.ports import free_port
from job_chain.record.records import RunRecords

ENV = {"AIHC_HOST": None, "AIHC_AK": "ak-not-used", "AIHC_SK": "sk-not-used-1234", "JOB_CHAIN_CREDENTIALS": None}


def graph(tmp_path: Path) -> Path:
    return write_chain(tmp_path, "pool-x", [
        {"name": "data", "script": "echo data"},
        {"name": "weights", "script": "echo weights"},
        {"name": "train", "script": "echo train", "jobChain": {"dependsOn": ["data", "weights"]}},
        {"name": "alert", "script": "echo alert", "jobChain": {"runOn": "failure"}},
    ])


def test_run_start_at_an_exit_handler_is_refused(tmp_path: Path) -> None:
    chain = graph(tmp_path)
    for where in ("3", "alert"):
        result = CliRunner().invoke(job_chain_cli, ["run", str(chain), "--start", where, "--host",
                                                    "http://127.0.0.1:9"], env=ENV)
        assert result.exit_code == 2, result.output
        assert "alert is an exit handler (runOn: failure)" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "chain_info.json.runs").exists()  # nothing recorded, nothing submitted


def test_graph_dry_run_prints_a_request_for_each_step_of_the_first_wave(tmp_path: Path) -> None:
    result = CliRunner().invoke(job_chain_cli, ["run", str(graph(tmp_path)), "--dry-run", "--host",
                                                "http://127.0.0.1:9"], env=ENV)
    assert result.exit_code == 0, result.output
    assert result.output.count("POST http://127.0.0.1:9/api/v1/aijobs") == 2
    assert "# step data" in result.output and "# step weights" in result.output
    assert "# wave 0: 0 data, 1 weights" in result.output and "# after the run (failure): 3 alert" in result.output


def test_runs_says_why_a_run_cannot_be_read(tmp_path: Path, no_backoff: None) -> None:
    """A run on a server that does not answer is 'unknown' with the reason in the table itself
    (after the client's retries, here without their back-off)."""
    chain = graph(tmp_path)
    records = RunRecords(str(chain))
    run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-abcd"
    records.create_run(run_id, chain=str(chain), startStep=0, mode="job", endpoint=f"http://127.0.0.1:{free_port()}",
                       pool="pool-x", local=False)
    table = CliRunner().invoke(job_chain_cli, ["runs", str(chain)], env=ENV)
    assert table.exit_code == 0, table.output
    row = next(line for line in table.output.splitlines() if line.startswith(run_id))
    assert "unknown" in row and "cannot read its status:" in row
    listed = json.loads(CliRunner().invoke(job_chain_cli, ["runs", str(chain), "--json"], env=ENV).output)
    assert listed[0]["outcome"] == "unknown" and listed[0]["reason"].startswith("cannot read its status:")
