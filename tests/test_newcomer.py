"""Issue 18, what a review and a newcomer trial found outside the web console: secret-looking env
values in ``run --dry-run`` (item 5), the live view's duration (11), a watch-mode run left behind
by Ctrl-C (12), validation (15), help and error styles (19), the Python API (22) and ``pools --local``
(23). In-process (CliRunner) unless the behaviour is about processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from click.testing import CliRunner, Result

from job_chain.cli import cli
from job_chain.util.redaction import REDACTED, redact

NO_ENV: Dict[str, Any] = {"JOB_CHAIN_CREDENTIALS": None, "AIHC_HOST": None, "AIHC_AK": None, "AIHC_SK": None,
                          "AK": None, "SK": None, "HOST": None, "AIHC_API_VERSION": None}


def invoke(*args: str, **env: Any) -> Result:
    return CliRunner().invoke(cli, list(args), env=dict(NO_ENV, **env))


SECRET_ENVS = {"DB_PASSWORD": "pw-0123456789", "HF_TOKEN": "hf_abcdefghijkl", "CLIENT_SECRET": "cs-0123456789",
               "OSS_SK": "sk-0123456789ab", "WANDB_API_KEY": "wk-0123456789"}
PLAIN_ENVS = {"SHARED": "/data/shared", "SKIP": "yes", "TASK": "pretrain"}


def chain_with_envs(folder: Path) -> Path:
    (folder / "train.sh").write_text("wandb login wk-0123456789\necho training\n")
    envs = [{"name": k, "value": v} for k, v in {**SECRET_ENVS, **PLAIN_ENVS}.items()]
    chain = {"resourcePoolId": "pool-local",
             "jobs": [{"name": "train", "jobSpec": {"command": "train.sh", "image": "local", "replicas": 1,
                                                     "envs": envs},
                       "datasources": [{"type": "pfs", "name": "pfs", "mountPath": str(folder)}]}]}
    path = folder / "chain_info.json"
    path.write_text(json.dumps(chain))
    return path


def test_secret_looking_env_values_are_redacted() -> None:
    body = {"jobSpec": {"envs": [{"name": k, "value": v} for k, v in {**SECRET_ENVS, **PLAIN_ENVS, "FLAG_KEY": "1"}
                                 .items()], "command": "echo hf_abcdefghijkl"}}
    shown = redact(body)
    values = {e["name"]: e["value"] for e in shown["jobSpec"]["envs"]}
    assert all(values[name] == REDACTED for name in list(SECRET_ENVS) + ["FLAG_KEY"])
    assert {k: values[k] for k in PLAIN_ENVS} == PLAIN_ENVS
    assert shown["jobSpec"]["command"] == f"echo {REDACTED}"  # the value is hidden wherever it appears
    assert body["jobSpec"]["envs"][0]["value"] == "pw-0123456789"  # a copy: the request itself is untouched


def test_dry_run_redacts_secret_looking_env_values(tmp_path: Path) -> None:
    chain = chain_with_envs(tmp_path)
    for version in ("v1", "v2"):
        result = invoke("run", str(chain), "--dry-run", "--local", "--api-version", version)
        assert result.exit_code == 0, result.output
        for value in SECRET_ENVS.values():
            assert value not in result.output
        body = json.loads(result.stdout.split("\n", 2 if version == "v2" else 1)[-1])
        envs = {e["name"]: e["value"] for e in body["jobSpec"]["envs"]}
        assert envs["HF_TOKEN"] == REDACTED and envs["TASK"] == "pretrain"


def test_live_view_duration_grows_while_a_step_runs() -> None:
    """The watcher yields a status only when something changes; the live table is redrawn every
    second all the same, so a running step's DURATION counts up instead of staying at 0s (item 11)."""
    import datetime as dt
    import io
    import re
    import time

    from rich.console import Console

    from job_chain.cli.run_view import follow
    from job_chain.status.types import Attempt, Outcome, RunStatus, StepStatus

    started = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=5)
    running = Attempt(0, 1, "job-1", "Running", started, None, None)
    screen = io.StringIO()
    out = Console(file=screen, force_terminal=True, color_system=None, width=120)
    seen = []

    def watching() -> Any:
        yield RunStatus("run-1", "c.json", Outcome.RUNNING,
                        [StepStatus(0, "train", "Running", "job-1", 1, started=started, attempts=[running])])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:  # no new status: only the redraws can show time passing
            seen[:] = re.findall(r"train +Running +1 +- +job-1 +\S+ +(\d+)s", screen.getvalue())
            if any(int(s) >= 6 for s in seen):
                break
            time.sleep(0.1)
        done = Attempt(0, 1, "job-1", "Succeeded", started, dt.datetime.now(dt.timezone.utc), 0)
        yield RunStatus("run-1", "c.json", Outcome.SUCCEEDED,
                        [StepStatus(0, "train", "Succeeded", "job-1", 1, 0, started=started,
                                    finished=done.finished, attempts=[done])])

    assert follow(watching(), "c.json", False, out=out) == 0
    assert seen[0] == "5" and any(int(s) >= 6 for s in seen), seen  # the first status said 5s


def test_watch_run_left_by_ctrl_c_says_how_to_continue_or_stop(tmp_path: Path, local_server: Any) -> None:
    """Ctrl-C of ``run --advance watch`` leaves the run going with nobody to advance it: a new
    ``run`` is refused with the command that continues it (and the one that stops it), and that
    command does continue it, even while its step is still running (item 12)."""
    import os
    import signal
    import subprocess
    import threading

    from chain_helpers import JOB_CHAIN, cli_here, latest_run, make_chain, run_jobs

    gate = 'for i in $(seq 1200); do test -f "$SHARED/go" && break; sleep 0.1; done; echo a\n'  # until the test says
    chain = make_chain(tmp_path, [{"script": gate}, {"script": "echo b\n"}], local_server.pool)
    env = dict(os.environ, JOB_CHAIN_CREDENTIALS=local_server.credentials_file)
    watcher = subprocess.Popen([*JOB_CHAIN, "run", str(chain), "--advance", "watch"], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as in a terminal
    guard = threading.Timer(60, watcher.kill)  # a watcher that never says it is watching must not hang the suite
    guard.start()
    try:
        for line in watcher.stdout:  # type: ignore[union-attr]
            if line.startswith("step 0 step-0: Running"):
                break  # it is watching the run
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=30)
    finally:
        guard.cancel()
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    run_id = latest_run(chain)
    assert watcher.returncode == 130 and f"job-chain resume {chain} --run {run_id} --advance watch" in err
    refused = cli_here("run", str(chain), server=local_server)
    assert refused.returncode == 2
    assert f"continue it with 'job-chain resume {chain} --run {run_id} --advance watch'" in refused.stderr
    assert f"stop it with 'job-chain stop {chain} --run {run_id}'" in refused.stderr
    dry = cli_here("resume", str(chain), "--run", run_id, "--advance", "watch", "--dry-run", server=local_server)
    assert dry.returncode == 0 and "without --dry-run this process would watch the run" in dry.stdout, dry.stderr
    assert [j["name"] for j in run_jobs(local_server, run_id)] == ["step-0"]  # a dry run watches nothing
    resumed = subprocess.Popen([*JOB_CHAIN, "resume", str(chain), "--run", run_id, "--advance", "watch"], env=env,
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    guard = threading.Timer(120, resumed.kill)
    guard.start()
    try:
        said = resumed.stdout.readline()  # type: ignore[union-attr]
        assert "this process now submits each next step" in said  # step 0 is still running
        (tmp_path / "shared" / "go").write_text("go")
        out, err = resumed.communicate(timeout=120)
    finally:
        guard.cancel()
        if resumed.poll() is None:  # a failed check above: the watcher must not outlive the test
            resumed.kill()
            resumed.communicate()
    assert resumed.returncode == 0, err + out
    assert f"run {run_id}: succeeded" in out
    steps = sorted(j["name"] for j in run_jobs(local_server, run_id))
    assert steps == ["step-0", "step-1"]  # each once


def test_validation_lists_every_problem_at_once_with_did_you_mean(tmp_path: Path) -> None:
    """Misspelt keys anywhere get "did you mean" (and a misspelt top-level key is an error, not a
    warning: it would be ignored); graph problems come with field problems in one pass; a zero
    duration says what is wrong with it (item 15)."""
    (tmp_path / "a.sh").write_text("echo a\n")
    spec = {"command": "a.sh", "image": "img", "replicas": 1}
    chain = {"resourcePoolID": "cce-1", "scripts_path": "/root/pfs/runtime",
             "jobs": [{"name": "prep", "jobSpec": spec, "jobchain": {"retries": 1}},
                      {"name": "train", "jobSpec": spec, "jobChain": {"dependOn": ["prep"], "timeout": "0s"}},
                      {"name": "eval", "jobSpec": dict(spec, image=""), "jobChain": {"dependsOn": ["trian"]}}]}
    path = tmp_path / "chain_info.json"
    path.write_text(json.dumps(chain, indent=2))
    result = invoke("validate", str(path))
    assert result.exit_code == 2, result.output
    for line in ['resourcePoolID: unknown key (did you mean "resourcePoolId"?)',
                 "resourcePoolId: required",
                 'scripts_path: unknown key (did you mean "scrips_path"?)',
                 'jobs[0].jobchain: unknown key (did you mean "jobChain"?)',
                 'jobs[1].jobChain.dependOn: unknown setting (did you mean "dependsOn"?)',
                 "jobs[1].jobChain.timeout: must be more than 0, found '0s'",
                 "jobs[2].jobSpec.image: must not be empty",
                 "jobs[2].jobChain.dependsOn[0]: no job 'trian' in this chain"]:  # the graph, in the same pass
        assert "  " + line in result.output, line
    assert "Traceback" not in result.output


def test_json_syntax_errors_are_said_in_words(tmp_path: Path) -> None:
    """A trailing comma is named and pointed at (the comma, not the bracket after it), in words
    rather than Python's "Expecting property name enclosed in double quotes" (item 15)."""
    path = tmp_path / "chain_info.json"
    for text, where, kind in [('{"jobs": [\n  {"name": "a"},\n]}', "2:16", "array"),
                              ('{"resourcePoolId": "p",\n "jobs": [{"name": "a",}]}', "2:23", "object")]:
        path.write_text(text)
        result = invoke("validate", str(path))
        assert result.exit_code == 2
        assert f"{path}:{where}: invalid JSON: a comma after the last entry of an {kind}: JSON allows none " \
               "there, remove it" in result.output
        assert "Expecting" not in result.output
    path.write_text("{'jobs': []}")
    said = invoke("validate", str(path)).output
    assert "1:2: invalid JSON: keys are written in double quotes, not single ones" in said


def test_help_lists_user_commands_and_says_what_every_option_does() -> None:
    """Item 19: in-job commands are not listed; every option has help; no other project's tool;
    aiak-gen has --version; usage errors and other errors look the same; the docs speak to users."""
    import re

    import click

    from job_chain import __version__
    from job_chain.cli.aiak import aiak_gen

    listed = invoke("--help").output.split("Commands:", 1)[1]
    names = [line.split()[0] for line in listed.splitlines() if line.startswith("  ") and line.split()]
    assert "advance" not in names and "watchdog" not in names and {"run", "resume", "bundle", "ui"} <= set(names)
    assert invoke("advance", "--help").exit_code == 0  # still there for the jobs that call it
    assert "--attempt" in invoke("advance", "--help").output

    undocumented = []

    def walk(command: click.Command, path: str) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(click.Context(command)):
                walk(command.get_command(click.Context(command), name), f"{path} {name}")  # type: ignore[arg-type]
        undocumented.extend(f"{path} {p.opts[0]}" for p in command.params
                            if isinstance(p, click.Option) and not p.help and not p.hidden)

    walk(cli, "job-chain")
    walk(aiak_gen, "aiak-gen")
    assert undocumented == []
    jobs_help = invoke("jobs", "--help").output + invoke("jobs", "list", "--help").output
    assert "FastGPU" not in jobs_help and "ecluster" not in jobs_help and "seed" not in jobs_help
    version = CliRunner().invoke(aiak_gen, ["--version"])
    assert version.exit_code == 0 and version.output.strip() == f"aiak-gen, version {__version__}"

    usage = invoke("run", "x.json", "--advance", "sideways")
    failure = invoke("validate", "/nonexistent/chain.json")
    for result in (usage, failure):
        assert result.exit_code == 2 and result.output.startswith("job-chain: error: "), result.output
        assert "Error:" not in result.output and "Usage:" not in result.output
    assert "(see 'job-chain run --help')" in usage.output

    docs = Path(__file__).resolve().parent.parent
    for page in [docs / "README.md", *sorted((docs / "docs").glob("*.md"))]:
        text = page.read_text()
        assert not re.search(r"\bseed 00\d|the seed's", text), page
        assert not re.search(r"\|\s*before\s*\||\|\s*aiak-gen before\s*\|", text, re.IGNORECASE), page


def test_python_api_refuses_a_bad_api_version_at_once_and_lists_its_names() -> None:
    """Item 22: ``api_version="v3"`` fails in from_file with a message about the Python argument
    (not later, about --api-version); ``dir(job_chain)`` shows the public names."""
    import pytest

    import job_chain
    from job_chain import ChainSession, UsageError

    chain = Path(__file__).resolve().parent.parent / "examples" / "hello" / "chain_info.json"
    with pytest.raises(UsageError) as refused:
        ChainSession.from_file(str(chain), api_version="v3")
    assert str(refused.value).startswith("ChainSession(api_version='v3'): must be \"v1\" or \"v2\"")
    assert "--api-version" not in str(refused.value)
    assert ChainSession.from_file(str(chain), api_version="v2").api_version == "v2"
    public = [name for name in dir(job_chain) if not name.startswith("_")]
    assert public == sorted(n for n in job_chain.__all__ if not n.startswith("_"))
    assert {"ChainSession", "RunStatus", "Outcome", "JobChainError", "AIHCClient"} <= set(public)
    assert "__version__" in dir(job_chain) and "importlib" not in dir(job_chain)


def test_pools_local_without_pools_says_how_to_add_one(local_server: Any) -> None:
    """Item 23: an empty listing is a sentence saying why and what to do, not a bare header."""
    from chain_helpers import cli_here

    listed = cli_here("pools", server=local_server, check=True).stdout
    assert listed.startswith("no resource pools are configured on the local server: it accepts any resource pool id")
    assert "job-chain local start --pool ID[:N]" in listed and "CAPACITY" not in listed  # no bare header
    assert json.loads(cli_here("pools", "--json", server=local_server, check=True).stdout) == []


def test_first_command_without_credentials_suggests_local(tmp_path: Path) -> None:
    """Item 23: the README's first command, run with no AIHC account, points at --local."""
    import shutil

    examples = Path(__file__).resolve().parent.parent / "examples" / "hello"
    chain = tmp_path / "hello" / "chain_info.json"
    shutil.copytree(examples, chain.parent, ignore=shutil.ignore_patterns("*.runs"))
    result = invoke("run", str(chain), "--follow", HOME=str(tmp_path))
    assert result.exit_code == 2, result.output
    assert result.output.startswith("job-chain: error: no AIHC") and "add --local" in result.output
    runs = chain.parent / "chain_info.json.runs"
    assert not runs.exists() or not list(runs.iterdir())  # nothing recorded for a run that never started
    readme = (examples.parent.parent / "README.md").read_text()
    first_block = readme.split("```", 2)[1]
    assert "--local" in first_block
