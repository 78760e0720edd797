"""What the CLI and the API client say when something is wrong (issue 9, items 15 and 16).

Each message must point the right way: which input, which file, which credential source,
what to do next, in one line, with the right exit code and never a secret.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any, Dict, List

import click
import pytest
from click.testing import CliRunner, Result

from job_chain.aihc import AIHCClient, AIHCError
from job_chain.aihc.credentials import Credentials, resolve_credentials
from job_chain.cli import cli, run_cli
from job_chain.errors import UsageError
from job_chain.local.ports import free_port

NO_ENV: Dict[str, Any] = {"JOB_CHAIN_CREDENTIALS": None, "AIHC_HOST": None, "AIHC_AK": None, "AIHC_SK": None,
                          "AK": None, "SK": None, "HOST": None, "AIHC_RESOURCE_POOL_ID": "pool-local"}


def invoke(*args: str, **env: Any) -> Result:
    return CliRunner().invoke(cli, list(args), env=dict(NO_ENV, **env))


def one_error_line(result: Result) -> str:
    lines = [line for line in result.output.splitlines() if "error" in line.lower()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    return lines[0]


# -- item 15: user mistakes are not internal errors ---------------------------------------------

@pytest.mark.parametrize("host", ["http://[::1", "[::1", "http://a b:80"])
def test_a_malformed_host_is_a_usage_error(host: str) -> None:
    result = invoke("jobs", "list", "--host", host, "--ak", "a", "--sk", "s")
    assert result.exit_code == 2, result.output
    assert f"bad AIHC host {host!r}" in one_error_line(result)


@pytest.mark.parametrize("job_id", ["a?b", "a#b", "a%b", "a%2Fb", "a b", "ジョブ", "a+b=c&d", "a;b", "a\\b"])
def test_ids_needing_escapes_are_signed_as_sent(shared_server: Any, job_id: str) -> None:
    """The path is quoted before signing, so the server checks the signature and says NoSuchJob."""
    with pytest.raises(AIHCError) as caught:
        shared_server.client().get_job(shared_server.pool, job_id)
    assert caught.value.status == 404, caught.value
    assert caught.value.code == "NoSuchJob", caught.value


def test_jobs_get_with_a_question_mark_says_no_such_job(shared_server: Any) -> None:
    result = invoke("jobs", "get", "a?b", JOB_CHAIN_CREDENTIALS=shared_server.credentials_file)
    assert result.exit_code == 1
    line = one_error_line(result)
    assert "NoSuchJob" in line and "SignatureDoesNotMatch" not in line


def test_a_pod_name_needing_escapes_reaches_the_server(shared_server: Any) -> None:
    from conftest import job_body

    client = shared_server.client()
    job = client.create_job(shared_server.pool, job_body("escapes", "true"))
    with pytest.raises(AIHCError) as caught:
        client.pod_logs(shared_server.pool, job["jobId"], "worker 0?x#y")
    assert caught.value.code == "NoSuchPod", caught.value


def test_ids_no_aihc_id_can_hold_are_usage_errors() -> None:
    result = invoke("jobs", "get", "a/b", "--host", "127.0.0.1:1", "--ak", "a", "--sk", "s")
    assert result.exit_code == 2 and "job id 'a/b' cannot contain '/'" in one_error_line(result)
    result = invoke("jobs", "logs", "job-1", "--pod", "../x", "--host", "127.0.0.1:1", "--ak", "a", "--sk", "s")
    assert result.exit_code == 2 and "pod name '../x' cannot contain '/'" in one_error_line(result)
    result = invoke("jobs", "stop", "", "--host", "127.0.0.1:1", "--ak", "a", "--sk", "s")
    assert result.exit_code == 2 and "the job id is empty" in one_error_line(result)


def _run(command: click.Command, capsys: pytest.CaptureFixture) -> tuple:
    with pytest.raises(SystemExit) as done:
        run_cli(command, "job-chain", [])
    return done.value.code, capsys.readouterr().err


def test_safety_net_keeps_expected_errors_and_catches_bugs(capsys: pytest.CaptureFixture,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOB_CHAIN_DEBUG", raising=False)

    def raising(error: BaseException) -> click.Command:
        def boom() -> None:
            raise error
        return click.Command("x", callback=boom)

    code, err = _run(raising(UsageError("--x is wrong")), capsys)
    assert (code, err) == (2, "job-chain: error: --x is wrong\n")
    # the machine, not the program: a full disk is an error, not a bug report
    code, err = _run(raising(OSError(28, "No space left on device", "/data/x")), capsys)
    assert code == 1 and err == "job-chain: error: /data/x: No space left on device\n"
    # a real bug still exits 70 with one line
    code, err = _run(raising(KeyError("oops")), capsys)
    assert code == 70 and err.startswith("job-chain: internal error: KeyError") and err.count("\n") == 1


# -- item 16: messages point the right way ------------------------------------------------------

@pytest.mark.parametrize("content, field", [({"host": 1, "ak": "a", "sk": "s"}, "host"),
                                            ({"host": "h", "ak": "a", "sk": 12345}, "sk")])
def test_a_non_string_in_the_credentials_file_names_file_and_field(tmp_path: Path, content: Dict[str, Any],
                                                                   field: str) -> None:
    path = tmp_path / "creds.json"
    path.write_text(json.dumps(content))
    result = invoke("jobs", "list", "--credentials", str(path))
    assert result.exit_code == 2
    line = one_error_line(result)
    assert str(path) in line and f"{field} must be a string" in line
    assert "12345" not in line and "no AIHC host" not in line


def test_auth_failures_name_the_credential_source_not_the_secret(shared_server: Any, tmp_path: Path) -> None:
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps({"host": shared_server.url, "ak": shared_server.ak, "sk": "WRONG-SECRET-42"}))
    result = invoke("jobs", "list", "--credentials", str(path))
    line = one_error_line(result)
    assert "SignatureDoesNotMatch" in line and f"(credentials from credentials file {path})" in line
    assert "WRONG-SECRET-42" not in result.output

    result = invoke("jobs", "list", AIHC_HOST=shared_server.url, AIHC_AK="nobody", AIHC_SK="WRONG-SECRET-42")
    line = one_error_line(result)
    assert "InvalidAccessKeyId" in line and "(credentials from env AIHC_HOST/AIHC_AK/AIHC_SK)" in line
    assert "WRONG-SECRET-42" not in result.output


def test_refused_loopback_connection_suggests_local_start() -> None:
    port = free_port()
    client = AIHCClient(Credentials(host=f"127.0.0.1:{port}", ak="a", sk="s"), max_retries=0)
    with pytest.raises(AIHCError) as caught:
        client.list_jobs("p")
    assert "job-chain local start" in str(caught.value) and caught.value.retryable


def test_refused_remote_connection_does_not_mention_the_local_server(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(socket, "create_connection", refuse)
    client = AIHCClient(Credentials(host="aihc.example.com", ak="a", sk="s"), max_retries=0)
    with pytest.raises(AIHCError) as caught:
        client.list_jobs("p")
    assert "Connection refused" in str(caught.value) and "local start" not in str(caught.value)


def test_an_unresolvable_host_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS failure is a typo, not a hiccup: one lookup, no retries, and it says so."""
    lookups: List[str] = []

    def no_such_name(host: str, *args: Any, **kwargs: Any) -> Any:
        lookups.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_name)
    creds = resolve_credentials(host="aihc.bj.baidubce.comm", ak="a", sk="s", env={})
    client = AIHCClient(creds, max_retries=4, base_delay=5.0)  # a retry would take seconds
    with pytest.raises(AIHCError) as caught:
        client.list_jobs("p")
    assert lookups == ["aihc.bj.baidubce.comm"]
    assert not caught.value.retryable
    assert str(caught.value) == ("AIHC error HostNotFound: cannot resolve host aihc.bj.baidubce.comm "
                                 "(host from command-line flags): Name or service not known; check the host name")


def test_a_wrong_pod_lists_the_jobs_pods(shared_server: Any) -> None:
    from conftest import job_body

    job = shared_server.client().create_job(shared_server.pool, job_body("podnames", "true", replicas=2))
    shared_server.wait_status(job["jobId"], "Succeeded")
    for command in ("logs", "pod-events", "webterminal"):
        result = invoke("jobs", command, job["jobId"], "--pod", "worker-0",
                        JOB_CHAIN_CREDENTIALS=shared_server.credentials_file)
        assert result.exit_code == 1, result.output
        line = one_error_line(result)
        assert "no pod 'worker-0'" in line and "podnames-master-0, podnames-worker-0" in line, line


def test_a_wrong_pod_of_a_missing_job_says_no_such_job(shared_server: Any) -> None:
    result = invoke("jobs", "logs", "pytorchjob-nope", "--pod", "worker-0",
                    JOB_CHAIN_CREDENTIALS=shared_server.credentials_file)
    assert "NoSuchJob" in one_error_line(result)



def test_sk_on_the_command_line_is_warned_about_and_env_is_not(no_backoff: None) -> None:
    # --sk stays readable in the process's command line (ps) for as long as it runs: local serve, run --follow
    from click.testing import CliRunner

    from job_chain.cli import cli as job_chain_cli

    runner = CliRunner()
    typed = runner.invoke(job_chain_cli, ["jobs", "list", "--pool", "p", "--host", "127.0.0.1:1", "--ak", "a",
                                          "--sk", "typed-secret-key"])
    assert "warning: --sk puts the secret key in this process's command line" in typed.output
    assert "--credentials FILE" in typed.output and "typed-secret-key" not in typed.output
    quiet = runner.invoke(job_chain_cli, ["jobs", "list", "--pool", "p", "--host", "127.0.0.1:1", "--ak", "a"],
                          env={"AIHC_SK": "from-env-secret"})
    assert "warning: --sk" not in quiet.output
    served = runner.invoke(job_chain_cli, ["local", "serve", "--ak", "a", "--sk", "typed", "--port", "-1"])
    assert "warning: --sk" in served.output and "JOB_CHAIN_LOCAL_SK" in served.output


@pytest.mark.parametrize("args,code,said", [
    (["--version"], 0, "job-chain, version"),
    (["status", "/nonexistent/chain_info.json"], 2, "no such chain file"),
    (["no-such-command"], 2, "no-such-command"),
])
def test_the_cli_ends_without_teardown_yet_with_its_exit_code_output_threads_and_exit_hooks(
        tmp_path: Path, args: List[str], code: int, said: str) -> None:
    """``job-chain`` ends by ``os._exit`` after a command (no freeing of every object): its exit code,
    its output, a thread still working and every ``atexit`` hook are what a normal exit gives."""
    import subprocess
    import sys

    marker = tmp_path / "hook"
    program = (
        "import atexit, sys, threading, time\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'a').write('hook ran\\n'))\n"
        f"late = lambda: (time.sleep(0.3), open({str(marker)!r}, 'a').write('thread ended\\n'))\n"
        "threading.Thread(target=late).start()\n"
        f"sys.argv = ['job-chain'] + {args!r}\n"
        "from job_chain.cli import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == code, done.stderr
    assert said in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert marker.read_text() == "thread ended\nhook ran\n"
