"""Bad input and bad jobs against a real local server over real HTTP: a 400 naming the field,
or the one job failed with an event; never a 500, a traceback, a stalled queue or a dead server."""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import os
import stat
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import urlencode

import psutil
import pytest
from conftest import LocalServer, job_body

from job_chain.aihc.client import AIHCClient
from job_chain.aihc.errors import AIHCError
from job_chain.local.store import Store

API = "/api/v1/aijobs"


def raw(server: LocalServer, method: str, path: str = API, params: Optional[Dict[str, str]] = None,
        body: bytes = b"", headers: Optional[Dict[bytes, bytes]] = None,
        signed: Optional[Sequence[bytes]] = None, authorization: Optional[str] = None,
        sent_body: Optional[bytes] = None) -> Tuple[int, Dict[str, Any]]:
    """Sign with the SDK's signer (``signed``: the headers to list) and send with http.client."""
    from baidubce.auth import bce_v1_signer
    from baidubce.auth.bce_credentials import BceCredentials

    params = {"resourcePoolId": server.pool} if params is None else params
    sign_headers = {b"host": f"127.0.0.1:{server.port}".encode(), b"content-type": b"application/json",
                    b"content-length": str(len(body)).encode()}
    sign_headers.update(headers or {})
    if authorization is None:
        authorization = bce_v1_signer.sign(
            BceCredentials(server.ak, server.sk), method.encode(), path.encode(), sign_headers, params,
            headers_to_sign=list(signed) if signed else None).decode()
    send_headers = {k.decode(): v.decode() for k, v in sign_headers.items() if k != b"host"}
    send_headers["Authorization"] = authorization
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request(method, f"{path}?{urlencode(params)}", body=body if sent_body is None else sent_body,
                 headers=send_headers)
    response = conn.getresponse()
    answer = json.loads(response.read())
    conn.close()
    return response.status, answer


def no_traceback(server: LocalServer) -> None:
    log = (server.state_dir / "server.log").read_text(errors="replace")
    assert "Traceback" not in log and "Error in ASGI" not in log, log[-3000:]


def events(server: LocalServer, job_id: str) -> List[Dict[str, Any]]:
    return server.client().job_events(server.pool, job_id)["events"]


# -- 400 naming the field, not 500 (items 2, 3, 6, 9, 17) ----------------------------------------

@pytest.mark.parametrize("body, field", [
    (job_body("nul-cmd", "echo a\x00b"), "jobSpec.command: contains a NUL byte"),
    (job_body("nul-env", "true", jobSpec={"envs": [{"name": "A", "value": "x\x00"}]}), "jobSpec.envs[0].value"),
    (job_body("eq-env", "true", jobSpec={"envs": [{"name": "A=B", "value": "x"}]}), "jobSpec.envs[0].name"),
    (job_body("nolabel", "true", labels=[{"key": "team"}]), "labels[0].value: required"),
    (job_body("prio", "true", priority=["high"]), "priority: must be one of high, normal, low"),
    (job_body("nulmount", "true", datasources=[{"mountPath": "/tmp/a\x00b"}]), "datasources[0].mountPath"),
])
def test_bad_create_bodies_are_400_naming_the_field(shared_server: LocalServer, body: Dict[str, Any],
                                                     field: str) -> None:
    with pytest.raises(AIHCError) as info:
        shared_server.client().create_job(shared_server.pool, body)
    assert info.value.status == 400 and info.value.code == "InappropriateJSON"  # BCE: a bad item
    assert field in info.value.message, info.value.message
    no_traceback(shared_server)


def test_a_mount_path_that_is_a_file_is_400(shared_server: LocalServer, tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x")
    body = job_body("filemount", "true", datasources=[{"mountPath": str(tmp_path / "plain")}])
    with pytest.raises(AIHCError) as info:
        shared_server.client().create_job(shared_server.pool, body)
    assert info.value.status == 400 and "is not a directory" in info.value.message


def test_odd_inputs_are_400_without_a_traceback(shared_server: LocalServer) -> None:
    server = shared_server
    job_id = server.client().create_job(server.pool, job_body("odd", "true"))["jobId"]
    server.wait_status(job_id, "Succeeded")
    pool = server.pool
    pod = "odd-master-0"
    cases = [
        ("GET", API, {"resourcePoolId": pool, "pageNo": "1e20"}, b""),
        ("GET", API, {"resourcePoolId": pool, "pageNo": "1" + "0" * 20}, b""),
        ("GET", API, {"resourcePoolId": pool, "pageNo": "9" * 19}, b""),
        ("GET", f"{API}/{job_id}/events", {"resourcePoolId": pool, "jobFramework": "PyTorchJob",
                                           "startTime": "1e20"}, b""),
        ("GET", f"{API}/{job_id}/events", {"resourcePoolId": pool, "jobFramework": "PyTorchJob",
                                           "startTime": "nan"}, b""),
        ("GET", f"{API}/{job_id}/pods/{pod}/logs", {"resourcePoolId": pool, "startTime": "1e20"}, b""),
        ("GET", f"{API}/{job_id}/pods/{pod}/logs", {"resourcePoolId": pool, "startTime": "1" + "0" * 20}, b""),
        ("GET", f"{API}/{job_id}/metrics", {"resourcePoolId": pool, "metricType": "CpuUsage",
                                            "startTime": "1" + "0" * 20}, b""),
        ("GET", f"{API}/{job_id}/pods/{pod}/webterminal", {"resourcePoolId": pool,
                                                           "handshakeTimeoutSecond": "9" * 3600}, b""),
        ("PUT", f"{API}/{job_id}", {"resourcePoolId": pool}, json.dumps({"priority": ["high"]}).encode()),
        ("POST", API, {"resourcePoolId": pool}, b"[" * 100_000 + b"]" * 100_000),
        ("POST", API, {"resourcePoolId": pool}, b'{"name": ' + b"9" * 5000 + b"}"),
        ("POST", API, {"resourcePoolId": pool}, b'{"name": NaN}'),
    ]
    for method, path, params, body in cases:
        status, answer = raw(server, method, path, params, body)
        assert status == 400, (method, path, str(params)[:80], status, answer)
        expected = {"POST": "MalformedJSON", "PUT": "InappropriateJSON"}.get(method, "InvalidParameter")
        assert answer["code"] == expected and len(answer["message"]) < 300, answer
    status, answer = raw(server, "POST", body=b"[" * 100_000 + b"]" * 100_000)
    assert "nested deeper than 100 levels" in answer["message"]
    no_traceback(server)


def test_huge_expiration_in_authorization_is_400(shared_server: LocalServer) -> None:
    header = f"bce-auth-v1/{shared_server.ak}/2026-01-01T00:00:00Z/{'9' * 5000}//abc"
    status, answer = raw(shared_server, "GET", authorization=header)
    assert status == 400 and answer["code"] == "InvalidHTTPAuthHeader", answer
    assert "at most 86400 seconds, got a 5000-digit number" in answer["message"]
    no_traceback(shared_server)


# -- signatures (item 10) ---------------------------------------------------------------------

def test_expiration_window_is_capped(shared_server: LocalServer) -> None:
    from baidubce.auth import bce_v1_signer
    from baidubce.auth.bce_credentials import BceCredentials

    server = shared_server
    headers = {b"host": f"127.0.0.1:{server.port}".encode(), b"content-type": b"application/json",
               b"content-length": b"0"}
    for expiration, expected in ((86400, 200), (86401, 400), (10**9, 400)):
        header = bce_v1_signer.sign(BceCredentials(server.ak, server.sk), b"GET", API.encode(), headers,
                                    {"resourcePoolId": server.pool}, expiration_in_seconds=expiration).decode()
        assert raw(server, "GET", authorization=header)[0] == expected, expiration


def test_listed_signed_headers_must_include_host(shared_server: LocalServer) -> None:
    status, answer = raw(shared_server, "GET", signed=[b"content-type"])
    assert status == 400 and "must include host" in answer["message"], answer
    assert raw(shared_server, "GET", signed=[b"host", b"content-type"])[0] == 200


def test_body_hash_when_sent_must_match_the_body(shared_server: LocalServer) -> None:
    server = shared_server
    good = json.dumps(job_body("hashed-a", "true")).encode()
    evil = json.dumps(job_body("hashed-b", "true")).encode()
    assert len(good) == len(evil)
    digest = {b"x-bce-content-sha256": hashlib.sha256(good).hexdigest().encode()}
    status, answer = raw(server, "POST", body=good, headers=digest, sent_body=evil)
    assert status == 400 and answer["code"] == "SignatureDoesNotMatch", answer
    assert "does not match the request body" in answer["message"]
    status, answer = raw(server, "POST", body=good, headers=digest)
    assert status == 200 and answer["result"]["jobName"] == "hashed-a"
    # listed headers: the hash must be among them, or it protects nothing
    status, answer = raw(server, "POST", body=good, headers=digest, signed=[b"host", b"content-length"])
    assert status == 400 and "not among the signed headers" in answer["message"]
    names = [j["name"] for j in server.client().list_jobs(server.pool, page_size=1000)["jobs"]]
    assert "hashed-b" not in names and names.count("hashed-a") == 1


# -- a bad job fails alone (items 2, 3) ---------------------------------------------------------

def _spec(name: str, command: str, **extra: Any) -> Dict[str, Any]:
    return dict(job_body(name, command), **extra)


def test_bad_jobs_fail_alone_at_launch_and_at_adoption(local_server: LocalServer, tmp_path: Path) -> None:
    """Jobs a create could not refuse (stored by an older server) fail with an event; the queue
    moves on and the server starts."""
    server, pool = local_server, local_server.pool
    server.stop()
    store = Store(str(server.state_dir / "state.db"))
    bad_mount = _spec("bad-mount", "true", datasources=[{"mountPath": f"{tmp_path}/a\x00b"}])
    bad_env = _spec("bad-env", "true", jobSpec={"image": "i", "command": "true",
                                                "envs": [{"name": "A=B", "value": "x"}]})
    running = _spec("bad-running", "echo a\x00b")
    ids = {}
    good = _spec("good", "echo good", labels=[{"key": "team"}])  # stored before labels were checked
    for body in (bad_mount, bad_env, running, good):
        job, _ = store.create_job(pool, body["name"], body, "normal", "default", None, 1)
        ids[body["name"]] = job["id"]
    # the previous server died while launching this one: Running, its pod never started
    store.set_job(ids["bad-running"], status="Running", started_at=time.time(), master_port=1)
    store.close()
    server.start()  # before: adoption raised ValueError and the server exited 70
    detail = server.wait_status(ids["good"], "Succeeded")  # before: every GET of it was a 500 KeyError
    assert {"key": "team", "value": ""} in detail["labels"]
    reasons = {}
    for name in ("bad-mount", "bad-env", "bad-running"):
        server.wait_status(ids[name], "Failed")
        job_events = events(server, ids[name])
        pod_events = server.client().pod_events(pool, ids[name], f"{name}-master-0")["events"]
        reasons[name] = {e["reason"]: e["message"] for e in job_events + pod_events}
    assert "NUL" in reasons["bad-mount"]["FailedMount"] or "null" in reasons["bad-mount"]["FailedMount"]
    assert "cannot start container" in reasons["bad-env"]["Failed"]
    assert "cannot start container" in reasons["bad-running"]["Failed"]
    client = server.client()
    later = client.create_job(pool, job_body("later", "true"))["jobId"]
    server.wait_status(later, "Succeeded")


def test_unmountable_path_fails_that_job_and_the_next_runs(local_server: LocalServer, tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x")
    client, pool = local_server.client(), local_server.pool
    bad = client.create_job(pool, job_body("unmountable", "true",
                                           datasources=[{"mountPath": str(tmp_path / "plain" / "sub")}]))["jobId"]
    good = client.create_job(pool, job_body("after-bad", "true"))["jobId"]
    local_server.wait_status(bad, "Failed")
    local_server.wait_status(good, "Succeeded")
    assert any(e["reason"] == "FailedMount" for e in events(local_server, bad))


# -- files under the state dir (items 11, 19) ----------------------------------------------------

def test_state_files_are_private_and_each_pod_has_its_tmpdir(local_server: LocalServer) -> None:
    client, pool = local_server.client(), local_server.pool
    cmd = 'echo "$TMPDIR"; stat -c %a "$TMPDIR"; touch "$TMPDIR/x" && echo made'
    job_id = client.create_job(pool, job_body("private", cmd, replicas=2))["jobId"]
    local_server.wait_status(job_id, "Succeeded")
    state = local_server.state_dir
    job_dir = state / "jobs" / job_id
    for pod in ("private-master-0", "private-worker-0"):
        tmpdir, mode, made = client.pod_logs(pool, job_id, pod)["logs"][0].splitlines()
        assert made == "made" and Path(tmpdir) == job_dir / "tmp" / pod and mode == "700"
        assert not os.path.exists(tmpdir)  # gone with the pod
        for path in (job_dir / f"{pod}.log", job_dir / f"{pod}.rc"):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert stat.S_IMODE((job_dir / pod).stat().st_mode) == 0o700
    for directory in (state / "jobs", job_dir, job_dir / "tmp"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600, name


def test_an_existing_world_readable_db_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"")
    os.chmod(path, 0o644)
    Store(str(path)).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# -- logs: read from the end, bounded (item 14) ----------------------------------------------------

def _peak_rss(pid: int) -> int:
    """Peak resident memory (VmHWM) of a process, in bytes; current RSS where /proc has no peak."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return psutil.Process(pid).memory_info().rss


def test_tail_of_a_huge_log_reads_only_the_end(local_server: LocalServer) -> None:
    from job_chain.aihc.engine import as_engine
    from job_chain.engine.logs import log_records
    from job_chain.local.logs import MAX_LOG_ANSWER

    client, pool = local_server.client(), local_server.pool
    job_id = client.create_job(pool, job_body("biglog", "echo first"))["jobId"]
    local_server.wait_status(job_id, "Succeeded")
    log = local_server.state_dir / "jobs" / job_id / "biglog-master-0.log"
    line = b"x" * 99 + b"\n"
    block = line * 10_000  # 1 MB
    with open(log, "ab") as handle:
        for _ in range(64):
            handle.write(block)
        handle.write(b"the-last-line\n")
    assert local_server.proc is not None
    before = _peak_rss(local_server.proc.pid)
    assert client.pod_logs(pool, job_id, "biglog-master-0", max_lines=1)["logs"] == ["the-last-line\n"]
    two = client.pod_logs(pool, job_id, "biglog-master-0", max_lines=2, chunk=1)["logs"]
    assert two == [line.decode(), "the-last-line\n"]
    grown = _peak_rss(local_server.proc.pid) - before
    assert grown < 100 * 2**20, f"--tail 1 took the server's peak memory up {grown / 2**20:.0f} MB"
    first = client.pod_logs(pool, job_id, "biglog-master-0")
    page = "".join(first["logs"])
    assert 0 < len(page) <= MAX_LOG_ANSWER and page.startswith("first\n") and page.endswith("x\n")
    assert first["nextMarker"]  # the rest comes page by page, never cut
    whole = "".join(log_records(as_engine(client), pool, job_id, "biglog-master-0"))
    assert whole.encode() == log.read_bytes()
    since = log_records(as_engine(client), pool, job_id, "biglog-master-0", start_time=1)
    assert "".join(since).endswith("the-last-line\n")
    grown = _peak_rss(local_server.proc.pid) - before
    assert grown < 100 * 2**20, f"bounded answers took the server's peak memory up {grown / 2**20:.0f} MB"


def test_follow_fetches_only_new_lines(local_server_factory: Any, tmp_path: Path,
                                      capsys: pytest.CaptureFixture) -> None:
    from job_chain.aihc.credentials import Credentials
    from job_chain.cli.follow import FOLLOW_OVERLAP, follow_logs

    local_server = local_server_factory(sample_interval=0.05)  # the log's time index, sampled often
    sizes: List[int] = []
    gate = tmp_path / "go"

    class CountingClient(AIHCClient):
        """job-chain's client, noting how much log text each answer carried; the job's new lines
        begin once the first answer (the last line before following) is in."""

        def pod_logs(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
            answer = super().pod_logs(*args, **kwargs)
            sizes.append(sum(len(r) for r in answer.get("logs") or []))
            gate.touch()
            return answer

    creds = local_server.creds()
    client = CountingClient(Credentials(local_server.url, creds["ak"], creds["sk"]), max_retries=0)
    pool = local_server.pool
    cmd = f"while [ ! -e {gate} ]; do sleep 0.05; done; for i in 1 2 3 4 5 6; do echo line-$i; sleep 0.2; done"
    job_id = client.create_job(pool, job_body("follow", cmd))["jobId"]
    local_server.wait_status(job_id, "Running")
    log = local_server.state_dir / "jobs" / job_id / "follow-master-0.log"
    deadline = time.monotonic() + 10
    while not log.exists() and time.monotonic() < deadline:  # Running comes just before the spawn
        time.sleep(0.02)
    with open(log, "ab") as handle:
        handle.write((b"p" * 99 + b"\n") * 30_000 + b"prefix-end\n")  # 3 MB written before following
    prefix = log.stat().st_size
    sampled = None
    while sampled is None:  # the server's time index has a sample past the prefix ...
        assert time.monotonic() < deadline, "the server did not sample the log"
        time.sleep(0.05)
        with local_server.db() as conn:
            sampled = conn.execute("SELECT MIN(ts) FROM log_index WHERE job_id=? AND pos>=?",
                                   (job_id, prefix)).fetchone()[0]
    # ... at or before the first poll's startTime (whole seconds, FOLLOW_OVERLAP before it starts)
    time.sleep(max(0.0, math.ceil(sampled) + FOLLOW_OVERLAP + 0.1 - time.time()))
    follow_logs(client, pool, job_id, "follow-master-0", tail=1, follow=True, interval=0.3)
    out = capsys.readouterr().out
    assert out == "prefix-end\n" + "".join(f"line-{i}\n" for i in range(1, 7))
    assert len(sizes) >= 3 and max(sizes[1:]) < 100_000, sizes  # never the 3 MB again


@pytest.mark.parametrize("shown, window, new", [
    (["a\n", "b\n"], ["a\n", "b\n", "c\n"], ["c\n"]),
    (["a\n", "b\n"], ["b\n", "c\n"], ["c\n"]),
    (["a\n", "b\n"], ["x\n", "a\n", "b\n"], []),
    (["a\n", "b\n"], [], []),
    (["a\n", "b\n"], ["c\n", "d\n"], None),
    ([], ["c\n"], ["c\n"]),
])
def test_the_lines_after_those_shown(shown: List[str], window: List[str], new: Optional[List[str]]) -> None:
    """What a re-read window owes after the last ``shown`` lines (None: it does not reach them)."""
    from job_chain.cli.follow import Resume

    resume = Resume(shown)
    owed = [out for line in window for out in resume.feed(line)]
    rest = resume.finish()
    assert (None if rest is None else owed + rest) == new
