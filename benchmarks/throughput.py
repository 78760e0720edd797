"""Server throughput: signed requests per second the local server answers at concurrency 8.

8 load generators, each with its own job_chain ``AIHCClient`` (real BCE v1 signatures, one TCP
connection per request as the SDK does), alternate ``get_job`` and ``list_jobs`` against a
server holding a few finished jobs. Processes by default: signing in Python holds the GIL, so 8
threads in one process would measure the client, not the server. CPU seconds per request of
the server and of the clients are reported too: on a 2-core machine both share the cores, and
``1 / server CPU per request`` is what the server could answer with one core to itself.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from typing import Any, Dict, List, Optional

import harness
from harness import Figure, ms

TARGET_RPS = 300.0


def worker(creds: Dict[str, str], pool: str, job_ids: List[str], ops: List[str], start_at: float,
           end_at: float, seed: int) -> Dict[str, Any]:
    """One load generator: requests back to back from ``start_at`` to ``end_at``; latencies per op."""
    from job_chain.aihc.client import AIHCClient
    from job_chain.aihc.credentials import Credentials
    from job_chain.aihc.errors import AIHCError

    client = AIHCClient(Credentials(creds["host"], creds["ak"], creds["sk"]), max_retries=0)
    calls = {
        "get": lambda i: client.get_job(pool, job_ids[i % len(job_ids)]),
        "list": lambda i: client.list_jobs(pool, page_size=10),
    }
    for i in range(3):  # warm: imports, first connection
        calls[ops[i % len(ops)]](i)
    latencies: Dict[str, List[float]] = {op: [] for op in ops}
    errors: List[str] = []
    while time.time() < start_at:
        time.sleep(0.001)
    cpu0 = time.thread_time() if threading.current_thread() is not threading.main_thread() else time.process_time()
    i = seed
    while True:
        now = time.perf_counter()
        if time.time() >= end_at:
            break
        op = ops[i % len(ops)]
        try:
            calls[op](i)
            latencies[op].append(time.perf_counter() - now)
        except AIHCError as exc:
            errors.append(str(exc)[:200])
        i += 1
    cpu = (time.thread_time() if threading.current_thread() is not threading.main_thread()
           else time.process_time()) - cpu0
    return {"latencies": latencies, "errors": errors, "cpu_s": cpu}


def _process_entry(queue: Any, *args: Any) -> None:
    try:
        queue.put(worker(*args))
    except BaseException as exc:  # report, never hang the parent
        queue.put({"error": f"{type(exc).__name__}: {exc}"})


def run_load(kind: str, concurrency: int, args: tuple, timeout: float) -> List[Dict[str, Any]]:
    """Run ``concurrency`` workers as processes (spawned) or threads; their results."""
    if kind == "thread":
        results: List[Dict[str, Any]] = []
        lock = threading.Lock()

        def run(seed: int) -> None:
            out = worker(*args, seed)
            with lock:
                results.append(out)

        threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout)
        return results
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_process_entry, args=(queue, *args, k), daemon=True) for k in range(concurrency)]
    for proc in procs:
        proc.start()
    try:
        out = [queue.get(timeout=timeout) for _ in procs]
    finally:
        for proc in procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
    failed = [r["error"] for r in out if "error" in r]
    if failed:
        raise RuntimeError(f"load generator failed: {failed[0]}")
    return out


def main(argv: Optional[List[str]] = None) -> int:
    import psutil

    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--concurrency", type=int, default=8, help="load generators (default 8)")
    p.add_argument("--duration", type=float, default=None, help="seconds of load (default 15, --quick 3)")
    p.add_argument("--kind", choices=("process", "thread"), default="process", help="load generators are ...")
    p.add_argument("--ops", default="get,list", help="operations to alternate: get, list")
    p.add_argument("--jobs", type=int, default=20, help="finished jobs the server holds (default 20)")
    args = p.parse_args(argv)
    duration = args.duration or (3.0 if args.quick else 15.0)
    ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    started = time.time()

    with harness.BenchServer(keep=args.keep) as server:
        client = server.client()
        job_ids = [client.create_job(server.pool, {"name": f"load-{i}", "jobSpec": {
            "image": "local", "command": "true", "replicas": 1}})["jobId"] for i in range(args.jobs)]
        server.wait_done(args.jobs)
        warmup = 4.0 if args.kind == "process" else 1.0  # spawned interpreters need time to import
        start_at = time.time() + warmup
        end_at = start_at + duration
        server_proc = psutil.Process(server.proc.pid)
        cpu_before: Optional[float] = None

        def sample_cpu() -> None:  # the server's CPU exactly over the load window
            nonlocal cpu_before
            time.sleep(max(0.0, start_at - time.time()))
            cpu_before = sum(server_proc.cpu_times()[:2])

        sampler = threading.Thread(target=sample_cpu, daemon=True)
        sampler.start()
        results = run_load(args.kind, args.concurrency,
                           (server.creds(), server.pool, job_ids, ops, start_at, end_at),
                           timeout=warmup + duration + 60)
        sampler.join()
        server_cpu = sum(server_proc.cpu_times()[:2]) - (cpu_before or 0.0)
        load_after = os.getloadavg()

    per_op = {op: [x for r in results for x in r["latencies"][op]] for op in ops}
    latencies = [x for values in per_op.values() for x in values]
    errors = [e for r in results for e in r["errors"]]
    count = len(latencies)
    rps = count / duration
    lat = harness.summary(latencies)
    client_cpu = sum(r["cpu_s"] for r in results)
    server_cpu_per_req = server_cpu / count if count else float("nan")
    figures = [
        Figure(f"signed requests/s at concurrency {args.concurrency} ({args.kind}es)".replace("threades", "threads"),
               f"≥ {TARGET_RPS:.0f}/s", f"{rps:.0f}/s", rps >= TARGET_RPS, rps),
        Figure("latency p50 / p99", "(reported)", f"{ms(lat['median'])} / {ms(lat['p99'])}", None, lat["median"]),
        Figure("errors", "0", str(len(errors)), not errors, float(len(errors))),
        Figure("server CPU per request (→ capacity on one free core)", "(reported)",
               f"{server_cpu_per_req * 1000:.2f} ms (→ {1 / server_cpu_per_req:.0f}/s)", None, server_cpu_per_req),
        Figure("client CPU per request (load generator, incl. signing)", "(reported)",
               f"{client_cpu / count * 1000:.2f} ms", None, client_cpu / count),
    ]
    harness.console().print(harness.table(
        "latency per operation", ("op", "requests", "p50", "p99", "max"),
        [(op, len(v), ms(harness.percentile(v, 50)), ms(harness.percentile(v, 99)), ms(max(v) if v else None))
         for op, v in per_op.items()]))
    harness.report("throughput", args, figures, {
        "requests": count, "rps": rps, "latency_s": lat,
        "per_op_latency_s": {op: harness.summary(v) for op, v in per_op.items()},
        "errors": errors[:20], "error_count": len(errors), "server_cpu_s": server_cpu,
        "server_cpu_per_request_s": server_cpu_per_req, "client_cpu_s": client_cpu,
        "loadavg_after": list(load_after),
    }, started, {"concurrency": args.concurrency, "duration_s": duration, "kind": args.kind, "ops": ops,
                 "jobs": args.jobs})
    return 0


if __name__ == "__main__":
    harness.main_wrapper(main)
