"""Issue 18 item 10: logs over 4 MiB are paged, not cut. ``job-chain logs`` and the console's
"download the full log" give the whole log (a 120,001-line log and a single 9 MB line), page by
page through DescribeJobLogs' nextMarker; a log that cannot be read to its end says so."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import pytest
import requests
from chain_helpers import cli_here, latest_run, make_chain
from ui_helpers import Console

from job_chain.ui.catalog import chain_id

# 120,001 numbered lines of 48 bytes (5.8 MB), a 9 MB line without spaces, and a last line
LINE = "abcdefghij0123456789" * 2
SCRIPT = (f"awk 'BEGIN {{ for (i = 1; i <= 120001; i++) printf \"%06d %s\\n\", i, \"{LINE}\" }}'\n"
          "head -c 9000000 /dev/zero | tr '\\000' y; echo\n"
          "echo the-end\n")


@pytest.fixture(scope="module")
def big_run(shared_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[Path, bytes]]:
    home = tmp_path_factory.mktemp("paged-logs") / "c"
    home.mkdir()
    chain = make_chain(home, [{"name": "big", "script": SCRIPT}], shared_server.pool)
    cli_here("run", str(chain), "--follow", server=shared_server, check=True)
    job = next(j for j in shared_server.client().iter_jobs(shared_server.pool) if j["name"] == "big"
               and any(lb["value"] == latest_run(chain) for lb in j["labels"]))
    text = (shared_server.state_dir / "jobs" / job["jobId"] / "big-master-0.log").read_bytes()
    assert len(text) > 14_000_000 and b"y\nthe-end\n" in text  # then the chain's own last word
    old = os.environ.get("JOB_CHAIN_CREDENTIALS")
    os.environ["JOB_CHAIN_CREDENTIALS"] = shared_server.credentials_file
    yield chain, text
    if old is None:
        os.environ.pop("JOB_CHAIN_CREDENTIALS", None)
    else:
        os.environ["JOB_CHAIN_CREDENTIALS"] = old


def test_logs_over_4_mib_are_paged_not_cut(big_run: Tuple[Path, bytes], shared_server: Any) -> None:
    chain, text = big_run
    printed = cli_here("logs", str(chain), server=shared_server, check=True).stdout
    assert printed.encode() == text  # every line, the 9 MB one whole, from line 000001
    every = cli_here("logs", str(chain), "--all-pods", server=shared_server, check=True).stdout.splitlines()
    assert every == ["[big-master-0] " + line for line in text.decode().splitlines()]
    assert len(every) > 120_003 and every[0] == f"[big-master-0] 000001 {LINE}"
    assert "[big-master-0] " + "y" * 9_000_000 in every
    tail = cli_here("logs", str(chain), "--tail", "3", server=shared_server, check=True).stdout
    assert tail.encode() == b"".join(text.splitlines(True)[-3:])

    console = Console([str(chain.parent)])
    try:
        base = f"/{chain_id(str(chain))}/{latest_run(chain)}/0"
        with requests.get(console.url + "/download/log" + base, stream=True, timeout=60) as full:
            assert full.status_code == 200
            downloaded = b"".join(full.iter_content(1 << 16))
    finally:
        console.close()
    assert downloaded == text


def test_a_log_that_cannot_be_read_to_its_end_says_so(big_run: Tuple[Path, bytes], shared_server: Any,
                                                      capsys: pytest.CaptureFixture) -> None:
    """A job deleted while its log is read: the pages before are printed, then one plain error."""
    from job_chain.aihc.engine import as_engine
    from job_chain.cli.follow import follow_logs
    from job_chain.engine.logs import LogIncomplete
    from job_chain.ui.views import log_download

    client, pool = shared_server.client(), shared_server.pool
    job_id = client.create_job(pool, {"name": "gone", "jobSpec": {
        "image": "local", "command": "head -c 6000000 /dev/zero | tr '\\000' z | fold -w 99"}})["jobId"]
    shared_server.wait_status(job_id, "Succeeded")

    class DeletingClient:
        """The real client; the job is deleted once the first page has been answered."""

        def __getattr__(self, name: str) -> Any:
            return getattr(client, name)

        def pod_logs(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
            answer = client.pod_logs(*args, **kwargs)
            if answer.get("nextMarker"):
                client.delete_job(pool, job_id)
            return answer

    with pytest.raises(LogIncomplete) as info:
        follow_logs(DeletingClient(), pool, job_id, "gone-master-0", None, False)
    assert "stops here: page 2 could not be read" in str(info.value) and "not shown" in str(info.value)
    assert 0 < len(capsys.readouterr().out) <= 4 << 20  # the first page was printed

    from job_chain.engine.logs import log_records

    job_id = client.create_job(pool, {"name": "gone", "jobSpec": {
        "image": "local", "command": "head -c 6000000 /dev/zero | tr '\\000' z | fold -w 99"}})["jobId"]
    shared_server.wait_status(job_id, "Succeeded")
    pieces = b"".join(log_download(log_records(as_engine(DeletingClient()), pool, job_id, "gone-master-0"), []))
    assert pieces.endswith(b"]\n") and b"[job-chain: the log is cut here: " in pieces
