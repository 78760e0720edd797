"""Reliability drills on the real local server: injected faults, a killed server, bad signatures.

Every drill drives the real CLI in subprocesses; the steps advance themselves from inside their
jobs. Assertions read the server's SQLite state (``LocalServer.db()``), which the fault injector
cannot touch, and check that the secret key shows up nowhere a user or a job could see it.
"""

from __future__ import annotations

import calendar
import http.client
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterable, List, Tuple
from urllib.parse import urlencode

import pytest
from chain_helpers import cli, latest_run, make_chain
from conftest import LocalServer, job_body

from job_chain.engine.jobs import LABEL_ATTEMPT, LABEL_RUN, LABEL_STEP

pytestmark = pytest.mark.slow


def db_jobs(server: LocalServer) -> List[Dict[str, Any]]:
    """Every job as stored: id, status, name, command, labels (no HTTP, so no injected faults)."""
    with server.db() as conn:
        rows = conn.execute("SELECT id, status, name, spec FROM jobs").fetchall()
    jobs = []
    for row in rows:
        spec = json.loads(row["spec"])
        labels = {x["key"]: x["value"] for x in spec.get("labels") or []}
        jobs.append({"id": row["id"], "status": row["status"], "name": row["name"], "spec": spec,
                     "labels": labels})
    return jobs


def steps_by_run(jobs: Iterable[Dict[str, Any]]) -> Dict[str, Dict[Tuple[int, int], List[Dict[str, Any]]]]:
    """run id → (step, attempt) → the jobs carrying those labels."""
    found: Dict[str, Dict[Tuple[int, int], List[Dict[str, Any]]]] = {}
    for job in jobs:
        labels = job["labels"]
        if LABEL_RUN not in labels:
            continue
        key = (int(labels[LABEL_STEP].rsplit("-", 1)[1]), int(labels[LABEL_ATTEMPT]))  # make_chain's "step-N"
        found.setdefault(labels[LABEL_RUN], {}).setdefault(key, []).append(job)
    return found


def pod_log_tail(server: LocalServer, job_id: str, lines: int = 20) -> str:
    logs = sorted((server.state_dir / "jobs" / job_id).glob("*.log"))
    return "\n".join("\n".join(p.read_text(errors="replace").splitlines()[-lines:]) for p in logs)


def wait_chains(server: LocalServer, runs: Dict[str, int], timeout: float) -> List[Dict[str, Any]]:
    """Wait until each run's last step succeeded and no job is still going; fail fast on a failure."""
    end = time.monotonic() + timeout
    while True:
        jobs = db_jobs(server)
        failed = [j for j in jobs if j["status"] in ("Failed", "Stopped")]
        assert not failed, f"{failed[0]['id']} {failed[0]['status']}:\n{pod_log_tail(server, failed[0]['id'])}"
        by_run = steps_by_run(jobs)
        done = all(any(step == length - 1 and all(j["status"] == "Succeeded" for j in found)
                       for (step, _), found in by_run.get(run, {}).items())
                   for run, length in runs.items())
        if done and all(j["status"] == "Succeeded" for j in jobs):
            return jobs
        if time.monotonic() > end:
            progress = {run: len(by_run.get(run, {})) for run in runs}
            raise AssertionError(f"chains did not finish in {timeout:.0f}s; steps per run: {progress}")
        time.sleep(0.5)


def assert_each_step_once(jobs: List[Dict[str, Any]], runs: Dict[str, int]) -> None:
    """Zero duplicates, zero missing: every (run, step) has exactly one job, attempt 1, Succeeded."""
    by_run = steps_by_run(jobs)
    assert set(by_run) == set(runs), "jobs of unknown runs exist"
    for run, length in runs.items():
        counts = {key: len(found) for key, found in by_run[run].items()}
        assert counts == {(step, 1): 1 for step in range(length)}, (run, counts)
    assert len(jobs) == sum(runs.values())


def assert_clean(server: LocalServer, outputs: Iterable[str]) -> None:
    """No secret key and no traceback in any job command or env, pod log, server log or CLI output."""
    secret = server.sk
    texts = list(outputs)
    with server.db() as conn:
        texts += [row["spec"] for row in conn.execute("SELECT spec FROM jobs")]  # commands and envs
        texts += [row["env"] for row in conn.execute("SELECT env FROM pods")]  # what the pods got
    texts += [p.read_text(errors="replace") for p in (server.state_dir / "jobs").rglob("*.log")]
    texts.append((server.state_dir / "server.log").read_text(errors="replace"))
    assert len(secret) >= 32 and all(secret not in text for text in texts)
    assert not [text for text in texts if "Traceback" in text or "job-chain: internal error" in text]


RAN = 'echo "$AIHC_JOB_NAME" >> "$SHARED/ran"'  # a trivial step that leaves proof it ran (AIHC gives no job id)


def assert_each_ran_once(tmp_path: Path, jobs: List[Dict[str, Any]]) -> None:
    """Every job's script ran exactly once (the ``ran`` files of all chains under ``tmp_path``)."""
    ran = [line for path in tmp_path.rglob("shared/ran") for line in path.read_text().split()]
    assert sorted(ran) == sorted(j["name"] for j in jobs)


def run_chains(server: LocalServer, tmp_path: Path, chains: int, steps: int) -> Tuple[Dict[str, int], List[str]]:
    """Write ``chains`` chains of ``steps`` trivial steps and start them all at once with the CLI."""
    paths = []
    for i in range(chains):
        (tmp_path / f"chain-{i}").mkdir()
        paths.append(make_chain(tmp_path / f"chain-{i}", [{"script": RAN}] * steps, server.pool))

    def start(path: Path) -> Tuple[str, str]:
        done = cli("run", str(path), server=server, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return latest_run(path), done.stdout + done.stderr

    with ThreadPoolExecutor(max_workers=4) as pool:
        started = list(pool.map(start, paths))
    return {run: steps for run, _ in started}, [output for _, output in started]


def test_300_hops_under_30_percent_faults(tmp_path: Path, local_server_factory: Any) -> None:
    """20 chains x 15 steps at once through the real CLI; 30% of API calls fail, some after committing.

    Every step after the first is created by the hop of the step before it, through the faulty API,
    with 20 chains' hops at once: ~300 creates and their retries, of which 90 or more meet a fault
    (127 measured), each of the six kinds ~20 times (odds that one kind is never met: under 1e-9).
    The full size (~1,000 hops a style, on v1 and v2, with three kill -9 of the server) is
    ``benchmarks/drill.py`` (its README section 12).
    """
    server = local_server_factory(sample_interval=5.0, extra_args=["--inject-faults", "0.3", "--fault-seed", "1000"])
    runs, outputs = run_chains(server, tmp_path, chains=20, steps=15)
    jobs = wait_chains(server, runs, timeout=240)
    assert_each_step_once(jobs, runs)
    assert_each_ran_once(tmp_path, jobs)
    log = (server.state_dir / "server.log").read_text()
    assert log.count("injected fault") > 90
    for kind in ("503 before", "500 before", "429 before", "drop before", "503 after", "drop after"):
        assert f"injected fault {kind}: POST /api/v1/aijobs" in log, kind  # lost commits included
    # what a user sees through the (faulty) API agrees, and holds no secret either
    client = server.client(max_retries=30, base_delay=0.01, max_delay=0.1)
    listed = list(client.iter_jobs(server.pool))
    assert sorted(j["jobId"] for j in listed) == sorted(j["id"] for j in jobs)
    details = [client.get_job(server.pool, j["id"]) for j in jobs[::25]]
    outputs += [json.dumps(listed), json.dumps(details)]
    assert all(d["podList"]["pods"][0]["envs"] for d in details)
    assert_clean(server, outputs)


def test_run_outlasts_a_burst_of_faults_without_a_duplicate(tmp_path: Path, local_server_factory: Any) -> None:
    """With seed 19 the first six API calls fail, the first one after the job was committed.

    ``run`` keeps retrying with its client token instead of giving up after the client's own
    retries (and leaving a committed step 0 to advance a run the user was told had failed).
    """
    server = local_server_factory(extra_args=["--inject-faults", "0.7", "--fault-seed", "19"])
    # step 0 waits until run has returned, so that its own advance does not join the first API calls
    gate = 'while [ ! -e "$SHARED/go" ]; do sleep 0.05; done'
    chain = make_chain(tmp_path, [{"script": gate}, {"script": "true"}], server.pool)
    done = cli("run", str(chain), server=server)
    (tmp_path / "shared").mkdir(exist_ok=True)
    (tmp_path / "shared" / "go").touch()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "retrying in" in done.stderr
    lines = [line for line in (server.state_dir / "server.log").read_text().splitlines() if "injected" in line]
    assert "injected fault 503 after: POST" in lines[0] and all(": POST" in line for line in lines[:6])
    run = latest_run(chain)
    jobs = wait_chains(server, {run: 2}, timeout=180)
    assert_each_step_once(jobs, {run: 2})
    first = next(j for j in jobs if j["labels"][LABEL_STEP] == "step-0")
    assert f"submitted as job {first['id']}" in done.stdout  # the job the first, "failed" call created
    assert_clean(server, [done.stdout + done.stderr])


def test_chain_survives_kill_9_of_the_server(tmp_path: Path, local_server_factory: Any) -> None:
    """SIGKILL the server three times mid-chain, the last one as a step is being launched, and
    restart it on the same state: the chain completes, each step created once and run once."""
    server = local_server_factory(sample_interval=5.0)
    steps = 14
    script = RAN + "; sleep 0.3"
    chain = make_chain(tmp_path, [{"script": script}] * steps, server.pool)
    done = cli("run", str(chain), server=server, check=True)
    outputs = [done.stdout + done.stderr]
    run = latest_run(chain)
    progress = []
    for kill_at, down_for, poll in ((3, 2.0, 0.05), (7, 0.2, 0.05), (10, 0.0, 0.001)):
        end = time.monotonic() + 60
        while len(steps_by_run(db_jobs(server)).get(run, {})) <= kill_at:
            assert time.monotonic() < end, "the chain did not get going"
            time.sleep(poll)
        server.kill()
        progress.append(len(steps_by_run(db_jobs(server))[run]))
        time.sleep(down_for)  # jobs end and try to advance while nobody answers
        server.start()
    jobs = wait_chains(server, {run: steps}, timeout=120)
    assert_each_step_once(jobs, {run: steps})
    assert all(0 < n < steps for n in progress), progress
    assert_each_ran_once(tmp_path, jobs)
    status = cli("status", str(chain), "--json", server=server, check=True)
    assert json.loads(status.stdout)["outcome"] == "succeeded"
    assert_clean(server, outputs + [status.stdout + status.stderr])


def crash_mid_launch(server: LocalServer, job_id: str, spawned: bool) -> None:
    """Kill the server, then leave its state as a crash inside the launch of ``job_id`` would:
    the job Running, its pod never recorded as started (whether or not its process began)."""
    import sqlite3

    server.kill()
    conn = sqlite3.connect(str(server.state_dir / "state.db"))
    with conn:
        if not spawned:
            conn.execute("UPDATE jobs SET status='Running', started_at=? WHERE id=?", (time.time(), job_id))
        conn.execute("UPDATE pods SET status='Pending', pid=NULL, create_time=NULL, started_at=NULL, env='[]'"
                     " WHERE job_id=?", (job_id,))
    conn.close()
    server.start()


@pytest.mark.parametrize("spawned", [True, False], ids=["after-spawn", "before-spawn"])
def test_kill_9_while_launching_a_pod(tmp_path: Path, local_server_factory: Any, spawned: bool) -> None:
    """A crash between marking a job Running and recording its pod's process: the restarted
    server adopts the process if it began, starts it if not; the job ends, its command ran once."""
    server = local_server_factory(sample_interval=5.0, max_running=1)
    client = server.client()
    ran = tmp_path / "ran"
    blocker = client.create_job(server.pool, job_body("blocker", "sleep 1.5"))["jobId"]
    go = tmp_path / "go"  # the pod outlives the restart however slow it is (the machine may be busy)
    job_id = client.create_job(server.pool, job_body(
        "once", f'echo "$HOSTNAME" >> {ran}; while [ ! -e {go} ]; do sleep 0.05; done'))["jobId"]
    if spawned:
        server.wait_status(job_id, "Running", timeout=30)
        while not ran.exists():
            time.sleep(0.02)
    else:
        server.wait_status(blocker, "Running")
        assert client.get_job(server.pool, job_id)["status"] == "Pending"
    crash_mid_launch(server, job_id, spawned)  # returns once the new server has adopted or relaunched
    go.touch()
    detail = server.wait_status(job_id, "Succeeded", timeout=30)
    assert ran.read_text() == "once-master-0\n"
    assert detail["podList"]["pods"][0]["envs"]  # what the API shows was restored too
    reasons = [e["reason"] for e in client.pod_events(server.pool, job_id, "once-master-0")["events"]]
    assert ("Adopted" if spawned else "Restarted") in reasons
    server.wait_status(blocker, "Succeeded")


def raw_request(port: int, method: str, target: str, headers: Dict[str, str], body: bytes) -> Tuple[int, Any]:
    """Send exactly these bytes (a captured request) and return (status, JSON answer)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, target, body=body or None, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_replayed_stretched_and_redated_signatures_are_rejected(local_server: LocalServer) -> None:
    """A captured signed create works only until its expiration; no edit of it is accepted.

    (Tampered signatures, wrong secret keys and unknown access keys: tests/test_local_auth.py.)
    """
    from baidubce.auth import bce_v1_signer
    from baidubce.auth.bce_credentials import BceCredentials

    server = local_server
    body = json.dumps({"name": "replayed", "jobSpec": {"image": "local", "command": "true"}}).encode()
    params = {"resourcePoolId": server.pool, "clientToken": "replay-1"}
    sign_headers = {b"host": f"127.0.0.1:{server.port}".encode(), b"content-type": b"application/json",
                    b"content-length": str(len(body)).encode()}
    authorization = bce_v1_signer.sign(BceCredentials(server.ak, server.sk), b"POST", b"/api/v1/aijobs",
                                       sign_headers, params, expiration_in_seconds=2).decode()
    target = f"/api/v1/aijobs?{urlencode(params)}"
    headers = {"Content-Type": "application/json", "Authorization": authorization}

    status, first = raw_request(server.port, "POST", target, headers, body)
    assert status == 200, first
    status, again = raw_request(server.port, "POST", target, headers, body)  # replay inside the window
    assert status == 200 and again["result"]["jobId"] == first["result"]["jobId"]  # the token: still one job
    longer = body.replace(b'"true"', b'"true; true"')  # another body: its content-length was signed
    status, answer = raw_request(server.port, "POST", target, headers, longer)
    assert status == 400 and answer["code"] == "SignatureDoesNotMatch"  # BCE: 400, not 403

    _, ak, stamp, expiration, signed, signature = authorization.split("/")
    time.sleep(max(0.0, calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")) + 3.2 - time.time()))
    attempts = {
        "replayed after expiry": (authorization, "RequestExpired"),
        "expiration stretched": (f"bce-auth-v1/{ak}/{stamp}/1800/{signed}/{signature}", "SignatureDoesNotMatch"),
        "timestamp moved to now": (f"bce-auth-v1/{ak}/{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}/"
                                   f"{expiration}/{signed}/{signature}", "SignatureDoesNotMatch"),
    }
    for what, (header, code) in attempts.items():
        status, answer = raw_request(server.port, "POST", target, dict(headers, Authorization=header), body)
        assert status == 400, what  # RequestExpired and SignatureDoesNotMatch are 400 in BCE
        assert set(answer) == {"requestId", "code", "message"} and answer["code"] == code, (what, answer)
    assert [j["name"] for j in db_jobs(server)] == ["replayed"]
    assert_clean(server, [json.dumps(first)])
