"""Chain files: the seed format loads unchanged, and every bad input is one clear error."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, List

import pytest
from click.testing import CliRunner

from job_chain.cli import cli
from job_chain.errors import UsageError
from job_chain.spec.loader import ChainFileError, load_chain

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def write_chain(tmp_path: Path, data: object, scripts: dict = None) -> str:
    for name, text in (scripts or {}).items():
        (tmp_path / name).write_text(text)
    path = tmp_path / "chain_info.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return str(path)


def job(name: str = "step-a", **spec: object) -> dict:
    body = {"name": name, "jobSpec": {"command": "echo hi", "image": "img", "replicas": 1}}
    body["jobSpec"].update(spec)
    return body


def test_seed_example_loads_with_scripts_inlined() -> None:
    chain = load_chain(str(EXAMPLES / "job_info" / "chain_info.json"))
    assert chain.pool == "cce-e0isdmib"
    assert [s.name for s in chain.steps] == [f"test-api-llama2-7b-4-luyc-job{i}" for i in (1, 2, 3)]
    assert chain.steps[0].script == (EXAMPLES / "job_info" / "job1.sh").read_text()
    assert chain.steps[0].body["jobSpec"]["command"] == chain.steps[0].script
    assert chain.scrips_path == "/root/pfs/dev-test/job-chain/runtime"


def test_script_file_key_and_inline_command(tmp_path: Path) -> None:
    data = {"resourcePoolId": "p", "jobs": [
        {"name": "a", "jobSpec": {"scriptFile": "a.sh", "image": "i"}},
        {"name": "b", "jobSpec": {"command": "echo $HOME; ls", "image": "i"}},
    ]}
    chain = load_chain(write_chain(tmp_path, data, {"a.sh": "echo from a\n"}))
    assert chain.steps[0].script == "echo from a\n"
    assert "scriptFile" not in chain.steps[0].body["jobSpec"]
    assert chain.steps[1].script == "echo $HOME; ls"


def test_every_schema_problem_is_listed_with_its_path(tmp_path: Path) -> None:
    data = {"resourcePoolId": "p", "jobs": [
        job("Bad_Name"),
        {"name": "ok", "jobSpec": {"command": "missing.sh", "replicas": 0}},
        {"name": "ok2", "priority": "urgent", "jobSpec": {"command": "x", "image": "i",
                                                           "envs": [{"name": "N", "value": 3}]},
         "jobChain": {"retries": -1, "colour": "red"}},
    ]}
    with pytest.raises(ChainFileError) as info:
        load_chain(write_chain(tmp_path, data))
    problems = "\n".join(info.value.problems)
    assert "jobs[0].name: use lowercase letters" in problems
    assert "jobs[1].jobSpec.image: required" in problems
    assert "jobs[1].jobSpec.replicas: must be a positive integer, found 0" in problems
    assert "jobs[1].jobSpec.command: names script file missing.sh, which is not found" in problems
    assert "jobs[2].priority: must be one of high, normal, low" in problems
    assert "jobs[2].jobSpec.envs[0].value: must be a string" in problems
    assert "jobs[2].jobChain.retries: must be a whole number >= 0" in problems
    assert "jobs[2].jobChain.colour: unknown setting" in problems


def test_secret_in_env_or_script_is_refused(tmp_path: Path) -> None:
    secret = "S3cretKeyValue123456"
    data = {"resourcePoolId": "p", "api_config": {"host": "h", "ak": "a", "sk": secret}, "jobs": [
        job("a", envs=[{"name": "SK", "value": secret}]), job("b", command=f"echo {secret}")]}
    with pytest.raises(ChainFileError) as info:
        load_chain(write_chain(tmp_path, data))
    text = str(info.value)
    assert "jobs[0].jobSpec.envs[0].value: holds the secret key" in text
    assert "jobs[1].jobSpec.command: the script contains the secret key" in text
    assert secret not in text


@pytest.mark.parametrize("text, expected", [
    ('{"jobs": [\n  {"name": "a",}\n]}', "chain_info.json:2:15: invalid JSON: a comma after the last entry"),
    ("[1, 2]", "chain_info.json:1:1: expected a JSON object"),
    ("", "chain_info.json:1:1: invalid JSON"),
])
def test_validate_reports_json_errors_with_line_and_column(tmp_path: Path, text: str, expected: str) -> None:
    path = write_chain(tmp_path, text)
    result = CliRunner().invoke(cli, ["validate", path])
    assert result.exit_code == 2
    assert expected in result.output
    assert "Traceback" not in result.output


def test_validate_lists_problems_and_exits_non_zero(tmp_path: Path) -> None:
    path = write_chain(tmp_path, {"jobs": [job(), {"name": "b"}]})
    result = CliRunner().invoke(cli, ["validate", path])
    assert result.exit_code == 2
    assert "resourcePoolId: required" in result.output
    assert "jobs[1].jobSpec: required" in result.output


def test_validate_warns_when_cluster_cannot_read_the_chain(tmp_path: Path) -> None:
    data = {"resourcePoolId": "p", "jobs": [dict(job(), datasources=[{"type": "pfs", "name": "x",
                                                                      "mountPath": "/root/pfs"}])]}
    result = CliRunner().invoke(cli, ["validate", write_chain(tmp_path, data)])
    assert result.exit_code == 0
    assert "config_path" in result.output and "under none of jobs[0]'s datasource mountPaths" in result.output


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["validate", str(tmp_path / "nope.json")])
    assert result.exit_code == 2
    assert "no such chain file" in result.output


def test_hello_example_is_valid() -> None:
    chain = load_chain(str(EXAMPLES / "hello" / "chain_info.json"), local=True)
    assert [s.body["jobSpec"]["replicas"] for s in chain.steps] == [1, 2, 1]
    assert chain.steps[1].retries == 1
    assert shutil.which("bash")
    assert all(os.access(EXAMPLES / "hello" / n, os.R_OK) for n in ("prepare.sh", "train.sh", "evaluate.sh"))


# -- found by the fuzz drill (tests/test_fuzz.py) ------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ('{"jobs": ' + "9" * 5000 + "}", "chain_info.json:1:10: number too large (5000 digits)"),
    ('{\n  "jobs": [NaN]}', "chain_info.json:2:12: invalid JSON: NaN is not a JSON number"),
    ('{"a": "NaN", "jobs": -Infinity}', "chain_info.json:1:22: invalid JSON: -Infinity is not a JSON number"),
    ('{"jobs": [1, 1e999]}', "chain_info.json:1:14: number too large (1e999)"),
    ("[" * 5000, "chain_info.json:1:101: JSON nested deeper than 100 levels"),
    ('{"a": ' + "[" * 150 + "]" * 150 + "}", "chain_info.json:1:106: JSON nested deeper than 100 levels"),
])
def test_json_python_would_accept_but_nothing_can_use_is_refused(tmp_path: Path, text: str, expected: str) -> None:
    path = write_chain(tmp_path, text)
    with pytest.raises(UsageError) as info:
        load_chain(path)
    assert str(info.value).startswith(f"{tmp_path}/{expected}")
    result = CliRunner().invoke(cli, ["validate", path])
    assert result.exit_code == 2 and isinstance(result.exception, (SystemExit, type(None)))
    assert result.stderr.count("\n") == 1 and expected in result.stderr


def test_invalid_utf8_has_line_and_column_and_a_bom_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "chain_info.json"
    path.write_bytes(b'{\n  "resourcePoolId": "p\xff"}')
    with pytest.raises(UsageError, match=r"chain_info.json:2:23: not UTF-8 text: invalid byte 0xff"):
        load_chain(str(path))
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"resourcePoolId": "p", "jobs": [job()]}).encode())
    assert load_chain(str(path)).pool == "p"


@pytest.mark.parametrize("spec, expected", [
    ({"scriptFile": "a\x00b.sh"}, "jobs[0].jobSpec.scriptFile: script file 'a\\x00b.sh' not found"),
    ({"scriptFile": "a\ud800.sh"}, "jobs[0].jobSpec.scriptFile: script file 'a\\ud800.sh' not found"),
    ({"scriptFile": "two\nlines.sh"}, "jobs[0].jobSpec.scriptFile: script file 'two\\nlines.sh' not found"),
    ({"command": "x\x1b[31m.sh"}, "jobs[0].jobSpec.command: names script file 'x\\x1b[31m.sh', which is not found"),
    ({"envs": [{"name": "N", "value": 3}]}, 'jobs[0].jobSpec.envs[0].value: must be a string, found number '
                                            '(quote it: "3")'),
    ({"envs": [{"name": "N", "value": [1]}]}, "jobs[0].jobSpec.envs[0].value: must be a string, found array"),
])
def test_odd_file_names_and_values_make_one_line_problems(tmp_path: Path, spec: dict, expected: str) -> None:
    with pytest.raises(ChainFileError) as info:
        load_chain(write_chain(tmp_path, {"resourcePoolId": "p", "jobs": [job(**spec)]}))
    assert info.value.problems == [expected + info.value.problems[0][len(expected):]]
    assert all(line.isprintable() for line in str(info.value).split("\n"))


KNOWN = ("cache, checkpoint, dependsOn, failureRules, generatedBy, hangTimeout, matrix, maxParallel, metrics, retries, "
         "retryOnExitCodes, runOn, timeout")


def test_odd_keys_are_quoted_in_paths_and_warnings(tmp_path: Path) -> None:
    data = {"resourcePoolId": "p", "x\ny": 1, "jobs": [dict(job(), jobChain={"a\nb": 1, "c d": 2})]}
    with pytest.raises(ChainFileError) as info:
        load_chain(write_chain(tmp_path, data))
    assert info.value.problems == [
        f"jobs[0].jobChain['a\\nb']: unknown setting (known: {KNOWN})",
        f"jobs[0].jobChain['c d']: unknown setting (known: {KNOWN})"]
    del data["jobs"][0]["jobChain"]
    assert load_chain(write_chain(tmp_path, data), local=True).warnings == ["['x\\ny']: unknown top-level key, ignored"]


@pytest.mark.parametrize("value", [[], "", 0, False, "cfg"])
def test_api_config_of_the_wrong_type_is_a_problem(tmp_path: Path, value: object) -> None:
    with pytest.raises(ChainFileError) as info:
        load_chain(write_chain(tmp_path, {"resourcePoolId": "p", "api_config": value, "jobs": [job()]}))
    assert info.value.problems == ["api_config: must be an object with host, ak, sk"]


@pytest.mark.parametrize("pool", ["cce-a\nb", "cce a", " cce-a", "cce-\x00"])
def test_resource_pool_id_is_one_printable_word(tmp_path: Path, pool: str) -> None:
    with pytest.raises(ChainFileError) as info:
        load_chain(write_chain(tmp_path, {"resourcePoolId": pool, "jobs": [job()]}))
    assert info.value.problems[0].startswith("resourcePoolId: must be a resource pool id such as cce-xxxxxxxx, found ")
    assert "\n" not in info.value.problems[0]


def test_duplicate_key_is_refused_at_its_line_and_column(tmp_path: Path) -> None:
    chain = tmp_path / "chain_info.json"
    chain.write_text('{"resourcePoolId": "p", "jobs": [],\n "a": [{"name": 1}, {"name": 2, "name": 3}]}')
    done = CliRunner().invoke(cli, ["validate", str(chain)])
    assert done.exit_code != 0
    assert f"{chain}:2:33: duplicate key 'name'" in done.output


def test_two_users_running_the_examples_on_one_machine_do_not_collide(tmp_path: Path) -> None:
    """Issue 18 item 20: hello and dag kept their data in one fixed /tmp path for everybody.
    Now each user's steps work in MOUNT/$(id -un): alice and bob interleave without a clash."""
    import subprocess

    mount = tmp_path / "job-chain-hello"
    mount.mkdir(mode=0o1777)
    hello = EXAMPLES / "hello"
    for user in ("alice", "bob"):
        shim = tmp_path / user
        shim.mkdir()
        (shim / "id").write_text(f"#!/bin/sh\necho {user}\n")
        (shim / "id").chmod(0o755)

    def step(user: str, script: str, rank: int = 0) -> None:
        env = dict(os.environ, PATH=f"{tmp_path / user}:{os.environ['PATH']}", HELLO_DIR=str(mount), RANK=str(rank),
                   WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="1", AIHC_JOB_NAME="hello")
        subprocess.run(["bash", str(hello / script)], env=env, check=True, capture_output=True)

    for script, ranks in (("prepare.sh", [0]), ("train.sh", [0, 1]), ("evaluate.sh", [0])):
        for rank in ranks:
            step("alice", script, rank)
            step("bob", script, rank)
    assert (mount / "alice" / "result.txt").read_text() == (mount / "bob" / "result.txt").read_text() == "5050\n"
    for example, variable in (("hello", "HELLO_DIR"), ("dag", "DAG_DIR")):
        data = json.loads((EXAMPLES / example / "chain_info.json").read_text())
        values = {e["value"] for j in data["jobs"] for e in j["jobSpec"].get("envs", []) if e["name"] == variable}
        assert values == {f"/tmp/job-chain-{example}"}  # the mount itself; each script adds the user
        for script in (EXAMPLES / example).glob("*.sh"):
            if f"${variable}" in script.read_text():
                assert f'{variable}="${variable}/$(id -un' in script.read_text(), script


def test_scripts_are_read_from_the_chains_directory_only_regular_files_and_bounded(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "secret.sh").write_text("echo the console host's file\n")
    (home / "link.sh").symlink_to(tmp_path / "secret.sh")
    os.mkfifo(home / "pipe.sh")  # opening it to read would wait for a writer forever
    (home / "big.sh").write_text("#" * (200 * 1024))
    (home / "sub").mkdir()
    (home / "sub" / "ok.sh").write_text("echo ok\n")
    data = {"resourcePoolId": "p", "jobs": [
        job("a", scriptFile=str(tmp_path / "secret.sh")), job("b", scriptFile="../secret.sh"),
        job("c", scriptFile="link.sh"), job("d", scriptFile="pipe.sh"), job("e", command="big.sh"),
        job("f", command="bash ../secret.sh"), job("g", scriptFile="sub/ok.sh")]}
    path = home / "chain_info.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ChainFileError) as error:
        load_chain(str(path))
    found = error.value.problems
    outside = "not in the chain's directory"
    assert [p.split(":")[0] for p in found] == [f"jobs[{i}].jobSpec.{k}" for i, k in
                                                 enumerate(["scriptFile"] * 4 + ["command"])]
    assert all(outside in p for p in found[:3]) and "is not a regular file" in found[3]
    assert "larger than 127 KiB" in found[4]
    data["jobs"] = data["jobs"][5:]
    chain = load_chain(write_chain(home, data))
    assert chain.steps[0].script == "bash ../secret.sh"  # not frozen: it runs as written, in the pod
    assert chain.steps[1].script == "echo ok\n"


def test_a_long_command_full_of_references_validates_in_linear_time(tmp_path: Path) -> None:
    # "${a.${a.…" made the reference scanner (and shlex.split of the command) quadratic: 240 KB took 51 s
    import time

    text = "${a." * (512 * 1024 // 4)
    started = time.monotonic()
    with pytest.raises(ChainFileError):
        load_chain(write_chain(tmp_path, {"resourcePoolId": "p", "jobs": [job("a", command=text)]}))
    assert time.monotonic() - started < 20  # ~0.5 s now; minutes before


def test_a_chain_of_more_than_5000_jobs_is_refused_before_its_jobs_are_read(tmp_path: Path) -> None:
    # the documented limit was not enforced: 100,000 steps validated (5 s, 335 MB) and 20,000 ran
    jobs = [job(f"s{i}") for i in range(5001)]
    with pytest.raises(ChainFileError) as error:
        load_chain(write_chain(tmp_path, {"resourcePoolId": "p", "jobs": jobs}))
    assert error.value.problems == ["jobs: at most 5000 jobs in a chain, found 5001: split it into several chains"]
    assert "5,000 steps per chain" in (EXAMPLES.parent / "docs" / "graphs.md").read_text()  # the documented limit


def test_a_local_run_s_client_is_made_without_reading_the_chain_file_s_api_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A local run's host and keys are its server's; only the version comes from its api_config, and
    that from the chain the run runs: the chain file's api_config is not read for it (a broken file
    or a host written into it later changes nothing)."""
    from chain_helpers import RECORDED_RUN as RECORDED
    from chain_helpers import recorded_run

    from job_chain import ChainSession
    from job_chain.record.records import RunRecords
    from job_chain.session import places
    from job_chain.session.chainfile import ChainFile
    from job_chain.session.runs import Run

    path = tmp_path / "chain_info.json"
    recorded_run(path, "pool-local", [{"name": "a", "jobSpec": {"command": "true", "image": "local"}}],
                 api_config={"version": "v2"})
    records = RunRecords(str(path))
    record = records.update_run(RECORDED, local=True, localStateDir=str(tmp_path / "server"))
    records.save_credentials(RECORDED, {"credentialsFile": str(tmp_path / "server" / "credentials.json")})
    read: List[str] = []
    monkeypatch.setattr(ChainFile, "api_config", lambda self: read.append(self.path) or {"host": "http://later"})
    made: List[Any] = []
    monkeypatch.setattr(places, "connect_to", lambda **kw: made.append(kw) or object())
    session = ChainSession.from_file(str(path), strict=False)
    session.context.places.client_for(Run.from_record(str(path), record))
    assert read == [] and made[0]["local"] is True and made[0]["api_config"] == {"version": "v2"}
