"""``job-chain diagnose`` on a 1 GB log: wall time, peak memory and bytes read — it reads only the tail.

A training log of 1 GiB (Megatron iteration lines, ending in an NCCL collective timeout) is
written to a temporary file, then ``job-chain diagnose FILE --json`` runs on it as a user runs
it (a subprocess; its peak RSS from ``wait4``), beside the same command on a 1 MiB log with the
same ending: if only the tail is read, both take the same time. The bytes the classification
reads are counted in-process (``/proc/self/io`` ``rchar`` around ``classify_files``). The file
is removed afterwards (``--keep`` keeps it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import harness
from harness import Figure, ms

GIB = 1 << 30
TARGET_WALL_S = 0.5  # the CLI's own start-up included
TARGET_READ = 1 << 20  # bytes read for any size of log (the tail is 256 KiB)
TARGET_RSS_MB = 100.0
ENDING = ("[rank5]:[E514 10:33:02.118427551 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective operation "
          "timeout: WorkNCCL(SeqNum=88211, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
          "600013 milliseconds before timing out.\n")


def write_log(path: Path, size: int) -> int:
    """A Megatron-like training log of about ``size`` bytes ending in a collective timeout."""
    line = (" [2024-05-14 10:22:31] iteration {:>8}/  500000 | consumed samples: {:>12} | elapsed time per iteration "
            "(ms): 4512.3 | learning rate: 2.999E-04 | global batch size:  1024 | lm loss: 2.834512E+00 | loss "
            "scale: 1.0 | grad norm: 0.812 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    block_lines = 4096
    written = iteration = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < size - len(ENDING):
            block = "".join(line.format(iteration + i, (iteration + i) * 1024) for i in range(block_lines))
            iteration += block_lines
            out.write(block)
            written += len(block.encode())
        out.write(ENDING)
        written += len(ENDING)
    return written


def timed(command: List[str], env: Dict[str, str]) -> Tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout) of one run, from wait4's rusage."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read().decode() if proc.stdout else ""  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return wall, usage.ru_maxrss / 1024.0, out


def bytes_read(path: Path) -> Optional[int]:
    """Bytes this process reads while classifying ``path`` (Linux rchar), None where unknown."""
    from job_chain.failures.classify import classify_files

    def rchar() -> Optional[int]:
        try:
            with open("/proc/self/io", encoding="ascii") as handle:
                return next(int(x.split()[1]) for x in handle if x.startswith("rchar:"))
        except (OSError, StopIteration, ValueError):
            return None

    before = rchar()
    classify_files([str(path)])
    after = rchar()
    return after - before if before is not None and after is not None else None


def main(argv: Optional[List[str]] = None) -> int:
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=None, help="timed runs per log (default 5, --quick 2)")
    p.add_argument("--size-mb", type=int, default=None, help="size of the big log in MiB (default 1024, --quick 64)")
    args = p.parse_args(argv)
    runs = args.runs or (2 if args.quick else 5)
    big_size = (args.size_mb or (64 if args.quick else 1024)) << 20
    started = time.time()
    harness.warm_bytecode()
    work = Path(tempfile.mkdtemp(prefix="jc-bench-diagnose-"))
    env = harness.child_env()
    rows: Dict[str, Dict[str, Any]] = {}
    try:
        logs = {"1 MiB log": work / "small.log", f"{big_size >> 20} MiB log": work / "big.log"}
        sizes = {}
        for (label, path), size in zip(logs.items(), (1 << 20, big_size)):
            began = time.perf_counter()
            sizes[label] = write_log(path, size)
            print(f"wrote {label}: {sizes[label]:,} bytes in {time.perf_counter() - began:.1f}s")
        for label, path in logs.items():
            samples = [timed([*harness.JOB_CHAIN, "diagnose", str(path), "--json"], env) for _ in range(runs)]
            answer = json.loads(samples[-1][2])
            rows[label] = {"bytes": sizes[label], "wall_s": harness.summary([s[0] for s in samples]),
                           "rss_mb": max(s[1] for s in samples), "read_bytes": bytes_read(path),
                           "class": answer["class"], "signature": answer["signature"]}
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    big, small = rows[list(rows)[1]], rows[list(rows)[0]]
    harness.console().print(harness.table("diagnose", ("log", "bytes", "wall median", "peak RSS", "bytes read",
                                                         "answer"),
                                          [(k, f"{v['bytes']:,}", ms(v["wall_s"]["median"]), f"{v['rss_mb']:.1f} MB",
                                            f"{v['read_bytes']:,}" if v["read_bytes"] is not None else "?",
                                            f"{v['class']} ({v['signature']})") for k, v in rows.items()]))
    right = big["class"] == "infra" and big["signature"] == "nccl-watchdog-timeout"
    figures = [
        Figure(f"wall time on the {list(rows)[1]}, median of {runs}", f"≤ {TARGET_WALL_S * 1000:.0f} ms",
               f"{ms(big['wall_s']['median'])} (1 MiB log: {ms(small['wall_s']['median'])})",
               big["wall_s"]["median"] <= TARGET_WALL_S, big["wall_s"]["median"]),
        Figure("bytes read by the classification (big log)", f"≤ {TARGET_READ:,}",
               f"{big['read_bytes']:,}" if big["read_bytes"] is not None else "not measurable here",
               None if big["read_bytes"] is None else big["read_bytes"] <= TARGET_READ, big["read_bytes"]),
        Figure("peak RSS of job-chain diagnose (big log)", f"≤ {TARGET_RSS_MB:.0f} MB", f"{big['rss_mb']:.1f} MB",
               big["rss_mb"] <= TARGET_RSS_MB, big["rss_mb"]),
        Figure("answer on the big log", "infra (nccl-watchdog-timeout)", f"{big['class']} ({big['signature']})",
               right),
    ]
    harness.report("diagnose", args, figures, {"logs": rows}, started, {"runs": runs, "big_bytes": big_size})
    return 0


if __name__ == "__main__":
    harness.main_wrapper(main)
