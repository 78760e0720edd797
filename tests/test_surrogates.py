"""Issue 18 item 1: a lone UTF-16 surrogate ("\\udce9" in JSON) must not poison a pool.

A create holding one is refused (400 naming the field, v1 and v2), ``validate`` names it, a row
already stored with one reads as U+FFFD (never a 500), the console's Check answers 400, and
``run`` refuses the chain without recording a run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
import requests
from chain_helpers import cli
from click.testing import CliRunner
from conftest import LocalServer, job_body

from job_chain.aihc.errors import AIHCError
from job_chain.cli import cli as job_chain_cli
from job_chain.local.backend import validate_create
from job_chain.local.errors import BadRequest
from job_chain.local.store import Store
from job_chain.spec.loader import ChainFileError, check_chain_data

BAD = "caf\udce9"


def poisoned(field: str) -> Dict[str, Any]:
    body = job_body("poison", "true")
    if field == "labels[0].value":
        body["labels"] = [{"key": "team", "value": BAD}]
    elif field == "jobSpec.command":
        body["jobSpec"]["command"] = f"echo {BAD}"
    elif field == "datasources[0].mountPath":
        body["datasources"] = [{"type": "pfs", "name": "p", "mountPath": f"/tmp/{BAD}"}]
    elif field == "jobSpec.envs[0].value":
        body["jobSpec"]["envs"] = [{"name": "A", "value": BAD}]
    return body


FIELDS = ["labels[0].value", "jobSpec.command", "datasources[0].mountPath", "jobSpec.envs[0].value"]


@pytest.mark.parametrize("field", FIELDS)
def test_a_lone_surrogate_is_refused_naming_the_field(field: str, tmp_path: Path) -> None:
    with pytest.raises(BadRequest) as refused:  # the local server's rule
        validate_create(poisoned(field))
    assert f"{field}: holds a lone UTF-16 surrogate '\\udce9' at character" in refused.value.message
    with pytest.raises(ChainFileError) as invalid:  # validate's, on the same body
        check_chain_data({"resourcePoolId": "p", "jobs": [poisoned(field)]}, str(tmp_path / "c.json"))
    assert any(p.startswith(f"jobs[0].{field}: holds a lone UTF-16 surrogate") for p in invalid.value.problems)


def test_validate_names_a_lone_surrogate_anywhere_in_the_chain_file(tmp_path: Path) -> None:
    chain = tmp_path / "chain_info.json"
    chain.write_text('{"resourcePoolId": "p", "notify": [{"url": "http://x/\\udce9"}],\n'
                     ' "jobs": [{"name": "a", "jobSpec": {"command": "true", "image": "i"},\n'
                     '           "jobChain": {"metrics": {"lo\\ud800ss": "loss: (\\\\d+)"}}}]}')
    result = CliRunner().invoke(job_chain_cli, ["validate", str(chain)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "notify[0].url: holds a lone UTF-16 surrogate '\\udce9'" in result.output
    assert "jobs[0].jobChain.metrics['lo\\ud800ss']: the key holds a lone UTF-16 surrogate" in result.output


def test_creates_with_a_lone_surrogate_are_refused_over_v1_and_v2(shared_server: LocalServer) -> None:
    from job_chain.aihc.client_v2 import AIHCClientV2
    from job_chain.aihc.credentials import Credentials

    body = poisoned("labels[0].value")
    with pytest.raises(AIHCError) as v1:
        shared_server.client().create_job(shared_server.pool, body)
    assert v1.value.status == 400 and "labels[0].value: holds a lone UTF-16 surrogate" in str(v1.value)
    v2 = AIHCClientV2(Credentials(shared_server.url, shared_server.ak, shared_server.sk), max_retries=0)
    with pytest.raises(AIHCError) as refused:
        v2.create_job(shared_server.pool, poisoned("jobSpec.command"))
    assert refused.value.status == 400 and "jobSpec.command: holds a lone UTF-16 surrogate" in str(refused.value)
    listed = shared_server.client().list_jobs(shared_server.pool)  # the pool still answers
    assert all(j["name"] != "poison" for j in listed["jobs"])


def test_a_row_stored_with_a_lone_surrogate_reads_as_a_replacement_character(local_server: LocalServer) -> None:
    """A state.db written before the refusal: listing the pool and reading the job never fail."""
    client = local_server.client()
    healthy = client.create_job(local_server.pool, job_body("healthy", "true"))["jobId"]
    local_server.wait_status(healthy, "Succeeded")
    local_server.stop()
    store = Store(str(local_server.state_dir / "state.db"))
    try:  # what an older server stored: the body as given, surrogate and all
        body = dict(poisoned("labels[0].value"), jobSpec={"image": "i", "command": "true", "replicas": 1},
                    queue="default", priority="normal")
        job, _ = store.create_job(local_server.pool, "poison", body, "normal", "default", None, 1)
    finally:
        store.close()
    local_server.start()
    listed = client.list_jobs(local_server.pool)
    assert {j["name"] for j in listed["jobs"]} == {"healthy", "poison"}
    got = client.get_job(local_server.pool, job["id"])
    assert {"key": "team", "value": "caf\ufffd"} in got["labels"]
    local_server.wait_status(job["id"], "Succeeded")  # and the queue did not stall on it
    log = (local_server.state_dir / "server.log").read_text(errors="replace")
    assert "Traceback" not in log and "UnicodeEncodeError" not in log


def test_the_console_check_answers_400_naming_a_lone_surrogate(tmp_path: Path) -> None:
    from ui_helpers import Console

    console = Console([str(tmp_path)])
    try:
        text = json.dumps({"resourcePoolId": "p", "jobs": [poisoned("labels[0].value")]})  # "\udce9" escaped
        answer = requests.post(console.url + "/submit/check", headers={"X-CSRF-Token": console.guard.csrf},
                               data={"name": "poison.json", "chain": text})
        assert answer.status_code == 400
        assert "jobs[0].labels[0].value: holds a lone UTF-16 surrogate" in answer.text
    finally:
        console.close()


def test_run_refuses_a_lone_surrogate_and_records_no_run(tmp_path: Path, shared_server: LocalServer) -> None:
    chain = tmp_path / "chain_info.json"
    chain.write_text(json.dumps({"resourcePoolId": shared_server.pool, "jobs": [poisoned("jobSpec.command")]}))
    done = cli("run", str(chain), server=shared_server)
    assert done.returncode != 0 and "internal error" not in done.stderr.lower()
    assert "jobs[0].jobSpec.command: holds a lone UTF-16 surrogate" in done.stderr
    assert not (tmp_path / "chain_info.json.runs").exists() or not any((tmp_path / "chain_info.json.runs").iterdir())


def test_a_record_holding_a_lone_surrogate_is_written_and_reads_back(tmp_path: Path) -> None:
    """What reaches a run record from outside (an API answer, a file name that is not UTF-8)."""
    from job_chain.util.files import write_json_private

    target = tmp_path / "run.json"
    write_json_private(target, {"reason": BAD, "name": "中文"})
    assert json.loads(target.read_text("ascii")) == {"reason": BAD, "name": "中文"}
    write_json_private(target, {"name": "中文"})
    assert "中文" in target.read_text("utf-8")  # readable as before when it can be


def test_v2_actions_refuse_a_lone_surrogate_in_any_field(shared_server: LocalServer) -> None:
    """Not only creates: DescribeJob's jobId or DescribeJobs' keyword with "\\udce9" is a 400 naming
    the field, never a 500 from SQLite or a log search."""
    from job_chain.aihc.client_v2 import AIHCClientV2
    from job_chain.aihc.credentials import Credentials

    v2 = AIHCClientV2(Credentials(shared_server.url, shared_server.ak, shared_server.sk), max_retries=0)
    for action, body, field in [("DescribeJob", {"jobId": BAD}, "jobId"),
                                ("DescribeJobs", {"keyword": BAD}, "keyword")]:
        with pytest.raises(AIHCError) as refused:
            v2.action(action, shared_server.pool, body)
        assert refused.value.status == 400, (action, str(refused.value))
        assert f"{field}: holds a lone UTF-16 surrogate" in str(refused.value)
