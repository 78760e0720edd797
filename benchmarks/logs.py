"""Whole logs in pages: ``job-chain jobs logs JOB`` of a 200 MB log (DescribeJobLogs' nextMarker).

A job writes ``--megabytes`` of log (100-byte lines, and one 20 MB line in the middle); the whole
log is printed to a file through the real CLI, which follows ``nextMarker`` page by page (4 MiB a
page). Measured: wall time and throughput, that every byte arrived, the CLI's peak memory and
how far the server's peak memory rose. Both should stay near a page, whatever the log's size.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

import harness
from harness import Figure, ms

CLI_RSS_TARGET_MB = 150
SERVER_GROWTH_TARGET_MB = 100


def peak_rss_mb(pid: int) -> float:
    """The peak resident set of a live process (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main(argv: Optional[List[str]] = None) -> int:
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--megabytes", type=int, default=None, help="log size (default 200, --quick 32)")
    args = p.parse_args(argv)
    size = args.megabytes or (32 if args.quick else 200)
    started = time.time()
    lines = size * 10_000 // 2  # half of it in 100-byte lines before the long line, half after
    script = (f"yes {'x' * 98} | head -n {lines}; head -c 20000000 /dev/zero | tr '\\000' y; echo; "
              f"yes {'z' * 98} | head -n {lines}")
    with harness.BenchServer(keep=args.keep) as server:
        client = server.client()
        job_id = client.create_job(server.pool, {"name": "biglog", "jobSpec": {
            "image": "local", "command": script, "replicas": 1}})["jobId"]
        server.wait_done(1, stall_timeout=300)
        log = server.state_dir / "jobs" / job_id / "biglog-master-0.log"
        expected = log.stat().st_size
        assert server.proc is not None
        server_before = peak_rss_mb(server.proc.pid)
        out_path = server.work / "printed.log"
        peak: Dict[str, float] = {"cli": 0.0}
        with open(out_path, "wb") as out:
            begun = time.perf_counter()
            proc = subprocess.Popen([*harness.JOB_CHAIN, "jobs", "logs", job_id, "--pool", server.pool],
                                    stdout=out, stderr=subprocess.PIPE, env=server.cli_env())

            def watch() -> None:
                while proc.poll() is None:
                    try:
                        peak["cli"] = max(peak["cli"], peak_rss_mb(proc.pid))
                    except OSError:
                        return
                    time.sleep(0.05)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            stderr = proc.communicate(timeout=600)[1]
            wall = time.perf_counter() - begun
            watcher.join(timeout=5)
        if proc.returncode != 0:
            raise RuntimeError(f"job-chain jobs logs exited {proc.returncode}: {stderr[-500:]!r}")
        whole = out_path.stat().st_size == expected and out_path.read_bytes() == log.read_bytes()
        server_growth = peak_rss_mb(server.proc.pid) - server_before

    mb = expected / 1e6
    figures = [
        Figure(f"whole {mb:.0f} MB log through jobs logs", "every byte", "every byte" if whole else "CUT",
               whole, float(whole)),
        Figure("wall time (throughput)", "(reported)", f"{ms(wall)} ({mb / wall:.0f} MB/s)", None, wall),
        Figure("CLI peak memory (RSS)", f"≤ {CLI_RSS_TARGET_MB} MB", f"{peak['cli']:.0f} MB",
               peak["cli"] <= CLI_RSS_TARGET_MB, peak["cli"]),
        Figure("server peak memory growth", f"≤ {SERVER_GROWTH_TARGET_MB} MB", f"{server_growth:.0f} MB",
               server_growth <= SERVER_GROWTH_TARGET_MB, server_growth),
    ]
    harness.report("logs", args, figures, {"bytes": expected, "wall_s": wall, "cli_peak_rss_mb": peak["cli"],
                                           "server_peak_growth_mb": server_growth}, started, {"megabytes": size})
    return 0


if __name__ == "__main__":
    harness.main_wrapper(main)
