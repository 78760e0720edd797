"""`job-chain bundle`: a runtime that old training-image Pythons can use from shared storage."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest
from chain_helpers import cli_here, latest_run, make_chain, run_jobs

WHEELS = Path(__file__).resolve().parent.parent / ".venv" / "bundle-wheels"


def python38() -> Optional[str]:
    for candidate in ("python3.8", "/root/.pyenv/versions/3.8.18/bin/python3"):
        found = shutil.which(candidate) if "/" not in candidate else (candidate if os.path.exists(candidate) else None)
        if found and subprocess.run([found, "-c", "pass"], capture_output=True).returncode == 0:
            return found
    return None


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not WHEELS.is_dir():
        pytest.skip("no offline wheels: `make install` downloads them into .venv/bundle-wheels")
    target = tmp_path_factory.mktemp("pfs") / "job-chain-runtime"
    done = subprocess.run([sys.executable, "-m", "job_chain", "bundle", str(target), "--wheels", str(WHEELS)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f'"scrips_path": "{target}"' in done.stdout
    return target


def test_bundle_holds_the_runtime_and_abi3_crypto(bundle_dir: Path) -> None:
    assert (bundle_dir / "job_chain" / "__main__.py").is_file()
    assert (bundle_dir / "baidubce" / "auth" / "bce_v1_signer.py").is_file()
    compiled = list((bundle_dir / "Crypto").rglob("*.so"))
    assert compiled and all(".abi3." in p.name for p in compiled)
    assert not (bundle_dir / "job_chain" / "local").exists()  # the server is not needed in jobs


def test_chain_advances_through_the_bundle(tmp_path: Path, local_server: Any, bundle_dir: Path) -> None:
    chain = make_chain(tmp_path, [{"script": "echo a"}, {"script": "echo b"}], local_server.pool,
                       scrips_path=str(bundle_dir))
    cli_here("run", str(chain), "--follow", server=local_server, check=True)
    jobs = run_jobs(local_server, latest_run(chain))
    assert len(jobs) == 2 and all(j["status"] == "Succeeded" for j in jobs)
    assert f"PYTHONPATH={bundle_dir}" in jobs[0]["command"]


def test_bundle_runs_on_python_3_8(local_server: Any, bundle_dir: Path) -> None:
    interpreter = python38()
    if interpreter is None:
        pytest.skip("no Python 3.8 interpreter on this machine")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(bundle_dir),
           "JOB_CHAIN_CREDENTIALS": local_server.credentials_file}
    done = subprocess.run([interpreter, "-m", "job_chain", "jobs", "list", "--pool", local_server.pool, "--json"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert isinstance(json.loads(done.stdout), list)
    hop = subprocess.run([interpreter, "-m", "job_chain.hop"], capture_output=True, text=True, env=env, timeout=60)
    assert hop.returncode == 2 and hop.stderr.startswith("job-chain: error: --run is required")  # the tail's entry
