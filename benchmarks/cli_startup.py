"""CLI start-up: wall time of ``job-chain --help`` and ``job-chain status FILE``.

Both are what a user types most; ``status`` also does real work (load the chain, one signed
list request against a local server, a rich table). Timed through the venv's console script
``job-chain`` (as a user runs it), falling back to ``python -m job_chain`` when it is missing;
``python -c pass`` is timed alongside as the interpreter's own floor on this machine.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import harness
import importtime
from harness import Figure, ms

TARGET_S = 0.25


def entry_point() -> List[str]:
    """The venv's console script if present, else ``python -m job_chain``."""
    script = Path(sys.executable).parent / "job-chain"
    return [str(script)] if script.exists() else [*harness.JOB_CHAIN]


def top_imports(command: List[str], env: Dict[str, str], count: int = 8) -> List[Dict[str, object]]:
    """The slowest top-level imports of ``command`` (python -X importtime), for a failing figure."""
    found = importtime.measure(["-m", "job_chain", *command], env=env, timeout=60, check=False)
    return [{"module": i.module, "cumulative_ms": i.cumulative_us / 1000} for i in importtime.top(found, count)]


def main(argv: Optional[List[str]] = None) -> int:
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=None, help="timed runs per command (default 10, --quick 5)")
    args = p.parse_args(argv)
    runs = args.runs or (5 if args.quick else 10)
    started = time.time()
    entry = entry_point()

    with harness.BenchServer(keep=args.keep) as server:
        chain = harness.write_chain(server.work / "chain", 3)
        server.cli("run", str(chain))
        server.wait_done(3)
        env = server.cli_env()
        timings = {
            "python -c pass": harness.timed_runs([sys.executable, "-c", "pass"], runs, env=env),
            "job-chain --help": harness.timed_runs([*entry, "--help"], runs, env=env),
            "job-chain status FILE": harness.timed_runs([*entry, "status", str(chain)], runs, env=env),
        }
        stats = {name: harness.summary(values) for name, values in timings.items()}
        slow = {name: top_imports(cmd, env) for name, cmd in (("job-chain --help", ["--help"]),
                                                                ("job-chain status FILE", ["status", str(chain)]))
                if stats[name]["median"] > TARGET_S}

    figures = [Figure(f"{name}, median of {runs}", "(reported: interpreter floor)" if name.startswith("python")
                      else f"≤ {TARGET_S * 1000:.0f} ms",
                      f"{ms(s['median'])} (p95 {ms(s['p95'])})",
                      None if name.startswith("python") else s["median"] <= TARGET_S, s["median"])
               for name, s in stats.items()]
    for name, rows in slow.items():
        harness.console().print(harness.table(f"slowest imports of {name}", ("module", "cumulative"),
                                              [(r["module"], f"{r['cumulative_ms']:.0f} ms") for r in rows]))
    harness.report("cli_startup", args, figures, {
        "entry_point": " ".join(entry), "stats_s": stats, "samples_s": timings, "slow_imports": slow,
    }, started, {"runs": runs, "entry_point": " ".join(entry)})
    return 0


if __name__ == "__main__":
    harness.main_wrapper(main)
