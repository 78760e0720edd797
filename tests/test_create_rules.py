"""One set of create-body rules (job_chain.aihc.spec) for the chain loader and the local server.

In-process: the loader (``job-chain validate``, strict mode) and the server's ``validate_create``
(accepting mode) must agree on every body and name the same fields, except that the server
ignores an unknown key (and lists it) where validate reports it with "did you mean".
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest
from click.testing import CliRunner

from job_chain.aihc import spec
from job_chain.aihc.names import job_name_problem
from job_chain.cli import cli
from job_chain.local import store
from job_chain.local.backend import validate_create
from job_chain.local.errors import BadRequest
from job_chain.spec.loader import ChainFileError, check_chain_data, load_chain

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def body(**spec_fields: Any) -> Dict[str, Any]:
    extra = spec_fields.pop("top", {})
    result = {"name": "step-a", "jobSpec": {"command": "echo hi", "image": "img", "replicas": 1}}
    result["jobSpec"].update(spec_fields)
    result.update(extra)
    return result


def loader_problems(job: Dict[str, Any], tmp_path: Path) -> List[str]:
    try:
        check_chain_data({"resourcePoolId": "p", "jobs": [job]}, str(tmp_path / "chain_info.json"))
    except ChainFileError as exc:
        return exc.problems
    return []


def server_message(job: Dict[str, Any]) -> str:
    try:
        validate_create(job)
    except BadRequest as exc:
        assert exc.code == "InappropriateJSON"  # BCE's code for a missing or mistyped item
        return exc.message
    return ""


# Each body has one problem; both validators must name this field (before: they disagreed).
CASES = [
    (body(top={"labels": [{"key": "team"}]}), "labels[0].value", "required"),
    (body(top={"labels": [{"key": "team", "value": 3}]}), "labels[0].value", "must be a string"),
    (body(top={"labels": ["team"]}), "labels[0]", "must be an object"),
    (body(envs=[{"name": "A=B", "value": "x"}]), "jobSpec.envs[0].name", "not a valid environment variable name"),
    (body(envs=[{"name": "A\n", "value": "x"}]), "jobSpec.envs[0].name", "not a valid environment variable name"),
    (body(envs=[{"name": "A", "value": "x\x00y"}]), "jobSpec.envs[0].value", "NUL byte"),
    (body(command="echo a\x00b"), "jobSpec.command", "NUL byte at character 7"),
    (body(image="i\x00"), "jobSpec.image", "NUL byte"),
    (body(top={"priority": ["high"]}), "priority", "must be one of high, normal, low"),
    (body(top={"priority": "urgent"}), "priority", "must be one of high, normal, low"),
    (body(replicas=10**30), "jobSpec.replicas", "must be a positive integer"),
    (body(replica=2), "jobSpec.replica", 'unknown key (did you mean "replicas"?)'),
    (body(top={"labls": []}), "labls", 'unknown key (did you mean "labels"?)'),
    (body(envs=[{"name": "A", "valeu": "x"}]), "jobSpec.envs[0].valeu", 'did you mean "value"?'),
    (body(top={"labels": [{"key": "k", "value": "v", "kye": 1}]}), "labels[0].kye", 'did you mean "key"?'),
    (body(top={"datasources": [{"type": "pfs", "name": "p", "mountPath": "/m", "mountpath": "/x"}]}),
     "datasources[0].mountpath", 'did you mean "mountPath"?'),
    (body(resources=[{"name": "cpu", "quantitiy": 1}]), "jobSpec.resources[0].quantitiy",
     'did you mean "quantity"?'),
    (body(top={"datasources": [{"mountPath": "/a\x00b"}]}), "datasources[0].mountPath", "NUL byte"),
    (body(top={"datasources": [{"mountPath": "rel"}]}), "datasources[0].mountPath", "absolute path"),
    (body(enableRDMA="yes"), "jobSpec.enableRDMA", "must be true or false"),
    (body(resources=[{"name": "cpu", "quantity": 1e306}]), "jobSpec.resources[0].quantity", "must be at most"),
    (body(resources=[{"name": "memory", "quantity": "9" * 400 + "Gi"}]), "jobSpec.resources[0].quantity",
     "must be at most"),
    (body(top={"name": "ok-name\n"}), "name", "use lowercase letters"),
]


@pytest.mark.parametrize("job, path, message", CASES)
def test_loader_and_server_name_the_same_field(tmp_path: Path, job: Dict[str, Any], path: str, message: str) -> None:
    problems = loader_problems(job, tmp_path)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"jobs[0].{path}: ") and message in problems[0], problems
    assert all(line.isprintable() for line in problems)
    if "unknown key" in problems[0]:  # AIHC ignores what it does not recognise; so does the server
        assert server_message(job) == ""
        assert validate_create(job)[1] == [path]
    else:
        assert server_message(job) == problems[0][len("jobs[0]."):]


def test_replica_typo_reads_as_the_issue_shows(tmp_path: Path) -> None:
    assert loader_problems(body(replica=2), tmp_path) == [
        'jobs[0].jobSpec.replica: unknown key (did you mean "replicas"?)']


def test_every_problem_is_reported_by_both(tmp_path: Path) -> None:
    job = body(replica=2, envs=[{"name": "A=B"}], top={"labels": [{"key": "k"}], "priority": "x"})
    problems = loader_problems(job, tmp_path)
    assert len(problems) == 4
    message = server_message(job)
    assert message.startswith("3 problems: ")  # the unknown key is ignored, not refused
    assert all(p[len("jobs[0]."):] in message for p in problems if "unknown key" not in p)


def test_replica_cap_is_the_local_servers_own(tmp_path: Path) -> None:
    job = body(replicas=65)
    assert loader_problems(job, tmp_path) == []  # a real AIHC pool may run 65 nodes
    assert server_message(job) == "jobSpec.replicas: at most 64 on the local server, found 65"


def test_seed_examples_and_sdk_shaped_bodies_stay_valid(tmp_path: Path) -> None:
    for chain_file in sorted(EXAMPLES.glob("*/chain_info.json")):
        chain = load_chain(str(chain_file))
        for step in chain.steps:
            assert "jobChain" not in step.body and "scriptFile" not in step.body["jobSpec"]
            assert spec.body_problems(step.body) == []
            assert validate_create(step.body)[1] == []
    full = {"name": "full", "queue": "default", "priority": "high", "jobFramework": "PyTorchJob",
            "faultTolerance": False, "enableBccl": False, "faultToleranceConfig": {},
            "labels": [{"key": "a", "value": "b"}],
            "datasources": [{"type": "pfs", "name": "pfs-1", "mountPath": "/mnt", "options": {}}],
            "jobSpec": {"command": "c", "image": "i", "replicas": 2, "enableRDMA": True, "hostNetwork": False,
                        "imageConfig": {}, "envs": [{"name": "A", "value": "1"}],
                        "resources": [{"name": "baidu.com/a800_80g_cgpu", "quantity": 8}]}}
    assert spec.body_problems(full) == []
    job = copy.deepcopy(full)
    job["jobChain"] = {"retries": 1}
    job["jobSpec"]["scriptFile"] = "a.sh"
    (tmp_path / "a.sh").write_text("echo a\n")
    chain = check_chain_data({"resourcePoolId": "p", "jobs": [job]}, str(tmp_path / "chain_info.json"))
    assert chain.steps[0].body == dict(full, jobSpec=dict(full["jobSpec"], command="echo a\n"))


def test_priorities_are_spelled_once() -> None:
    from job_chain.aiak import generator
    from job_chain.cli.jobs import PRIORITIES as CLI_CHOICE

    assert tuple(CLI_CHOICE.choices) == spec.PRIORITIES
    assert tuple(store.PRIORITY_RANK) == spec.PRIORITIES
    assert generator.PRIORITIES is spec.PRIORITIES


@pytest.mark.parametrize("name", ["abc\n", "a\n", "abc-1\n"])
def test_a_trailing_newline_is_not_a_valid_name(name: str) -> None:
    assert job_name_problem(name) is not None
    assert job_name_problem(name.strip()) is None


def test_script_with_a_nul_byte_is_refused_with_its_position(tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_bytes(b"echo ok\necho a\x00b\n")
    path = tmp_path / "chain_info.json"
    path.write_text(json.dumps({"resourcePoolId": "p", "jobs": [
        {"name": "a", "jobSpec": {"command": "run.sh", "image": "i"}},
        {"name": "b", "jobSpec": {"scriptFile": "run.sh", "image": "i"}}]}))
    with pytest.raises(ChainFileError) as info:
        load_chain(str(path))
    assert info.value.problems == [
        "jobs[0].jobSpec.command: names script file run.sh:2:7: contains a NUL byte, which no process "
        "can be given (remove it)",
        "jobs[1].jobSpec.scriptFile: script file run.sh:2:7: contains a NUL byte, which no process "
        "can be given (remove it)"]
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2 and "NUL byte" in result.stderr and "OK" not in result.stdout


def test_non_utf8_script_says_encoding_and_position(tmp_path: Path) -> None:
    (tmp_path / "latin.sh").write_bytes("echo ok\necho caf\xe9\n".encode("latin-1"))
    path = tmp_path / "chain_info.json"
    path.write_text(json.dumps({"resourcePoolId": "p", "jobs": [
        {"name": "a", "jobSpec": {"scriptFile": "latin.sh", "image": "i"}}]}))
    with pytest.raises(ChainFileError) as info:
        load_chain(str(path))
    assert info.value.problems == [
        "jobs[0].jobSpec.scriptFile: script file latin.sh:2:9: not UTF-8 text: invalid byte 0xe9 at "
        "byte offset 16 (save the file as UTF-8)"]


def test_a_long_odd_key_is_cut_inside_its_quotes() -> None:
    """A JSON path names an odd key as ['…']; a long one is cut inside the quotes (found by the fuzz drill)."""
    from job_chain.aihc.keys import key_path

    path = key_path("jobs[2].jobSpec.envs[0]", "9" * 5000)
    assert path.startswith("jobs[2].jobSpec.envs[0]['999") and path.endswith("...']") and len(path) < 100
