"""The test Slurm cluster itself (tests/slurm_cluster.py): it runs real jobs on two nodes with GPUs,
and stopping it leaves no daemon and no job process behind, even with a job still running."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import slurm_cluster


def test_runs_a_two_node_gpu_job(slurm: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    job = slurm.run("sbatch", "--parsable", "--nodes=2", "--gres=gpu:1", f"--output={out}", "--wrap",
                    "srun bash -c 'echo node=$SLURM_NODEID gpus=$CUDA_VISIBLE_DEVICES'").stdout.strip()
    end = time.monotonic() + 30
    while slurm.run("squeue", "-h", "-j", job, "-t", "all", "-o", "%T").stdout.strip() != "COMPLETED":
        assert time.monotonic() < end, slurm.run("scontrol", "show", "job", job).stdout
        time.sleep(0.05)
    assert sorted(out.read_text().split("\n")[:2]) == ["node=0 gpus=0", "node=1 gpus=0"]


@pytest.mark.skipif(os.geteuid() != 0, reason="SLURM TESTS SKIPPED: slurmd needs root")
def test_stop_leaves_nothing_behind(tmp_path: Path) -> None:
    assert slurm_cluster.require() is None, slurm_cluster.require()
    cluster = slurm_cluster.SlurmCluster(tmp_path / "c")
    with cluster:
        pids = [p.pid for p in cluster.procs.values()]
        cluster.run("sbatch", f"--output={tmp_path}/o", "--wrap", "sleep 300")
        end = time.monotonic() + 30
        seen = set()
        while "sleep" not in seen and time.monotonic() < end:
            time.sleep(0.05)
            seen = {p.name() for p in cluster.leftovers()}
        assert {"slurmctld", "slurmd", "munged", "slurmstepd", "sleep"} <= seen, seen
    assert not cluster.leftovers()
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie" for pid in pids)


KILLED_RUN = """
import os, sys
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from slurm_cluster import SlurmCluster
SlurmCluster(Path(sys.argv[1])).start()
os.kill(os.getpid(), 9)  # a test run killed by a timeout: no teardown, no atexit
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="SLURM TESTS SKIPPED: slurmd needs root")
def test_a_killed_test_process_takes_its_cluster_along(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = tmp_path / "k"
    done = subprocess.run([sys.executable, "-c", KILLED_RUN, str(root), str(Path(__file__).parent)], timeout=60)
    assert done.returncode == -9
    cluster = slurm_cluster.SlurmCluster(root)
    end = time.monotonic() + 15
    while cluster.leftovers() and time.monotonic() < end:
        time.sleep(0.1)
    assert not cluster.leftovers()
