"""Jobs as processes on the local server: env, stop, failure, queueing, restart, secrets."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import psutil
import pytest
from conftest import LocalServer, job_body


def _events(server: LocalServer, job_id: str) -> List[dict]:
    return server.client().job_events(server.pool, job_id)["events"]


# what AIHC documents that it gives a pod (its platform environment-variable page, the job-spec page's
# NCCL_DEBUG and, with RDMA, NCCL_IB_DISABLE): the local server gives exactly these, nothing more
DOCUMENTED = {"AIHC_JOB_NAME", "AIHC_TENSORBOARD_LOG_PATH", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE",
              "NPROC_PER_NODE", "NCCL_DEBUG"}


def pod_envs(server: LocalServer, tmp_path: Path, name: str, replicas: int = 1,
             **spec: Any) -> Tuple[str, Dict[int, Dict[str, str]]]:
    """(job id, RANK -> the environment its pod's script saw)."""
    cmd = f'env -0 > {tmp_path}/{name}-env-$RANK'
    job_id = server.client().create_job(server.pool, job_body(name, cmd, replicas=replicas, jobSpec=spec))["jobId"]
    server.wait_status(job_id, "Succeeded")
    envs = {}
    for rank in range(replicas):
        pairs = (tmp_path / f"{name}-env-{rank}").read_text().split("\0")
        envs[rank] = dict(p.split("=", 1) for p in pairs if "=" in p)
    return job_id, envs


def test_a_pod_gets_what_aihc_gives_a_pod_and_nothing_more(local_server: LocalServer, tmp_path: Path) -> None:
    """Issue 30 item 1: no API host, credentials, job id or POD_NAME (AIHC gives none of them), so no
    in-job path can depend on them; NPROC_PER_NODE as Baidu's torchrun example needs it."""
    import socket

    job_id, envs = pod_envs(local_server, tmp_path, "envs", replicas=2, envs=[{"name": "CUSTOM", "value": "yes"}],
                            resources=[{"name": "baidu.com/a800_80g_cgpu", "quantity": 8},
                                       {"name": "rdma/hca", "quantity": 1}])  # GPUs only: not the RDMA device
    port = envs[0]["MASTER_PORT"]
    for rank, env in envs.items():
        assert {k: env.get(k) for k in DOCUMENTED} == {
            "AIHC_JOB_NAME": "envs", "AIHC_TENSORBOARD_LOG_PATH": "", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
            "RANK": str(rank), "WORLD_SIZE": "2", "NPROC_PER_NODE": "8", "NCCL_DEBUG": "INFO"}
        assert env["CUSTOM"] == "yes"
        for absent in ("AIHC_HOST", "AIHC_AK", "AIHC_SK", "AIHC_JOB_ID", "JOB_CHAIN_CREDENTIALS", "POD_NAME",
                       "NCCL_IB_DISABLE"):
            assert absent not in env, absent
        assert {k for k in env if k.startswith("AIHC_")} <= DOCUMENTED
        # AIHC gives a pod no job id: none but the local server's own paths and process mark hold one
        marked = sorted({"TMPDIR", "PWD", "JOB_CHAIN_TREE"} & set(env))
        assert sorted(k for k, v in env.items() if job_id in v) == marked
        assert env["TMPDIR"].startswith(str(local_server.state_dir))
    assert envs[0]["HOSTNAME"] == "envs-master-0" and envs[1]["HOSTNAME"] == "envs-worker-0"
    # host network (AIHC's default with RDMA): the node's HOSTNAME, and NCCL told RDMA is there
    _, rdma = pod_envs(local_server, tmp_path, "rdma", replicas=2, enableRDMA=True)
    assert [e["HOSTNAME"] for e in rdma.values()] == [socket.gethostname()] * 2
    assert [e["NCCL_IB_DISABLE"] for e in rdma.values()] == ["0", "0"] and rdma[0]["NPROC_PER_NODE"] == "1"
    _, off = pod_envs(local_server, tmp_path, "rdma-off", enableRDMA=True, hostNetwork=False)
    assert off[0]["HOSTNAME"] == "rdma-off-master-0"


def test_replica_latency(local_server: LocalServer, tmp_path: Path) -> None:
    client, pool = local_server.client(), local_server.pool
    job_id = client.create_job(pool, job_body("envs", 'echo "$PWD"; command -v python3'))["jobId"]
    local_server.wait_status(job_id, "Succeeded")
    log = client.pod_logs(pool, job_id, "envs-master-0")["logs"][0].splitlines()
    assert log[0].startswith(str(local_server.state_dir))
    import sys
    assert log[1].startswith(os.path.dirname(sys.executable))
    with local_server.db() as db:
        row = db.execute("SELECT MIN(p.started_at) - j.created_at AS lag FROM jobs j JOIN pods p"
                         " ON p.job_id = j.id WHERE j.id = ?", (job_id,)).fetchone()
    print(f"create→process started: {row['lag'] * 1000:.1f} ms")
    assert row["lag"] < 2.0  # the pod starts at once, not after a poll; how fast is benchmarks/' business


def test_stop_terms_then_kills(local_server: LocalServer, tmp_path: Path) -> None:
    client, pool = local_server.client(), local_server.pool
    pid_file = tmp_path / "pid"
    job_id = client.create_job(pool, job_body("stubborn", f"trap '' TERM; echo $$ > {pid_file}; "
                                              "sleep 30"))["jobId"]
    local_server.wait_status(job_id, "Running")
    deadline = time.monotonic() + 5
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    inner = int(pid_file.read_text())
    started = time.monotonic()
    client.stop_job(pool, job_id)
    job = local_server.wait_status(job_id, "Stopped", timeout=10)
    assert job["finishedAt"]
    while psutil.pid_exists(inner) and psutil.Process(inner).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() - started < 6, "SIGKILL did not follow the grace period"
        time.sleep(0.05)
    assert time.monotonic() - started >= 1.5  # it ignored SIGTERM: only the KILL ended it
    reasons = [e["reason"] for e in _events(local_server, job_id)]
    assert "JobStopped" in reasons
    pod_reasons = [e["reason"] for e in client.pod_events(pool, job_id, "stubborn-master-0")["events"]]
    assert "Killing" in pod_reasons
    # a polite process stops at once
    quick = client.create_job(pool, job_body("polite", "sleep 30"))["jobId"]
    local_server.wait_status(quick, "Running")
    t0 = time.monotonic()
    client.stop_job(pool, quick)
    local_server.wait_status(quick, "Stopped", timeout=5)
    assert time.monotonic() - t0 < 1.5


def test_a_stop_right_after_the_create_stops_every_pod(local_server: LocalServer) -> None:
    """A stop that lands while the job's pods are being started leaves none behind: each pod is
    started and counted among the job's live pods under the lock a stop takes (a pod started
    outside it outlived a job already Stopped, or held it Stopping, in about half of the tries)."""
    client, pool = local_server.client(), local_server.pool
    for round_no in range(8):
        job_id = client.create_job(pool, job_body(f"race{round_no}", "while :; do sleep 0.05; done",
                                                  replicas=2))["jobId"]
        client.stop_job(pool, job_id)
        local_server.wait_status(job_id, "Stopped", timeout=8)
        db = local_server.db()
        try:
            pids = [row[0] for row in db.execute("SELECT pid FROM pods WHERE job_id = ?", (job_id,))]
        finally:
            db.close()
        alive = [pid for pid in pids if pid and psutil.pid_exists(pid)
                 and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
        assert alive == [], f"round {round_no}: pods of a Stopped job still run: {alive}"


def test_failing_replica_fails_job_and_stops_others(local_server: LocalServer) -> None:
    client, pool = local_server.client(), local_server.pool
    cmd = 'if [ "$RANK" = 1 ]; then sleep 0.2; echo boom; exit 3; fi; sleep 30'
    job_id = client.create_job(pool, job_body("failing", cmd, replicas=2))["jobId"]
    local_server.wait_status(job_id, "Failed", timeout=10)
    deadline = time.monotonic() + 5
    while True:
        pods = {p["objectMeta"]["name"]: p["podStatus"]["podPhase"]
                for p in client.get_job(pool, job_id)["podList"]["pods"]}
        if pods["failing-master-0"] != "Running" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert pods == {"failing-master-0": "Failed", "failing-worker-0": "Failed"}
    messages = [e["message"] for e in _events(local_server, job_id)]
    assert "Pod: default.failing-worker-0 exited with code 3" in messages
    assert any(m.startswith("PyTorchJob failing is failed") for m in messages)


def test_priority_queue_and_reorder(local_server_factory, tmp_path: Path) -> None:
    server = local_server_factory(max_running=1)
    client, pool = server.client(), server.pool
    order = tmp_path / "order"
    blocker = client.create_job(pool, job_body("blocker", f"echo blocker >> {order}; sleep 1"))["jobId"]
    server.wait_status(blocker, "Running")
    ids = {}
    for name, prio in (("a", "low"), ("b", "normal"), ("c", "high"), ("d", "normal")):
        ids[name] = client.create_job(pool, job_body(name, f"echo {name} >> {order}",
                                                     priority=prio))["jobId"]
    assert {client.get_job(pool, i)["status"] for i in ids.values()} == {"Pending"}
    client.update_job(pool, ids["a"], "high")  # a is older than c: now it goes first
    for job_id in ids.values():
        server.wait_status(job_id, "Succeeded", timeout=10)
    assert order.read_text().split() == ["blocker", "a", "c", "b", "d"]


def test_stop_pending_job(local_server_factory) -> None:
    server = local_server_factory(max_running=1)
    client, pool = server.client(), server.pool
    running = client.create_job(pool, job_body("runner", "sleep 30"))["jobId"]
    server.wait_status(running, "Running")
    queued = client.create_job(pool, job_body("queued", "true"))["jobId"]
    client.stop_job(pool, queued)
    assert client.get_job(pool, queued)["status"] == "Stopped"
    client.delete_job(pool, running)  # frees the slot and kills the process group


def test_datasource_mount_paths(local_server: LocalServer, tmp_path: Path) -> None:
    client, pool = local_server.client(), local_server.pool
    mount = tmp_path / "mnt" / "cluster"
    ok = client.create_job(pool, job_body("mounted", f"test -d {mount}", datasources=[
        {"type": "pfs", "name": "pfs-x", "mountPath": str(mount)}]))["jobId"]
    local_server.wait_status(ok, "Succeeded")
    blocked = tmp_path / "file"
    blocked.write_text("not a dir")
    bad = client.create_job(pool, job_body("unmountable", "true", datasources=[
        {"type": "pfs", "name": "pfs-y", "mountPath": str(blocked / "sub")}]))["jobId"]
    local_server.wait_status(bad, "Failed")
    assert any(e["reason"] == "FailedMount" and str(blocked / "sub") in e["message"]
               for e in _events(local_server, bad))


def test_restart_adopts_running_and_flags_lost(local_server: LocalServer, tmp_path: Path) -> None:
    client, pool = local_server.client(), local_server.pool
    survivor = client.create_job(pool, job_body("survivor", "sleep 1.5; echo done"))["jobId"]
    victim = client.create_job(pool, job_body("victim", "sleep 30"))["jobId"]
    finished = client.create_job(pool, job_body("early", "sleep 0.3; exit 4"))["jobId"]
    for job_id in (survivor, victim, finished):
        local_server.wait_status(job_id, ("Running", "Failed"))
    local_server.kill()
    with local_server.db() as db:
        victim_pid = db.execute("SELECT pid FROM pods WHERE job_id=?", (victim,)).fetchone()[0]
    os.killpg(victim_pid, signal.SIGKILL)
    time.sleep(0.5)  # "early" exits with 4 while no server watches
    local_server.start()
    client = local_server.client()
    listed = {j["jobId"] for j in client.list_jobs(pool, page_size=100)["jobs"]}
    assert {survivor, victim, finished} <= listed
    local_server.wait_status(victim, "Failed", timeout=5)
    assert any(e["reason"] == "ProcessLost" and "server was down" in e["message"]
               for e in _events(local_server, victim))
    local_server.wait_status(finished, "Failed", timeout=5)
    assert "Pod: default.early-master-0 exited with code 4" in [
        e["message"] for e in _events(local_server, finished)]
    local_server.wait_status(survivor, "Succeeded", timeout=10)
    assert client.pod_logs(pool, survivor, "survivor-master-0")["logs"] == ["done\n"]


def test_graceful_restart_keeps_state(local_server: LocalServer) -> None:
    client, pool = local_server.client(), local_server.pool
    job_id = client.create_job(pool, job_body("keep", "true"))["jobId"]
    local_server.wait_status(job_id, "Succeeded")
    ak = local_server.ak
    local_server.restart()
    assert local_server.ak == ak  # the generated key pair persists
    assert local_server.client().get_job(pool, job_id)["status"] == "Succeeded"


def test_secret_key_never_leaks(local_server: LocalServer) -> None:
    client, pool = local_server.client(), local_server.pool
    sk = local_server.sk
    assert stat.S_IMODE(os.stat(local_server.credentials_file).st_mode) == 0o600
    job_id = client.create_job(pool, job_body("leak", "env; cat /proc/$$/cmdline"))["jobId"]
    local_server.wait_status(job_id, "Succeeded")
    pod = "leak-master-0"
    answers = [client.get_job(pool, job_id), client.list_jobs(pool), client.job_events(pool, job_id),
               client.pod_events(pool, job_id, pod), client.pod_logs(pool, job_id, pod),
               client.job_nodes(pool, job_id), client.webterminal(pool, job_id, pod),
               client.job_metrics(pool, job_id, "CpuUsage")]
    for answer in answers:
        assert sk not in json.dumps(answer)
    logs = client.pod_logs(pool, job_id, pod)["logs"][0]
    assert "RANK=0" in logs and "JOB_CHAIN_CREDENTIALS=" not in logs and sk not in logs
    server_cmdline = " ".join(psutil.Process(local_server.proc.pid).cmdline())
    assert sk not in server_cmdline
    assert sk not in (local_server.state_dir / "server.log").read_text()


def test_a_missing_mount_path_is_created_only_in_the_temporary_directory(local_server: LocalServer,
                                                                          tmp_path: Path) -> None:
    """Issue 18 item 20: a cloud chain run locally (mountPath /root/pfs) creates nothing in the home
    directory; under /tmp a missing mountPath becomes a shared, sticky directory."""
    import tempfile
    import uuid

    outside = Path.home() / f".job-chain-test-{uuid.uuid4().hex[:8]}" / "pfs"
    if os.path.commonpath([os.path.realpath(tempfile.gettempdir()), os.path.realpath(outside)]) \
            == os.path.realpath(tempfile.gettempdir()):
        pytest.skip("the home directory is inside the temporary directory here")
    client, pool = local_server.client(), local_server.pool
    bad = client.create_job(pool, job_body("pfs", "true", datasources=[
        {"type": "pfs", "name": "pfs-x", "mountPath": str(outside)}]))["jobId"]
    local_server.wait_status(bad, "Failed")
    assert not outside.parent.exists()
    message = next(e["message"] for e in _events(local_server, bad) if e["reason"] == "FailedMount")
    assert f"create it (mkdir -p {outside})" in message and "only under" in message
    shared = tmp_path / "volume"
    ok = client.create_job(pool, job_body("vol", f"test -d {shared}", datasources=[
        {"type": "pfs", "name": "pfs-y", "mountPath": str(shared)}]))["jobId"]
    local_server.wait_status(ok, "Succeeded")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
