"""A step's log (its tail, live, and the whole of it as a download) and the chart data:
training curves parsed from the log, and the job's monitoring series."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse

from job_chain.aihc.timefmt import parse_time
from job_chain.errors import JobChainError
from job_chain.ui import views
from job_chain.ui.curves import parse_curves
from job_chain.ui.pages import NotFoundError, Pages, say
from job_chain.util.redaction import redact

LOG_LINES = 500  # lines of a log shown at first; more on request, up to MAX_LOG_LINES
MAX_LOG_LINES = 20000
CURVE_LINES = 20000  # log lines parsed for training curves (the newest; re-read every 10 s while running)
METRIC_POINTS = 600  # points per pod and metric asked of the metrics API (its timeStep)
METRICS = ("CpuUsage", "MemoryUsage", "GpuUsage", "GpuMemoryUsage")


def register(app: FastAPI, pages: Pages) -> None:
    @app.get("/fragment/log/{cid}/{run_id}/{step_key}", response_class=HTMLResponse)
    def log_fragment(request: Request, cid: str, run_id: str, step_key: str, attempt: Optional[int] = None,
                     pod: Optional[str] = None, lines: int = LOG_LINES) -> HTMLResponse:
        found, run, step, chosen = pages.located(cid, run_id, step_key, attempt)
        session = pages.session(found)
        lines = max(1, min(lines, MAX_LOG_LINES))
        text, error = "", ""
        if chosen is None:
            error = "not submitted yet"
        else:
            try:
                if pod is None:  # the pod the cause names, else the master
                    pod = chosen.log_pod(session.pods(run, chosen.job_id))
                if pod is None:
                    error = f"job {chosen.job_id} has no pod yet"
                else:
                    text = "".join(session.pod_log(run, chosen.job_id, pod, max_lines=lines))
                    text = "".join(text.splitlines(True)[-lines:])
            except JobChainError as exc:
                error = say(exc)
        text = redact(text, pages.secrets_of(found, run))
        live = step.active and chosen is not None and chosen.attempt == step.attempt
        return pages.page("_log.html", entry=found, run=run, step=step, chosen=chosen, pod=pod, text=text,
                          error=error, lines=lines, live=live, shown=text.count("\n"),
                          more=min(lines * 10, MAX_LOG_LINES))

    @app.get("/download/log/{cid}/{run_id}/{step_key}")
    def download_log(cid: str, run_id: str, step_key: str, attempt: Optional[int] = None,
                     pod: Optional[str] = None) -> Response:
        found, run, step, chosen = pages.located(cid, run_id, step_key, attempt)
        session = pages.session(found)
        if chosen is None:
            raise NotFoundError(f"step {step_key} of run {run_id} has not been submitted")
        try:
            if not pod:
                pod = chosen.log_pod(session.pods(run, chosen.job_id))
            if pod is None:
                raise NotFoundError(f"job {chosen.job_id} has no pod yet")
            # page by page (nextMarker), records of 2000 lines: never the whole log in memory
            stream = views.log_download(session.pod_log(run, chosen.job_id, pod, chunk=2000),
                                        pages.secrets_of(found, run))
        except JobChainError as exc:
            raise NotFoundError(say(exc)) from None

        name = f"{run.run_id}-{step.name}-attempt{chosen.attempt}-{pod}.log"
        return StreamingResponse(stream, media_type="text/plain; charset=utf-8",
                                 headers={"Content-Disposition": f'attachment; filename="{name}"'})

    @app.get("/api/curves/{cid}/{run_id}/{step_key}")
    def curves(cid: str, run_id: str, step_key: str, attempt: Optional[int] = None) -> JSONResponse:
        found, run, step, chosen = pages.located(cid, run_id, step_key, attempt)
        session = pages.session(found)
        chain_step = session.frozen(run).named(step.name)
        if chosen is None:
            return JSONResponse({"curves": {}, "live": False})
        try:
            names = session.pods(run, chosen.job_id)
            text = "".join(session.pod_log(run, chosen.job_id, names[0], max_lines=CURVE_LINES)) if names else ""
        except JobChainError as exc:
            return JSONResponse({"curves": {}, "error": say(exc), "live": step.active})
        curves, problem = parse_curves(text.splitlines(), chain_step.metrics if chain_step else None)
        answer: Dict[str, Any] = {"curves": curves, "live": step.active}
        if problem:
            answer["error"] = problem
        return JSONResponse(answer)

    @app.get("/api/metrics/{cid}/{job_id}")
    def metrics(cid: str, job_id: str, run: Optional[str] = None) -> JSONResponse:
        found = pages.entry(cid)
        session = pages.session(found)
        client = session.client_for(pages.run_of(found, run)) if run else pages.pool_client(found)
        pool = session.frozen(run).pool
        try:
            job = client.get_job(pool, job_id)
        except JobChainError as exc:
            return JSONResponse({"metrics": {}, "error": say(exc)})
        start = parse_time(job.get("createdAt"))
        end = parse_time(job.get("finishedAt"))
        start_ts = int(start.timestamp()) - 60 if start else int(time.time()) - 3600
        end_ts = int(end.timestamp()) + 60 if end else int(time.time())
        out: Dict[str, Dict[str, Dict[str, List[float]]]] = {}
        # not a JobsAPI call: AIHC's clients have it (v1 and v2), another engine's client has no charts
        job_metrics: Optional[Callable[..., Dict[str, Any]]] = getattr(client, "job_metrics", None)
        if job_metrics is None:
            return JSONResponse({"metrics": out, "live": not end})
        for metric in METRICS:
            try:
                answer = job_metrics(pool, job_id, metric, start_time=start_ts, end_time=end_ts,
                                     time_step=max(1, (end_ts - start_ts) // METRIC_POINTS))
            except JobChainError:
                continue
            series: Dict[str, Dict[str, List[float]]] = {}
            for pod in answer.get("podMetrics") or []:
                points = [(p.get("time", p.get("timestamp")), p.get("value")) for p in pod.get("metrics") or []]
                points = [(float(t), float(v)) for t, v in points if isinstance(t, (int, float))
                          and isinstance(v, (int, float))]
                if points:
                    series[str(pod.get("podName"))] = {"x": [t for t, _ in points], "y": [v for _, v in points]}
            if series:
                out[metric] = series
        return JSONResponse({"metrics": out, "live": not end})
