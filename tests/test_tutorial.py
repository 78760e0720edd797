"""docs/tutorial.md cannot rot (issue 29 item 17): its files (the code blocks marked ``file=NAME``)
are examples/tutorial/ byte for byte, and they run with the real CLI on the local server as the
page says: an output passed on, a parameter, a sweep, a join that starts once, a retry by cause."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any, Dict

from chain_helpers import JOB_CHAIN, cli_here

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "tutorial.md"
EXAMPLE = ROOT / "examples" / "tutorial"
MOUNT = "/tmp/job-chain-tutorial"


def doc_files() -> Dict[str, str]:
    """Every ```LANG file=NAME block of the tutorial, by NAME."""
    blocks = re.findall(r"^```[a-z]+ file=(\S+)\n(.*?)^```$", DOC.read_text(), re.MULTILINE | re.DOTALL)
    return dict(blocks)


def test_the_tutorials_files_are_the_example_byte_for_byte() -> None:
    files = doc_files()
    assert sorted(files) == sorted(p.name for p in EXAMPLE.iterdir())
    for name, text in files.items():
        assert (EXAMPLE / name).read_text() == text, name
    validated = subprocess.run([*JOB_CHAIN, "validate", "examples/tutorial/chain_info.json", "--local"], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
    assert validated.returncode == 0, validated.stderr
    assert f"$ job-chain validate examples/tutorial/chain_info.json --local\n{validated.stdout}" in DOC.read_text()


def test_the_tutorials_final_chain_runs_as_the_page_says(tmp_path: Path, shared_server: Any) -> None:
    shared = tmp_path / "shared"  # the storage every step mounts; the chain lives there, as the page says on AIHC
    shared.mkdir()
    for name, text in doc_files().items():
        (shared / name).write_text(text.replace(MOUNT, str(shared)))
    chain = shared / "chain_info.json"
    data = json.loads(chain.read_text())
    data["resourcePoolId"] = shared_server.pool
    chain.write_text(json.dumps(data))

    done = cli_here("run", str(chain), "--follow", "--param", "steps=500", server=shared_server)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("step baseline: attempt 1 failed: infra (ecc-uncorrectable on pod baseline-master-0); retrying as "
            "attempt 2; infra budget 1 left") in done.stdout + done.stderr  # as section 5 quotes it
    status = json.loads(cli_here("status", str(chain), "--json", server=shared_server, check=True).stdout)
    steps = {s.get("display") or s["name"]: s for s in status["steps"]}
    assert status["outcome"] == "succeeded" and status["params"] == {"steps": "500"}
    assert [(name, len(s["attempts"]), s["status"]) for name, s in steps.items()] == [
        ("prepare", 1, "Succeeded"), ("baseline", 2, "Succeeded"), ("train[lr=1e-4]", 1, "Succeeded"),
        ("train[lr=3e-4]", 1, "Succeeded"), ("compare", 1, "Succeeded"), ("report", 1, "Succeeded")]
    assert steps["baseline"]["attempts"][0]["failure"]["class"] == "infra"
    report = cli_here("logs", str(chain), "--step", "report", server=shared_server, check=True).stdout
    assert "sweep done: lr 1e-4, loss 2.500" in report and report.splitlines()[0] in DOC.read_text()
    data_path = cli_here("logs", str(chain), "--step", "train[lr=3e-4]", server=shared_server, check=True).stdout
    assert f"training on {shared}/{status['run']}/data.txt with lr=3e-4 for 500 steps" in data_path  # the output
