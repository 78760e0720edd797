"""``--inject-faults``: each fault kind happens, has the cloud's shape, and is deterministic."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urlencode

import pytest
from conftest import LocalServer, job_body

from job_chain.aihc.errors import AIHCError

PATH = "/api/v1/aijobs"
DROP = "drop"


def send(server: LocalServer, method: str = "GET", params: Optional[Dict[str, str]] = None,
         body: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict[str, Any], Dict[str, str]]:
    """One signed request over a fresh connection: (status or DROP, JSON body, headers)."""
    from baidubce.auth import bce_v1_signer
    from baidubce.auth.bce_credentials import BceCredentials

    params = {"resourcePoolId": server.pool, **(params or {})}
    raw = json.dumps(body).encode() if body is not None else b""
    headers = {b"host": f"127.0.0.1:{server.port}".encode(), b"content-type": b"application/json",
               b"content-length": str(len(raw)).encode()}
    authorization = bce_v1_signer.sign(BceCredentials(server.ak, server.sk), method.encode(), PATH.encode(),
                                       headers, params).decode()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, f"{PATH}?{urlencode(params)}", body=raw or None, headers={
            "Content-Type": "application/json", "Content-Length": str(len(raw)), "Authorization": authorization})
        response = conn.getresponse()
        try:
            data = response.read()
        except http.client.IncompleteRead:
            return DROP, {}, dict(response.getheaders())
        return response.status, json.loads(data), {k.lower(): v for k, v in response.getheaders()}
    except (http.client.HTTPException, ConnectionError):
        return DROP, {}, {}
    finally:
        conn.close()


def fault_lines(server: LocalServer) -> List[str]:
    text = (server.state_dir / "server.log").read_text()
    return [line for line in text.splitlines() if "injected fault" in line]


def stored_jobs(server: LocalServer) -> List[Dict[str, Any]]:
    with server.db() as conn:
        return [dict(r) for r in conn.execute("SELECT id, name, client_token FROM jobs")]


def test_every_fault_kind_occurs_with_the_cloud_shape(local_server_factory: Any) -> None:
    server = local_server_factory(extra_args=["--inject-faults", "1", "--fault-seed", "7"])
    outcomes = [send(server) for _ in range(60)]
    statuses = [status for status, _, _ in outcomes]
    assert {503, 500, 429, DROP} == set(statuses)  # rate 1: nothing gets through
    codes = {503: "ServiceUnavailable", 500: "InternalError", 429: "TooManyRequests"}
    for status, body, headers in outcomes:
        if status == DROP:
            continue
        assert set(body) == {"requestId", "code", "message"}, body  # what the SDK's parse_error wants
        assert body["code"] == codes[status]
        assert headers["x-bce-request-id"] == body["requestId"]
        assert headers["content-type"] == "application/json"
    lines = fault_lines(server)
    assert len(lines) == 60  # every fault is logged, once
    for kind in ("503 before", "500 before", "429 before", "drop before", "503 after", "drop after"):
        assert any(f"injected fault {kind}: GET {PATH}" in line for line in lines), kind
    assert all(" INFO " in line and server.pool not in line for line in lines)  # no query string
    log = (server.state_dir / "server.log").read_text()
    assert "Traceback" not in log and "ERROR" not in log and server.sk not in log


def test_our_client_retries_through_the_faults(local_server_factory: Any) -> None:
    server = local_server_factory(extra_args=["--inject-faults", "0.5", "--fault-seed", "3"])
    client = server.client(max_retries=30, base_delay=0.001, max_delay=0.01)
    for _ in range(20):
        assert client.list_jobs(server.pool)["total"] == 0
    assert len(fault_lines(server)) >= 10
    with pytest.raises(AIHCError) as info:  # without retries the faults show, as retryable errors
        for _ in range(50):
            server.client().list_jobs(server.pool)
    assert info.value.retryable


def test_creates_fail_after_commit_and_naive_retries_duplicate(local_server_factory: Any) -> None:
    server = local_server_factory(extra_args=["--inject-faults", "1", "--fault-seed", "11"])
    client = server.client()  # no client token: create is never retried by our client
    for i in range(30):
        with pytest.raises(AIHCError):
            client.create_job(server.pool, job_body(f"lost-{i}", "true"))
    committed = stored_jobs(server)
    after = [line for line in fault_lines(server) if "after: POST" in line]
    assert committed and len(committed) == len(after) < 30  # the client saw an error for each one
    assert all("after the server answered 200" in line for line in after)

    server = local_server_factory(extra_args=["--inject-faults", "0.5", "--fault-seed", "5"])
    client = server.client()
    for i in range(20):  # a client that retries without idempotency
        while True:
            try:
                client.create_job(server.pool, job_body(f"naive-{i}", "true"))
                break
            except AIHCError:
                continue
    names = [job["name"] for job in stored_jobs(server)]
    assert set(names) == {f"naive-{i}" for i in range(20)}
    assert len(names) > 20  # duplicates: some creates were committed, then reported as failed


def test_create_retried_with_the_same_client_token_never_duplicates(local_server_factory: Any) -> None:
    server = local_server_factory(extra_args=["--inject-faults", "0.6", "--fault-seed", "9"])
    client = server.client(max_retries=40, base_delay=0.001, max_delay=0.01)
    answers = {}
    for i in range(20):
        answers[f"tok-{i}"] = client.create_job(server.pool, job_body(f"once-{i}", "true"),
                                                client_token=f"tok-{i}")["jobId"]
    jobs = stored_jobs(server)
    assert sorted(j["client_token"] for j in jobs) == sorted(answers)  # exactly one job per token
    assert {j["client_token"]: j["id"] for j in jobs} == answers
    assert any("after: POST" in line for line in fault_lines(server))  # commits were lost and retried


def test_same_seed_same_faults(local_server_factory: Any) -> None:
    first = local_server_factory(extra_args=["--inject-faults", "0.5", "--fault-seed", "42"])
    second = local_server_factory(extra_args=["--inject-faults", "0.5", "--fault-seed", "42"])
    other = local_server_factory(extra_args=["--inject-faults", "0.5", "--fault-seed", "43"])
    runs = [[send(server)[0] for _ in range(40)] for server in (first, second, other)]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]
    assert 0 < runs[0].count(200) < 40


def test_rate_zero_injects_nothing(local_server_factory: Any) -> None:
    server = local_server_factory(extra_args=["--inject-faults", "0", "--fault-seed", "1"])
    client = server.client()
    job_id = client.create_job(server.pool, job_body("calm", "true"))["jobId"]
    assert [send(server)[0] for _ in range(50)] == [200] * 50
    server.wait_status(job_id, "Succeeded")
    assert "fault" not in (server.state_dir / "server.log").read_text()


def test_healthz_and_the_log_websocket_are_never_faulted(local_server_factory: Any) -> None:
    import urllib.request

    from websockets.sync.client import connect

    server = local_server_factory(extra_args=["--inject-faults", "0.7", "--fault-seed", "2"])
    for _ in range(30):
        with urllib.request.urlopen(server.url + "/healthz", timeout=5) as response:
            assert response.status == 200
    assert fault_lines(server) == []
    # the API around the websocket is faulted, so reach it with retries and a client token
    client = server.client(max_retries=60, base_delay=0.001, max_delay=0.01)
    job_id = client.create_job(server.pool, job_body("term", "echo one; echo two"), client_token="term")["jobId"]
    while client.get_job(server.pool, job_id)["status"] != "Succeeded":
        time.sleep(0.05)
    url = client.webterminal(server.pool, job_id, "term-master-0")["WebTerminalUrl"]
    faults = len(fault_lines(server))
    with connect(url, open_timeout=5) as ws:
        assert "".join(ws) == "one\ntwo\n"
    assert len(fault_lines(server)) == faults


@pytest.mark.parametrize("rate", ["1.5", "-0.1", "lots"])
def test_rate_is_checked_by_the_cli(tmp_path: Any, rate: str) -> None:
    done = subprocess.run([sys.executable, "-m", "job_chain", "local", "serve", "--state-dir", str(tmp_path),
                           "--inject-faults", rate], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "--inject-faults" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "state.db").exists()


def test_local_start_passes_the_faults_on(tmp_path: Any) -> None:
    from job_chain.aihc.client import AIHCClient
    from job_chain.aihc.credentials import Credentials
    from job_chain.local import daemon

    state = tmp_path / "state"
    job_chain = [sys.executable, "-m", "job_chain", "local"]
    done = subprocess.run([*job_chain, "start", "--state-dir", str(state), "--inject-faults", "1",
                           "--fault-seed", "4"], capture_output=True, text=True, timeout=60)
    try:
        assert done.returncode == 0, done.stderr
        creds = json.loads((state / "credentials.json").read_text())
        with pytest.raises(AIHCError) as info:
            AIHCClient(Credentials(creds["host"], creds["ak"], creds["sk"]), max_retries=0).list_jobs("p")
        assert info.value.retryable
        log = (state / "server.log").read_text()
        assert "injecting faults into 100% of API requests (seed 4)" in log
        assert "injected fault" in log
    finally:
        daemon.stop(str(state))


def test_faults_hit_api_v2_actions_too(local_server_factory: Any) -> None:
    # --inject-faults matched paths starting /api/ only: at rate 1.0, v1 calls failed 10/10 and v2 0/10
    server = local_server_factory(extra_args=["--inject-faults", "1", "--fault-seed", "13"])
    statuses = []
    for _ in range(10):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            conn.request("GET", "/?action=DescribeJobs&resourcePoolId=" + server.pool, headers={"version": "v2"})
            answer = conn.getresponse()
            answer.read()  # a dropped answer is cut off half-way
            statuses.append(answer.status)
        except (http.client.HTTPException, OSError):
            statuses.append(DROP)
        finally:
            conn.close()
    assert set(statuses) <= {503, 500, 429, DROP} and len(statuses) == 10
    assert sum("injected fault" in line and "GET / " in line for line in fault_lines(server)) == 10
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/healthz")
    assert conn.getresponse().status == 200  # never faulted
    conn.close()
