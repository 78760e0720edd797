"""Issue 30 item 8: credentials may carry a BCE session token (STS temporary keys).

Every way job-chain takes keys takes a token with them; the SDK's signer sends it as
``x-bce-security-token``; a run carries it to its jobs in the record's credentials.json (0600,
never in a command, env, log or dry run); the local server mints temporary credentials
(``job-chain local sts``, the SDK's StsClient over real HTTP) and refuses an expired or unknown
token with BCE's error shape."""

from __future__ import annotations

import hashlib
import json
import stat
import time
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from chain_helpers import Ran, latest_run, write_chain
from conftest import LocalServer

from job_chain.aihc.credentials import resolve_credentials
from job_chain.errors import UsageError
from job_chain.local.auth import verify
from job_chain.local.errors import BadAuth, Forbidden

CLEAN = ("AIHC_HOST", "AIHC_AK", "AIHC_SK", "AIHC_SESSION_TOKEN", "AK", "SK", "HOST", "JOB_CHAIN_CREDENTIALS")


def bare(*args: str, **env: str) -> Ran:
    """The CLI, as click runs it (in this process: a CLI process each took seconds on a busy machine),
    with no host or keys in its environment but those given."""
    from click.testing import CliRunner

    from job_chain.cli import cli

    done = CliRunner().invoke(cli, list(args), env={**{k: None for k in CLEAN}, **env})
    return Ran(done.exit_code, done.stdout, done.stderr)


def mint(server: LocalServer, tmp_path: Path, duration: str = "1h") -> Dict[str, Any]:
    out = tmp_path / "sts.json"
    done = bare("local", "sts", "--duration", duration, "--out", str(out), "--state-dir", str(server.state_dir))
    assert done.returncode == 0, done.stderr
    made = json.loads(out.read_text())
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and set(made) == {"host", "ak", "sk", "sessionToken",
                                                                       "expiration"}
    assert made["sk"] not in done.stdout + done.stderr and made["sessionToken"] not in done.stdout + done.stderr
    assert made["host"] == server.url and made["ak"] != server.ak
    return dict(made, path=str(out), said=done.stdout)


def expire(server: LocalServer, ak: str) -> None:
    """The server's record of ``ak`` ends an hour ago (its clock is the machine's: no waiting)."""
    import sqlite3

    conn = sqlite3.connect(str(server.state_dir / "state.db"), timeout=30)
    try:
        with conn:
            conn.execute("UPDATE sessions SET expires=? WHERE ak=?", (time.time() - 3600, ak))
    finally:
        conn.close()


def test_a_chain_started_with_a_session_token_runs_to_the_end_and_keeps_it_secret(
        tmp_path: Path, shared_server: LocalServer) -> None:
    made = mint(shared_server, tmp_path)
    assert f"valid until {made['expiration']}" in made["said"] and made["path"] in made["said"]
    chain = write_chain(tmp_path / "chain", shared_server.pool, [
        {"name": "a", "script": "echo a"}, {"name": "b", "script": "echo b"}, {"name": "c", "script": "echo c"}])
    dry = bare("run", str(chain), "--dry-run", "--credentials", made["path"])
    assert dry.returncode == 0 and made["sessionToken"] not in dry.stdout + dry.stderr, dry.stderr
    done = bare("run", str(chain), "--follow", "--credentials", made["path"])
    assert done.returncode == 0, done.stdout + done.stderr  # b and c were submitted by the jobs, with the token
    for secret in (made["sk"], made["sessionToken"]):
        assert secret not in done.stdout + done.stderr
    run_id = latest_run(chain)
    carried = Path(f"{chain}.runs") / run_id / "credentials.json"
    assert stat.S_IMODE(carried.stat().st_mode) == 0o600
    assert json.loads(carried.read_text()) == {"host": made["host"], "ak": made["ak"], "sk": made["sk"],
                                                "sessionToken": made["sessionToken"]}
    with shared_server.db() as conn:
        specs = [row["spec"] + row["env"] for row in conn.execute(
            "SELECT jobs.spec AS spec, pods.env AS env FROM jobs JOIN pods ON pods.job_id = jobs.id")]
    mine = [s for s in specs if run_id in s]
    assert len(mine) == 3 and not any(made["sessionToken"] in s or made["sk"] in s for s in mine)
    logs = bare("logs", str(chain), "--step", "c", "--credentials", made["path"])
    assert logs.returncode == 0 and "c" in logs.stdout and made["sessionToken"] not in logs.stdout


def test_an_expired_or_unknown_session_token_is_refused_in_one_clear_line(
        tmp_path: Path, shared_server: LocalServer) -> None:
    made = mint(shared_server, tmp_path)
    env = {"AIHC_HOST": made["host"], "AIHC_AK": made["ak"], "AIHC_SK": made["sk"],
           "AIHC_SESSION_TOKEN": made["sessionToken"], "AIHC_RESOURCE_POOL_ID": shared_server.pool}
    assert bare("jobs", "list", **env).returncode == 0  # env AIHC_SESSION_TOKEN beside AIHC_AK/AIHC_SK
    flags = bare("jobs", "list", "--host", made["host"], "--ak", made["ak"], "--sk", made["sk"],
                 "--session-token", made["sessionToken"], "--pool", shared_server.pool)
    assert flags.returncode == 0
    assert "--session-token puts the session token in this process's command line" in flags.stderr
    wrong = bare("jobs", "list", **dict(env, AIHC_SESSION_TOKEN=made["sessionToken"][:-4] + "AAAA"))
    assert wrong.returncode == 1 and len(wrong.stderr.strip().splitlines()) == 1, wrong.stderr
    assert "403 InvalidSessionToken: the session token is not the one issued with access key" in wrong.stderr
    missing = bare("jobs", "list", **{k: v for k, v in env.items() if k != "AIHC_SESSION_TOKEN"})
    assert missing.returncode == 1 and "its session token must be sent (x-bce-security-token)" in missing.stderr
    expire(shared_server, made["ak"])
    expired = bare("jobs", "list", "--credentials", made["path"], "--pool", shared_server.pool)
    assert expired.returncode == 1 and len(expired.stderr.strip().splitlines()) == 1, expired.stderr
    assert expired.stderr.startswith("job-chain: error: AIHC error 403 InvalidSessionToken: the temporary "
                                     f"credentials of access key '{made['ak']}' expired at ")
    assert "job-chain local sts" in expired.stderr and f"credentials file {made['path']}" in expired.stderr
    assert made["sessionToken"] not in expired.stderr and made["sk"] not in expired.stderr
    asked = bare("local", "sts", "--duration", "99h", "--state-dir", str(shared_server.state_dir))
    assert asked.returncode == 2 and "at most 36h" not in asked.stderr and "up to 36h" in asked.stderr


def test_the_sts_endpoint_answers_the_sdks_client_and_only_to_the_servers_own_keys(
        tmp_path: Path, shared_server: LocalServer) -> None:
    from baidubce.auth.bce_credentials import BceCredentials
    from baidubce.bce_client_configuration import BceClientConfiguration
    from baidubce.exception import BceHttpClientError
    from baidubce.services.sts.sts_client import StsClient

    from job_chain.aihc.client import AIHCClient
    from job_chain.aihc.credentials import Credentials
    from job_chain.aihc.errors import AIHCError

    def sts(ak: str, sk: str, token: Optional[str] = None) -> StsClient:
        return StsClient(BceClientConfiguration(credentials=BceCredentials(ak, sk), endpoint=shared_server.url,
                                                security_token=token))

    answer = json.loads(sts(shared_server.ak, shared_server.sk).get_session_token(None, 600).raw_data)
    assert set(answer) >= {"accessKeyId", "secretAccessKey", "sessionToken", "createTime", "expiration"}
    temporary = AIHCClient(Credentials(shared_server.url, answer["accessKeyId"], answer["secretAccessKey"],
                                       token=answer["sessionToken"]))
    assert temporary.list_jobs(shared_server.pool)["jobs"] is not None  # signed with the token, accepted
    with pytest.raises(AIHCError) as error:  # temporary keys cannot mint more
        temporary.request("POST", "/v1/sessionToken", params={"durationSeconds": 600})
    assert (error.value.status, error.value.code) == (403, "AccessDenied")
    with pytest.raises(BceHttpClientError) as info:  # a policy it could not enforce is refused, not ignored
        sts(shared_server.ak, shared_server.sk).get_session_token({"accessControlList": [{"effect": "Allow"}]}, 600)
    assert info.value.last_error.status_code == 501 and "acl" in str(info.value.last_error)


# -- in-process: where a token is taken from, and how the server checks it ------------------------

def test_a_session_token_comes_with_its_key_pair_from_each_source(tmp_path: Path) -> None:
    file = tmp_path / "c.json"
    file.write_text(json.dumps({"host": "h", "ak": "AK1", "sk": "SK1", "sessionToken": "T1"}))
    assert resolve_credentials(credentials_file=str(file), env={}).token == "T1"
    assert resolve_credentials(host="h", ak="a", sk="s", session_token="T2", env={}).token == "T2"
    env = {"AIHC_HOST": "h", "AIHC_AK": "a", "AIHC_SK": "s", "AIHC_SESSION_TOKEN": "T3"}
    assert resolve_credentials(env=env).token == "T3"
    assert resolve_credentials(api_config={"host": "h", "ak": "a", "sk": "s", "sessionToken": "T4"}, env={}).token \
        == "T4"
    assert resolve_credentials(host="h", ak="a", sk="s", credentials_file=str(file), env={}).token == ""  # whole
    assert "T1" not in repr(resolve_credentials(credentials_file=str(file), env={}))
    with pytest.raises(UsageError, match="gives a session token but no ak/sk"):
        resolve_credentials(env={"AIHC_HOST": "h", "AIHC_SESSION_TOKEN": "T"})
    with pytest.raises(UsageError, match="sessionToken must be a string"):
        resolve_credentials(api_config={"host": "h", "ak": "a", "sk": "s", "sessionToken": 5}, env={})


def _signed(ak: str, sk: str, token: Optional[str], now: float, signed: Optional[list] = None) -> list:
    from baidubce.auth import bce_v1_signer
    from baidubce.auth.bce_credentials import BceCredentials

    headers = {b"host": b"127.0.0.1:1", b"x-bce-date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)).encode()}
    if token is not None:
        headers[b"x-bce-security-token"] = token.encode()
    auth = bce_v1_signer.sign(BceCredentials(ak, sk), b"GET", b"/api/v1/aijobs", headers, {}, timestamp=int(now),
                              headers_to_sign=signed)
    return list(headers.items()) + [(b"authorization", auth)]


def test_the_server_checks_the_token_of_temporary_keys() -> None:
    now = time.time()
    issued = {"tmp": {"sk": "tmpsk", "token_hash": hashlib.sha256(b"good-token").hexdigest(), "expires": now + 60}}

    def check(ak: str, sk: str, token: Optional[str], at: float = now, signed: Optional[list] = None) -> str:
        return verify("GET", b"/api/v1/aijobs", [], _signed(ak, sk, token, at, signed), {"own": "ownsk"},
                      now=at, sessions=issued.get)

    assert check("tmp", "tmpsk", "good-token") == "tmp" and check("own", "ownsk", None) == "own"
    for ak, sk, token, at, said in (
            ("tmp", "tmpsk", "bad-token", now, "not the one issued"),
            ("tmp", "tmpsk", None, now, "its session token must be sent"),
            ("tmp", "tmpsk", "good-token", now + 120, "expired at"),
            ("own", "ownsk", "good-token", now, "sent with a permanent access key"),
            ("nobody", "x", "good-token", now, "unknown access key id")):
        with pytest.raises(Forbidden, match=said) as info:
            check(ak, sk, token, at)
        assert info.value.status == 403
    with pytest.raises(BadAuth, match="x-bce-security-token is sent but not among the signed headers"):
        check("tmp", "tmpsk", "good-token", signed=[b"host"])


def test_a_session_token_in_api_config_is_hidden_wherever_a_chain_is_shown(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from job_chain.cli import cli

    token = "sts-token-0123456789abcdef"
    (tmp_path / "a.sh").write_text(f"echo {token}\n")  # pasted into a script by mistake
    chain = tmp_path / "chain_info.json"
    chain.write_text(json.dumps({"resourcePoolId": "p", "api_config": {
        "host": "127.0.0.1:1", "ak": "tmp-ak", "sk": "tmp-sk-0123456789", "sessionToken": token}, "jobs": [
        {"name": "a", "jobSpec": {"command": "a.sh", "image": "i"},
         "datasources": [{"type": "pfs", "name": "p", "mountPath": str(tmp_path)}]}]}))
    shown = CliRunner().invoke(cli, ["run", str(chain), "--dry-run"])
    assert shown.exit_code == 0, shown.output
    assert "echo " in shown.stdout and token not in shown.output
