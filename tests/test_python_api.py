"""docs/python-api.md's example, run as written (in-process) on a local server of its own."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from chain_helpers import EXAMPLE_USER, EXAMPLES

from job_chain.local import daemon
from job_chain.local.process import ServerProcess

DOC = Path(__file__).resolve().parent.parent / "docs" / "python-api.md"


def test_the_documented_example_runs(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL).group(1)  # type: ignore[union-attr]
    demo = tmp_path / "examples" / "hello"
    shutil.copytree(EXAMPLES / "hello", demo)
    chain = demo / "chain_info.json"
    chain.write_text(chain.read_text().replace("/tmp/job-chain-hello", str(tmp_path / "pfs")))
    state_dir = tmp_path / "local-server"
    monkeypatch.setenv("JOB_CHAIN_LOCAL_DIR", str(state_dir))
    for name in ("AIHC_HOST", "AIHC_AK", "AIHC_SK", "AK", "SK", "JOB_CHAIN_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    try:
        exec(compile(code, str(DOC), "exec"), {})  # noqa: S102 - the documented example, verbatim
    finally:
        daemon.stop(str(state_dir))
        ServerProcess(state_dir).kill_pods()
    out = capsys.readouterr().out
    assert "outcome: succeeded" in out
    assert "1 hello-train Succeeded exit 0 attempts 1" in out
    assert (tmp_path / "pfs" / EXAMPLE_USER / "result.txt").read_text().strip() == "5050"
