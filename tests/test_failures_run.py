"""Know why a step failed, on the real local server: causes from every pod's log, budgets per
cause, the user's own rules, checkpoint-aware retries, GPU-hours, timeouts in words.

Each test is one short run; scripts print the lines PyTorch, NCCL and Python print.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List

from click.testing import CliRunner, Result
from conftest import LocalServer

from job_chain import ChainSession, Outcome
from job_chain.cli import cli as job_chain_cli

NCCL_TIMEOUT = ("[rank1]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=7753, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                "Timeout(ms)=600000) ran for 600061 milliseconds before timing out.")


def write(directory: Path, pool: str, jobs: List[Dict[str, Any]]) -> Path:
    """jobs: {"name", "script", optional "replicas", "resources", "jobChain"}, sharing ``directory/shared``."""
    shared = directory / "shared"
    shared.mkdir(parents=True, exist_ok=True)
    bodies = []
    for spec in jobs:
        (directory / f"{spec['name']}.sh").write_text(spec["script"])
        body: Dict[str, Any] = {"name": spec["name"], "jobSpec": {
            "command": f"{spec['name']}.sh", "image": "local", "replicas": spec.get("replicas", 1),
            "envs": [{"name": "SHARED", "value": str(shared)}], "resources": spec.get("resources", [])}}
        if spec.get("jobChain"):
            body["jobChain"] = spec["jobChain"]
        bodies.append(body)
    path = directory / "chain_info.json"
    path.write_text(json.dumps({"resourcePoolId": pool, "jobs": bodies}, indent=2))
    return path


def invoke(server: LocalServer, *args: str) -> Result:
    env = {"JOB_CHAIN_CREDENTIALS": server.credentials_file, "AIHC_HOST": None, "AIHC_AK": None, "AIHC_SK": None}
    return CliRunner().invoke(job_chain_cli, list(args), env=env)


def run_to_end(chain: Path, server: LocalServer, timeout: float = 90) -> Any:
    s = ChainSession.from_file(str(chain), client=server.client(max_retries=3))
    run = s.start()
    return s, run, s.wait(run.run_id, timeout=timeout, interval=0.3)


def causes_of(status_json: Dict[str, Any], step: int = 0) -> List[Any]:
    return [(a["failure"] or {}).get("class") for a in status_json["steps"][step]["attempts"]]


def test_an_nccl_timeout_is_retried_within_the_infra_budget_and_a_missing_module_is_not(
        tmp_path: Path, shared_server: LocalServer) -> None:
    once = ('if [ ! -f "$SHARED/tried" ]; then touch "$SHARED/tried"; echo "iteration 10/100 | lm loss: 3.2"\n'
            f'echo "{NCCL_TIMEOUT}" >&2; exit 1; fi\n'
            'echo "Traceback (most recent call last):" >&2\n'
            'echo "ModuleNotFoundError: No module named \'apex\'" >&2; exit 1\n')
    chain = write(tmp_path, shared_server.pool, [
        {"name": "train", "script": once, "jobChain": {"retries": {"infra": 2, "user": 0}}}])
    s, run, final = run_to_end(chain, shared_server)
    assert final.outcome is Outcome.FAILED
    data = json.loads(invoke(shared_server, "status", str(chain), "--json").output)
    assert causes_of(data) == ["infra", "user"]
    first, second = (a["failure"] for a in data["steps"][0]["attempts"])
    assert first["signature"] == "nccl-watchdog-timeout" and "Watchdog caught collective" in first["line"]
    assert second["signature"] == "python-module-not-found" and first["pod"].endswith("master-0")
    assert data["failedSteps"][0]["failure"]["class"] == "user"
    log = s.log(run.run_id, step="train", attempt=1)
    assert ("attempt 1 failed: infra (nccl-watchdog-timeout on pod " in log
            and "retrying as attempt 2; infra budget 1 left" in log), log
    assert "not retried: its retries give user failures no budget" in s.log(run.run_id, step="train", attempt=2)
    table = invoke(shared_server, "status", str(chain)).output
    assert "user (python-module-not-found" in table
    assert "user (python-module-not-found" in final.reason

