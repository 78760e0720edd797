"""The in-job advance (``python3 -m job_chain.hop``): what it imports, and joins decided from the record.

Every hop of every run starts a fresh Python in the finishing job, so its imports are a budget:
a list of modules that must not load (the CLI, rich, the local server, and the HTTP stack for a
branch whose join is not ready) plus a generous cap on how many load beyond the interpreter's
own start. Counted with ``python -X importtime``, never timed: timings belong to benchmarks/.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Set

import pytest
from chain_helpers import RECORDED_RUN as RUN
from chain_helpers import diamond_jobs, recorded_run
from conftest import LocalServer

from job_chain.record.records import RunRecords

NEVER = ("click", "rich", "job_chain.cli", "job_chain.session", "job_chain.local", "job_chain.ui",
         "job_chain.spec.loader", "job_chain.status.observe", "platformdirs", "argparse")
# and for a branch whose join is not ready (the SDK itself loads tempfile, through pycryptodome's cffi)
NO_HTTP = ("http.client", "socket", "ssl", "email", "urllib.request", "baidubce", "Crypto", "concurrent.futures",
           "job_chain.aihc.client", "job_chain.aihc.connect", "tempfile", "subprocess")
# modules beyond a bare `python -c pass` (25 modules: an editable install is a .pth path, no import hook)
# 99 when written; the packages along seams (issue 28) added 6 packages and 6 modules, ~0.1 ms each
# (benchmarks/floor.py times the hop)
NOT_READY_BUDGET = 125
SUBMIT_BUDGET = 230  # with the SDK's signer and HTTP client (about 100 of them): 193 when written


def imported(stderr: str) -> List[str]:
    """Module names from ``python -X importtime`` output, in import order."""
    return [line.split("|")[2].strip() for line in stderr.splitlines() if line.startswith("import time:")
            and "|" in line and not line.rstrip().endswith("package")]


def startup() -> Set[str]:
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, text=True)
    return set(imported(done.stderr))


def heavy(modules: List[str], forbidden: tuple) -> List[str]:
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden)]


def named_tuples(modules: List[str]) -> List[type]:
    """The named tuples the job-chain modules a hop imported define (a fresh python makes each in ~0.3 ms)."""
    import importlib

    return [value for name in modules if name.startswith("job_chain")
            for value in vars(importlib.import_module(name)).values()
            if isinstance(value, type) and issubclass(value, tuple) and value.__module__ == name]


def named_by_strings(modules: List[str]) -> List[str]:
    """Those whose field annotations are strings (``from __future__ import annotations``): ``typing``
    compiles each one when the class is made, ~0.1 ms a field on every hop."""
    from typing import ForwardRef

    return [f"{t.__module__}.{t.__name__}" for t in named_tuples(modules)
            if any(isinstance(a, (str, ForwardRef)) for a in getattr(t, "__annotations__", {}).values())]


def diamond_record(directory: Path, host: Optional[str] = None, pool: str = "pool-x") -> Path:
    """A run of a → (b, c) → d recorded as started in job mode: a succeeded, b and c submitted."""
    recorded_run(directory / "chain_info.json", pool, diamond_jobs(), endpoint=host or "http://127.0.0.1:9",
                 submitted="abc", succeeded="a")
    return directory / "chain_info.json"


def hop(chain: Path, step: str, *, env: Dict[str, str], entry: tuple = ("-m", "job_chain.hop"),
        importtime: bool = True, run: str = RUN, exit_code: int = 0) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("AIHC_HOST", "AIHC_AK", "AIHC_SK", "AK", "SK",
                                                              "JOB_CHAIN_CREDENTIALS", "AIHC_JOB_ID")}
    command = [sys.executable, *(("-X", "importtime") if importtime else ()), *entry,
               "--run", run, "--step", step, "--attempt", "1", "--exit-code", str(exit_code), str(chain)]
    return subprocess.run(command, capture_output=True, text=True, env={**clean, **env}, timeout=120)


def test_a_branch_whose_join_is_not_ready_reads_the_record_and_loads_no_http(tmp_path: Path) -> None:
    chain = diamond_record(tmp_path)
    done = hop(chain, "b", env={})  # no credentials anywhere: asking the API would fail
    assert done.returncode == 0, done.stderr
    assert "job-chain: step b succeeded; its dependents also wait for c" in done.stderr
    modules = imported(done.stderr)
    assert "job_chain.hop.readiness" in modules
    assert heavy(modules, NEVER + NO_HTTP) == []
    assert named_by_strings(modules) == []
    extra = set(modules) - startup()
    assert len(extra) <= NOT_READY_BUDGET, sorted(extra)
    assert (tmp_path / "chain_info.json.runs" / RUN / "succeeded-b-attempt-1.json").exists()


def test_the_last_branch_of_a_join_submits_it_with_the_sdk_and_no_cli(tmp_path: Path,
                                                                      shared_server: LocalServer) -> None:
    chain = diamond_record(tmp_path, shared_server.url, shared_server.pool)
    records = RunRecords(str(chain))
    records.record_exit(RUN, "c", 1, 0)
    records.record_succeeded(RUN, "c", 1)
    done = hop(chain, "b", env={"JOB_CHAIN_CREDENTIALS": shared_server.credentials_file})
    assert done.returncode == 0, done.stderr
    assert "job-chain: step d submitted job" in done.stderr
    modules = imported(done.stderr)
    assert "baidubce.auth.bce_v1_signer" in modules and "baidubce.http.bce_http_client" in modules
    assert heavy(modules, NEVER) == []
    assert named_by_strings(modules) == []
    assert len(set(modules) - startup()) <= SUBMIT_BUDGET, len(set(modules) - startup())
    entry = records.submission(RUN, "d", 1)
    assert entry is not None and entry["mode"] == "job"
    end = time.monotonic() + 60  # d runs its own tail (the last step) and ends
    while shared_server.client().get_job(shared_server.pool, entry["jobId"])["status"] != "Succeeded":
        assert time.monotonic() < end
        time.sleep(0.1)


# runs `python3 -m job_chain.hop` as the tail does, saying on stderr each pass of the garbage collector
# that starts once the hop's own modules load (a hop ends with os._exit: nothing can be said after)
GC_PASSES = ("import gc, runpy, sys\n"
             "def said(phase, info):\n"
             "    if phase == 'start' and 'job_chain.hop.entry' in sys.modules:\n"
             "        sys.stderr.write('gc pass %d\\n' % info['generation'])\n"
             "gc.callbacks.append(said)\n"
             "runpy.run_module('job_chain.hop', run_name='__main__', alter_sys=True)\n")


def test_a_hop_runs_no_garbage_collector_pass_and_import_job_chain_loads_no_typing(tmp_path: Path) -> None:
    """Both cost every hop (~3 ms and ~1 ms of CPU): see hop/__main__.py and job_chain/__init__.py."""
    chain = diamond_record(tmp_path)
    done = hop(chain, "b", env={}, entry=("-c", GC_PASSES), importtime=False)
    assert done.returncode == 0, done.stderr
    assert "its dependents also wait for c" in done.stderr and "gc pass" not in done.stderr, done.stderr
    plain = subprocess.run([sys.executable, "-c", "import sys, job_chain; print('typing' in sys.modules)"],
                           capture_output=True, text=True)
    assert plain.stdout.split() == ["False"], plain.stderr


def test_job_chain_advance_by_hand_does_the_same(tmp_path: Path) -> None:
    chain = diamond_record(tmp_path)
    done = hop(chain, "c", env={}, entry=("-m", "job_chain", "advance"), importtime=False)
    assert done.returncode == 0, done.stderr
    assert "job-chain: step c succeeded; its dependents also wait for b" in done.stderr


@pytest.mark.parametrize("argv, message", [
    ([], "--run is required"),
    (["--run", RUN, "--step", "b", "--exit-code", "x"], "--exit-code must be a whole number, not 'x'"),
    (["--run", RUN, "--step", "b", "--exit-code", "0", "--bogus"], "unknown option --bogus"),
    (["--run", RUN, "--step", "b", "--exit-code", "0", "--snapshot", "file"], "--snapshot takes '-'"),
    (["--run", RUN, "--step", "b", "--exit-code", "0"], "advance needs the chain file path or --snapshot"),
])
def test_bad_arguments_are_one_line_errors(argv: List[str], message: str, capsys: Any) -> None:
    from job_chain.hop.entry import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("job-chain: error: ") and message in err and err.count("\n") == 1


def test_a_failed_step_with_no_credentials_in_its_job_still_records_why_and_keeps_its_code(tmp_path: Path) -> None:
    """The API client is made on first use: a failing tail that cannot reach the API still records
    the failure (cause unknown, saying why) and exits with the script's own code."""
    chain = diamond_record(tmp_path)
    done = hop(chain, "b", env={}, importtime=False, exit_code=3)
    assert done.returncode == 3, done.stderr
    assert "error:" not in done.stderr and "step b failed with exit code 3" in done.stderr
    failure = RunRecords(str(chain)).failure(RUN, "b", 1)
    assert failure is not None and failure["class"] == "unknown" and "no AIHC host" in failure["explanation"]
