"""Hop overhead: how long a self-advancing chain takes from one step's end to the next step running.

An N-step chain of ``true`` is started with ``job-chain run FILE``; every later step is submitted
from inside the previous job (``python3 -m job_chain.hop``). Per hop we take the time from step N's
user script ending (a marker it logs) to step N+1's pod running (pods.started_at in state.db),
and compare it with the physical floor measured in the same run: python start + ``import
job_chain`` client + one signed request.
"""

from __future__ import annotations

import time
from typing import List, Optional

import harness
from harness import Figure, ms

TARGET_S = 0.25
TARGET_RATIO = 2.0
PARTS = {
    "hop_s": "step N script end → step N+1 pod running (the figure)",
    "advance_s": "… of which: script end → next job created (the advance)",
    "schedule_s": "… of which: created → pod running (server)",
    "pod_exit_to_next_s": "step N pod exit → N+1 running (< 0: the pod exits after its advance)",
    "cycle_s": "step N pod start → step N+1 pod start",
}


def main(argv: Optional[List[str]] = None) -> int:
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=None, help="chain length (default 100, --quick 12)")
    p.add_argument("--floor-runs", type=int, default=None, help="floor probes (default 20, --quick 8)")
    args = p.parse_args(argv)
    steps = args.steps or (12 if args.quick else 100)
    floor_runs = args.floor_runs or (8 if args.quick else 20)
    started = time.time()

    with harness.BenchServer(keep=args.keep) as server:
        floor_before = harness.measure_floor(server, max(floor_runs // 2, 3))
        t0 = time.monotonic()
        run_id = harness.run_chain(server, steps)
        chain_wall = time.monotonic() - t0
        floor_after = harness.measure_floor(server, floor_runs - max(floor_runs // 2, 3) or 1)
        per_hop = harness.hops(server, run_id)

    floor_samples = floor_before["samples_s"] + floor_after["samples_s"]
    floor = harness.summary(floor_samples)
    parts = {key: harness.summary([h[key] for h in per_hop]) for key in PARTS}
    hop = parts["hop_s"]
    ratio = hop["median"] / floor["median"]
    figures = [
        Figure("hop overhead, median", f"≤ {TARGET_S * 1000:.0f} ms", ms(hop["median"]),
               hop["median"] <= TARGET_S, hop["median"]),
        Figure("hop overhead, p95", "(reported)", ms(hop["p95"]), None, hop["p95"]),
        Figure("floor: python + import client + 1 signed request, median", "(reported)",
               ms(floor["median"]), None, floor["median"]),
        Figure("hop median / floor median", f"≤ {TARGET_RATIO:.0f}×", f"{ratio:.2f}×", ratio <= TARGET_RATIO, ratio),
    ]
    harness.console().print(harness.table(
        f"hop parts over {len(per_hop)} hops", ("part", "what", "median", "p95", "min", "max"),
        [(name, PARTS[name], ms(s["median"]), ms(s["p95"]), ms(s["min"]), ms(s["max"]))
         for name, s in parts.items()]))
    harness.report("hop", args, figures, {
        "hop": parts, "floor": floor, "floor_probe_spawn_to_exit_s": floor_before["spawn_to_exit_s"],
        "chain_wall_s": chain_wall, "hops": per_hop, "floor_samples_s": floor_samples,
        "definition": "hop = step N+1 pod started_at - step N user-script end (marker logged by the script)",
    }, started, {"steps": steps, "floor_runs": len(floor_samples)})
    return 0


if __name__ == "__main__":
    harness.main_wrapper(main)
