"""Real resource samples of running pods (psutil), and the metrics API's answers.

Every ``interval`` seconds the sampler walks each live pod's process tree and stores CPU %,
memory %, CPU seconds, resident bytes and disk read/write rates. It also records each pod's
log size, the time→offset index that the logs API's ``startTime`` uses (its resolution is the
sampling interval). GPU, RDMA, PCIe and NVLink types answer empty series with a message: this
machine has no such device as far as the local server knows, and numbers are never invented.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from job_chain.local.errors import BadRequest
from job_chain.local.store import METRIC_COLUMNS, Store

log = logging.getLogger("job_chain.local")

DEVICE_METRICS = frozenset({
    "GpuUsage", "GpuMemoryUsage", "GpuTemperature", "GpuPowerUsage", "GpuPipeTensorUsage",
    "RDMASendDataRate", "RDMARecvDataRate", "RDMAHealth", "RDMASendErrorRate",
    "RDMARecvErrorRate", "RDMASendPacketsRate", "RDMARecvPacketsRate",
    "PCIESendDataRate", "PCIERecvDataRate", "NVLinkSendDataRate", "NVLinkRecvDataRate",
})


class _Previous:
    __slots__ = ("ts", "cpu_time", "read", "write")

    def __init__(self, ts: float, cpu_time: float, read: float, write: float) -> None:
        self.ts, self.cpu_time, self.read, self.write = ts, cpu_time, read, write


class Sampler:
    """A daemon thread sampling the executor's live pods every ``interval`` seconds."""

    def __init__(self, store: Store, executor: Any, interval: float = 5.0) -> None:
        self.store = store
        self.executor = executor
        self.interval = max(0.05, interval)
        self._stop = threading.Event()
        self._previous: Dict[Tuple[str, str], _Previous] = {}
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sample_once()
            except Exception:
                log.exception("metrics sampling failed")

    def sample_once(self) -> None:
        import psutil

        rows: List[Tuple[Any, ...]] = []
        offsets: List[Tuple[Any, ...]] = []
        now = time.time()
        live = self.executor.live_pods()
        seen = set()
        for pod in live:
            key = (pod.job_id, pod.name)
            seen.add(key)
            try:
                offsets.append((pod.job_id, pod.name, now, os.path.getsize(pod.log_path)))
            except OSError:
                pass
            try:
                root = psutil.Process(pod.pid)
                procs = [root] + root.children(recursive=True)
            except psutil.Error:
                continue
            cpu_time = mem_bytes = mem_pct = read = write = 0.0
            for proc in procs:
                try:
                    with proc.oneshot():
                        times = proc.cpu_times()
                        cpu_time += times.user + times.system
                        mem_bytes += proc.memory_info().rss
                        mem_pct += proc.memory_percent()
                        try:
                            io = proc.io_counters()
                            read += io.read_bytes
                            write += io.write_bytes
                        except (psutil.Error, AttributeError):
                            pass
                except psutil.Error:
                    continue
            prev = self._previous.get(key)
            self._previous[key] = _Previous(now, cpu_time, read, write)
            if prev is None or now <= prev.ts:
                continue  # rates need two samples
            span = now - prev.ts
            cpu_pct = max(0.0, cpu_time - prev.cpu_time) / span * 100.0
            rows.append((pod.job_id, pod.name, now, round(cpu_pct, 2), round(mem_pct, 3),
                         round(cpu_time, 3), mem_bytes, max(0.0, read - prev.read) / span,
                         max(0.0, write - prev.write) / span))
        for key in list(self._previous):
            if key not in seen:
                del self._previous[key]
        if rows or offsets:
            self.store.add_samples(rows, offsets)


def _downsample(points: List[Tuple[float, float]], step: Optional[int]) -> List[Tuple[float, float]]:
    """Average the samples in each ``step``-second bucket (no step: raw samples)."""
    if not step or step <= 0:
        return points
    buckets: Dict[int, List[float]] = {}
    for ts, value in points:
        buckets.setdefault(int(ts // step) * step, []).append(value)
    return [(float(t), sum(v) / len(v)) for t, v in sorted(buckets.items())]


def job_metrics(store: Store, job_id: str, pods: List[str], metric: str, start: Optional[float],
                end: Optional[float], step: Optional[int]) -> Dict[str, Any]:
    """The ``result`` of GET .../metrics for one job."""
    if metric in DEVICE_METRICS:
        return {
            "jobId": job_id,
            "podMetrics": [{"podName": p, "metrics": []} for p in pods],
            "message": f"{metric}: this machine has no such device (local server); no samples",
        }
    if metric not in METRIC_COLUMNS:
        known = ", ".join(sorted(set(METRIC_COLUMNS) | DEVICE_METRICS))
        raise BadRequest(f"metricType {metric!r} is not supported; use one of: {known}")
    result = []
    for pod in pods:
        points = _downsample(store.samples(job_id, pod, metric, start, end), step)
        result.append({"podName": pod,
                       "metrics": [{"time": int(t), "value": v} for t, v in points]})
    return {"jobId": job_id, "podMetrics": result}
