"""Scale: does a long chain stay as fast at its end as at its start, and is the tail constant?

1. A 500-step chain of ``true`` (self-advancing): hop overhead of the last 50 hops vs the first 50,
   plotted per hop index (results/scale_hops.png).
2. Bytes job-chain adds around the user's script (``command.tail_size``) for chains of 3, 10, 100,
   1000 steps, built by ``submit.build_request`` exactly as submitted: constant in the default
   mode; ``--inline`` embeds the remaining steps, so it grows (reported, and plotted).
3. What grows instead: every advance loads the whole chain file, so its parse time vs length.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import harness
from harness import Figure, ms

TARGET_DRIFT = 0.20
TARGET_STATUS = 0.3  # seconds: `job-chain status` on a finished 500-step run (run-library issue)
RUN_ID = "20260101-000000-abcd"  # the shape new_run_id() gives, fixed so sizes are reproducible
CLUSTER_PATH = "/root/pfs/dev-test/job-chain/chain_info.json"
IMAGE = "registry.baidubce.com/aihc-aiak/aiak-megatron:ubuntu20.04-cu11.8-torch1.14.0-py38_v1.2.7.12_release"


def realistic_chain_data(steps: int) -> Dict[str, Any]:
    """A chain shaped like examples/job_info: real image names, envs, a PFS mount, a short script."""
    jobs = []
    for i in range(steps):
        script = (f"#!/bin/bash\nset -euo pipefail\ncd /root/pfs/dev-test/llama2-7b\n"
                  f"python train.py --stage {i} --config configs/stage-{i}.yaml --save /root/pfs/ckpt/stage-{i}\n")
        jobs.append({"name": f"llama2-7b-stage-{i}", "queue": "default", "priority": "normal",
                     "jobFramework": "PyTorchJob",
                     "jobSpec": {"command": script, "image": IMAGE, "replicas": 1,
                                 "envs": [{"name": "CUDA_DEVICE_MAX_CONNECTIONS", "value": "1"}]},
                     "datasources": [{"type": "pfs", "name": "pfs-oYQuh4", "mountPath": "/root/pfs"}]})
    return {"resourcePoolId": "cce-e0isdmib", "api_config": {"host": "aihc.bj.baidubce.com"}, "jobs": jobs}


def command_sizes(lengths: List[int]) -> List[Dict[str, Any]]:
    """Tail bytes (and whole request bytes) at the first and last step, both modes, per length."""
    from job_chain.spec.loader import check_chain_data
    from job_chain.submit.command import tail_size
    from job_chain.submit.request import build_request

    rows = []
    for length in lengths:
        chain = check_chain_data(realistic_chain_data(length), CLUSTER_PATH, local=True)
        row: Dict[str, Any] = {"steps": length}
        for mode in ("job", "inline"):
            for where, index in (("first", 0), ("last", length - 1)):
                body = build_request(chain, chain.steps[index].name, RUN_ID, 1, mode=mode,
                                     host=chain.api_config.get("host"))
                row[f"{mode}_{where}_tail"] = tail_size(body["jobSpec"]["command"], chain.steps[index].script)
                row[f"{mode}_{where}_request"] = len(json.dumps(body).encode("utf-8"))
        rows.append(row)
    return rows


def load_times(lengths: List[int], repeats: int) -> List[Dict[str, Any]]:
    """Median time of ``load_chain`` (what each advance does first) per chain length."""
    from job_chain.spec.loader import load_chain

    out = []
    with tempfile.TemporaryDirectory(prefix="job-chain-bench-load-") as tmp:
        for length in lengths:
            path = Path(tmp) / f"chain-{length}.json"
            path.write_text(json.dumps(realistic_chain_data(length), indent=2))
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                load_chain(str(path), local=True)
                times.append(time.perf_counter() - start)
            out.append({"steps": length, "file_bytes": path.stat().st_size, "load_s": harness.percentile(times, 50)})
    return out


def rolling_median(values: List[float], window: int) -> List[float]:
    return [harness.percentile(values[max(0, i - window + 1):i + 1], 50) for i in range(len(values))]


def plot(per_hop: List[Dict[str, float]], window: int, sizes: List[Dict[str, Any]], results: Path) -> List[str]:
    """scale_hops.png (hop per index) and scale_command_bytes.png (tail bytes vs length)."""
    import matplotlib

    results.mkdir(parents=True, exist_ok=True)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    index = [h["hop"] for h in per_hop]
    hop_ms = [h["hop_s"] * 1000 for h in per_hop]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.scatter(index, hop_ms, s=6, alpha=0.5, label="hop (script end → next pod running)")
    ax.plot(index, rolling_median(hop_ms, window), color="C1", label=f"rolling median ({window} hops)")
    ax.axhline(250, color="C3", linestyle="--", linewidth=1, label="target 250 ms")
    ax.axvspan(index[0], index[min(window, len(index)) - 1], color="C2", alpha=0.08, label=f"first/last {window}")
    ax.axvspan(index[-min(window, len(index))], index[-1], color="C2", alpha=0.08)
    ax.set_xlabel("hop index (step N → N+1)")
    ax.set_ylabel("ms")
    ax.set_ylim(bottom=0)
    ax.set_title(f"job-chain hop overhead along a {len(per_hop) + 1}-step chain (local server)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    hops_png = results / "scale_hops.png"
    fig.savefig(hops_png, dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    steps = [r["steps"] for r in sizes]
    ax.loglog(steps, [r["job_first_tail"] for r in sizes], "o-", label="default (job) mode, step 0")
    ax.loglog(steps, [r["inline_first_tail"] for r in sizes], "s-", label="--inline, step 0")
    ax.set_xlabel("chain length (steps)")
    ax.set_ylabel("bytes added around the script")
    ax.set_title("rewritten command size vs chain length")
    ax.legend(fontsize=8)
    fig.tight_layout()
    bytes_png = results / "scale_command_bytes.png"
    fig.savefig(bytes_png, dpi=120)
    plt.close(fig)
    return [str(hops_png), str(bytes_png)]


def main(argv: Optional[List[str]] = None) -> int:
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=None, help="long chain length (default 500, --quick 40)")
    p.add_argument("--window", type=int, default=None, help="hops compared at each end (default 50, --quick 10)")
    p.add_argument("--lengths", default="3,10,100,1000", help="chain lengths for the command sizes")
    args = p.parse_args(argv)
    steps = args.steps or (40 if args.quick else 500)
    window = args.window or (10 if args.quick else 50)
    lengths = [int(x) for x in args.lengths.split(",")]
    if steps < 2 * window + 1:
        p.error(f"--steps {steps} is too short for two windows of {window} hops")
    started = time.time()

    sizes = command_sizes(lengths)
    loads = load_times(lengths, repeats=3 if args.quick else 7)
    with harness.BenchServer(keep=args.keep) as server:
        t0 = time.monotonic()
        run_id = harness.run_chain(server, steps)
        chain_wall = time.monotonic() - t0
        per_hop = harness.hops(server, run_id)
        # the first status caches the finished attempts in the run record; later ones walk the job
        # list only down to the newest job they know (one short page), whatever the run's length
        chain_file = server.work / "chain" / "chain_info.json"
        for cache in chain_file.parent.glob("chain_info.json.runs/*/attempts.json"):
            cache.unlink()  # the first look at a run nobody followed walks every job once
        status_cold = harness.timed_runs([*harness.JOB_CHAIN, "status", str(chain_file)], 1, warmup=0,
                                         env=server.cli_env())[0]
        frozen = [f.stat().st_size for f in chain_file.parent.glob("chain_info.json.runs/*/revision-*.json")]
        status_s = harness.summary(harness.timed_runs(
            [*harness.JOB_CHAIN, "status", str(server.work / "chain" / "chain_info.json")], 7,
            env=server.cli_env()))

    hop_values = [h["hop_s"] for h in per_hop]
    first, last = harness.summary(hop_values[:window]), harness.summary(hop_values[-window:])
    drift = last["median"] / first["median"] - 1
    job_tails = sorted({r["job_first_tail"] for r in sizes})
    last_tails = [r["job_last_tail"] for r in sizes]
    figures = [
        Figure(f"hop median, first {window} hops", "(reported)", ms(first["median"]), None, first["median"]),
        Figure(f"hop median, last {window} hops", f"≤ first × {1 + TARGET_DRIFT:.1f}",
               f"{ms(last['median'])} ({drift:+.0%})", drift <= TARGET_DRIFT, last["median"]),
        Figure(f"tail bytes at step 0, chains of {args.lengths} steps", "constant",
               " / ".join(str(r["job_first_tail"]) for r in sizes), len(job_tails) == 1, float(job_tails[-1])),
        Figure("tail bytes at the last step (index digits only)", "(reported)",
               " / ".join(str(t) for t in last_tails), None, float(max(last_tails))),
        Figure(f"job-chain status on the finished {steps}-step run, median of 7", f"≤ {ms(TARGET_STATUS)}",
               ms(status_s["median"]), status_s["median"] <= TARGET_STATUS, status_s["median"]),
        Figure("job-chain status on it, first look (no cached attempts)", "(reported)", ms(status_cold), None,
               status_cold),
        Figure(f"frozen copy of the {steps}-step run (revision-1.json, scripts included)", "(reported)",
               f"{sum(frozen):,} B ({sum(frozen) / steps:.0f} B a step)", None, float(sum(frozen))),
        Figure("--inline tail bytes at step 0", "(reported: grows)",
               " / ".join(str(r["inline_first_tail"]) for r in sizes), None, float(sizes[-1]["inline_first_tail"])),
    ]
    harness.console().print(harness.table(
        "rewritten command vs chain length (bytes added around the script; whole request body)",
        ("steps", "job: step 0", "job: last", "job request", "inline: step 0", "inline: last", "inline request",
         "load_chain"),
        [(r["steps"], r["job_first_tail"], r["job_last_tail"], r["job_first_request"], r["inline_first_tail"],
          r["inline_last_tail"], r["inline_first_request"], f"{load['load_s'] * 1000:.1f} ms")
         for r, load in zip(sizes, loads)]))
    pngs = plot(per_hop, window, sizes, Path(args.results_dir))
    harness.report("scale", args, figures, {
        "first_window": first, "last_window": last, "drift": drift, "all_hops": harness.summary(hop_values),
        "chain_wall_s": chain_wall, "status_s": status_s, "status_cold_s": status_cold, "frozen_bytes": sum(frozen),
        "command_sizes": sizes,
        "load_chain": loads,
        "hops": per_hop, "plots": pngs,
    }, started, {"steps": steps, "window": window, "lengths": lengths})
    for png in pngs:
        print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    harness.main_wrapper(main)
