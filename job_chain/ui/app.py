"""The console's HTTP side: pages, live fragments (htmx polls them), actions and chart data.

Facts come from :class:`ChainSession` (runs, status, plan, stop, resume, start) and from the
run's AIHC client (pods, logs, events, metrics). Handlers are plain ``def`` so the blocking API
calls run in FastAPI's thread pool.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import jinja2
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from job_chain.aihc.client import pod_names
from job_chain.aihc.timefmt import parse_time
from job_chain.chain.model import LABEL_RUN, LABEL_STEP
from job_chain.chain.progress import RunStatus, StepStatus, counts_text, job_labels
from job_chain.errors import JobChainError
from job_chain.session import ChainSession, Run
from job_chain.ui import dag, views
from job_chain.ui.catalog import Catalog, Entry
from job_chain.ui.curves import parse_curves, patterns_for
from job_chain.ui.security import Guard

HERE = os.path.dirname(os.path.abspath(__file__))
OUTCOMES = ("running", "succeeded", "failed", "stopped")
RUNS_PER_CHAIN = 50  # newest runs of each chain on the runs page
LOG_LINES = 500  # lines of a log shown at first; more on request, up to MAX_LOG_LINES
MAX_LOG_LINES = 20000
CURVE_LINES = 20000  # log lines parsed for training curves (the newest; re-read every 10 s while running)
METRIC_POINTS = 600  # points per pod and metric asked of the metrics API (its timeStep)
JOBS_PER_POOL = 200
METRICS = ("CpuUsage", "MemoryUsage", "GpuUsage", "GpuMemoryUsage")
MAX_SUBMIT = 1 << 20  # bytes of pasted chain JSON accepted
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,80}\.json$")


class NotFoundError(Exception):
    """A chain, run, step or job the URL names does not exist (a 404 page)."""


def create_app(catalog: Catalog, guard: Guard) -> FastAPI:
    """The console for ``catalog``'s chains, behind ``guard``'s token/Host/CSRF checks."""
    app = FastAPI(title="job-chain console", docs_url=None, redoc_url=None, openapi_url=None)
    app.middleware("http")(guard)
    app.mount("/static", StaticFiles(directory=os.path.join(HERE, "static")), name="static")
    # Jinja2 directly (not Starlette's wrapper, whose signature changed across versions); autoescaped
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(HERE, "templates")),
                             autoescape=jinja2.select_autoescape(["html"]), auto_reload=False)
    env.filters.update(tone=views.tone, duration=views.duration, when=views.when, counts=counts_text)
    env.globals.update(csrf=guard.csrf, outcomes=OUTCOMES)

    def page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(template).render(context), status_code=status_code)

    @app.exception_handler(NotFoundError)
    async def not_found(request: Request, exc: NotFoundError) -> HTMLResponse:
        return page(request, "error.html", 404, message=str(exc), title="Not found")

    @app.exception_handler(JobChainError)
    async def failed(request: Request, exc: JobChainError) -> HTMLResponse:
        """An expected failure (the API unreachable, credentials missing): its one line, not a traceback."""
        return page(request, "error.html", 502, message=str(exc), title="Cannot answer")

    # -- lookups ---------------------------------------------------------------------------------
    def entry(cid: str) -> Entry:
        found = catalog.get(cid)
        if found is None:
            raise NotFoundError(f"no chain file with id {cid} under {', '.join(catalog.paths)}")
        if found.session is None:
            raise NotFoundError(found.error)
        return found

    def run_of(found: Entry, run_id: str) -> Run:
        assert found.session is not None
        try:
            return found.session.run(run_id)
        except JobChainError as exc:
            raise NotFoundError(str(exc)) from None

    def step_of(status: RunStatus, index: int) -> StepStatus:
        for step in status.steps:
            if step.index == index:
                return step
        raise NotFoundError(f"run {status.run_id} has no step {index}")

    def pick_attempt(step: StepStatus, attempt: Optional[int]) -> Any:
        if not step.attempts:
            return None
        tries = {a.attempt: a for a in step.attempts}
        return tries.get(attempt if attempt is not None else max(tries)) or tries[max(tries)]

    def secrets_of(found: Entry) -> List[str]:
        assert found.session is not None
        return [s for s in (found.session.chain.secret,) if s]

    # -- runs page -------------------------------------------------------------------------------
    def run_rows(outcome: str) -> Tuple[List[Dict[str, Any]], List[Entry]]:
        rows: List[Dict[str, Any]] = []
        broken: List[Entry] = []
        for found in catalog.entries():
            if found.session is None:
                broken.append(found)
                continue
            for run in found.session.runs()[:RUNS_PER_CHAIN]:
                row: Dict[str, Any] = {"entry": found, "run": run, "status": None, "error": ""}
                try:
                    row["status"] = catalog.status(found, run.run_id)
                except JobChainError as exc:
                    row["error"] = str(exc).splitlines()[0]
                got = row["status"].outcome.value if row["status"] else "unknown"
                if outcome and got != outcome:
                    continue
                rows.append(row)
        rows.sort(key=lambda r: r["run"].started, reverse=True)
        return rows, broken

    def rel(path: str) -> str:
        for root in catalog.paths:
            if os.path.isdir(root) and path.startswith(root.rstrip(os.sep) + os.sep):
                return os.path.relpath(path, root)
        return path

    env.filters["rel"] = rel
    env.globals["run_duration"] = views.run_duration

    @app.get("/", response_class=HTMLResponse)
    def runs_page(request: Request, outcome: str = "") -> HTMLResponse:
        rows, broken = run_rows(outcome)
        return page(request, "runs.html", rows=rows, broken=broken, outcome=outcome, paths=catalog.paths,
                    chains=len(catalog.files()))

    @app.get("/fragment/runs", response_class=HTMLResponse)
    def runs_fragment(request: Request, outcome: str = "") -> HTMLResponse:
        rows, broken = run_rows(outcome)
        return page(request, "_runs_rows.html", rows=rows, outcome=outcome)

    # -- run page --------------------------------------------------------------------------------
    def run_context(cid: str, run_id: str) -> Dict[str, Any]:
        found = entry(cid)
        run = run_of(found, run_id)
        try:
            status = catalog.status(found, run.run_id)
        except JobChainError as exc:
            return {"entry": found, "run": run, "status": None, "error": str(exc)}
        return {"entry": found, "run": run, "status": status, "error": "", "timeline": views.timeline(status),
                "dag": dag.layout(status.steps)}

    @app.get("/run/{cid}/{run_id}", response_class=HTMLResponse)
    def run_page(request: Request, cid: str, run_id: str, step: Optional[int] = None) -> HTMLResponse:
        context = run_context(cid, run_id)
        return page(request, "run.html", selected=step, **context)

    @app.get("/fragment/run/{cid}/{run_id}", response_class=HTMLResponse)
    def run_fragment(request: Request, cid: str, run_id: str) -> HTMLResponse:
        return page(request, "_run_live.html", **run_context(cid, run_id))

    @app.get("/fragment/step/{cid}/{run_id}/{index}", response_class=HTMLResponse)
    def step_fragment(request: Request, cid: str, run_id: str, index: int,
                      attempt: Optional[int] = None) -> HTMLResponse:
        found = entry(cid)
        run = run_of(found, run_id)
        assert found.session is not None
        status = catalog.status(found, run.run_id)
        step = step_of(status, index)
        chosen = pick_attempt(step, attempt)
        try:
            # the request this run sends for the step, from its frozen chain
            plan = views.redact(found.session.request(run.run_id, index, step.attempt or None), secrets_of(found))
            request_json = json.dumps(plan, indent=2, ensure_ascii=False)
        except JobChainError as exc:
            request_json = f"(cannot build the request: {exc})"
        pods: List[str] = []
        pod_error = ""
        if chosen is not None:
            try:
                pods = pod_names(found.session.client_for(run).get_job(found.session.chain.pool, chosen.job_id))
            except JobChainError as exc:
                pod_error = str(exc)
        return page(request, "_step.html", entry=found, run=run, step=step, chosen=chosen, pods=pods,
                    pod_error=pod_error, request_json=request_json)

    @app.get("/fragment/log/{cid}/{run_id}/{index}", response_class=HTMLResponse)
    def log_fragment(request: Request, cid: str, run_id: str, index: int, attempt: Optional[int] = None,
                     pod: Optional[str] = None, lines: int = LOG_LINES) -> HTMLResponse:
        found = entry(cid)
        run = run_of(found, run_id)
        assert found.session is not None
        step = step_of(catalog.status(found, run.run_id), index)
        chosen = pick_attempt(step, attempt)
        lines = max(1, min(lines, MAX_LOG_LINES))
        text, error = "", ""
        if chosen is None:
            error = "not submitted yet"
        else:
            try:
                client = found.session.client_for(run)
                pool = found.session.chain.pool
                if pod is None:
                    names = pod_names(client.get_job(pool, chosen.job_id))
                    pod = names[0] if names else None
                if pod is None:
                    error = f"job {chosen.job_id} has no pod yet"
                else:
                    answer = client.pod_logs(pool, chosen.job_id, pod, max_lines=lines)
                    text = "".join(answer.get("logs") or [])
                    text = "".join(text.splitlines(True)[-lines:])
            except JobChainError as exc:
                error = str(exc)
        text = views.redact(text, secrets_of(found))
        live = step.active and chosen is not None and chosen.attempt == step.attempt
        return page(request, "_log.html", entry=found, run=run, step=step, chosen=chosen, pod=pod, text=text,
                    error=error, lines=lines, live=live, shown=text.count("\n"), more=min(lines * 10, MAX_LOG_LINES))

    @app.get("/download/log/{cid}/{run_id}/{index}")
    def download_log(cid: str, run_id: str, index: int, attempt: Optional[int] = None,
                     pod: Optional[str] = None) -> Response:
        found = entry(cid)
        run = run_of(found, run_id)
        assert found.session is not None
        step = step_of(catalog.status(found, run.run_id), index)
        chosen = pick_attempt(step, attempt)
        if chosen is None:
            raise NotFoundError(f"step {index} of run {run_id} has not been submitted")
        client = found.session.client_for(run)
        pool = found.session.chain.pool
        try:
            pod = pod or (pod_names(client.get_job(pool, chosen.job_id)) or [None])[0]
            if pod is None:
                raise NotFoundError(f"job {chosen.job_id} has no pod yet")
            # chunks of lines: the answer goes out piece by piece, never joined into one string
            records = client.pod_logs(pool, chosen.job_id, pod, chunk=2000).get("logs") or []
        except JobChainError as exc:
            raise NotFoundError(str(exc)) from None
        known = secrets_of(found)

        records.reverse()  # popped from the end: each piece is let go as soon as it is sent

        def stream() -> Iterator[bytes]:
            while records:
                yield views.redact(records.pop(), known).encode("utf-8")

        name = f"{run.run_id}-step{index}-attempt{chosen.attempt}-{pod}.log"
        return StreamingResponse(stream(), media_type="text/plain; charset=utf-8",
                                 headers={"Content-Disposition": f'attachment; filename="{name}"'})

    # -- chart data ------------------------------------------------------------------------------
    @app.get("/api/curves/{cid}/{run_id}/{index}")
    def curves(cid: str, run_id: str, index: int, attempt: Optional[int] = None) -> JSONResponse:
        found = entry(cid)
        run = run_of(found, run_id)
        assert found.session is not None
        step = step_of(catalog.status(found, run.run_id), index)
        chosen = pick_attempt(step, attempt)
        chain_step = found.session.chain.step(index)
        patterns = patterns_for(chain_step.metrics if chain_step else None)
        if chosen is None:
            return JSONResponse({"curves": {}, "live": False})
        try:
            client = found.session.client_for(run)
            pool = found.session.chain.pool
            names = pod_names(client.get_job(pool, chosen.job_id))
            text = "".join(client.pod_logs(pool, chosen.job_id, names[0], max_lines=CURVE_LINES).get("logs") or []) \
                if names else ""
        except JobChainError as exc:
            return JSONResponse({"curves": {}, "error": str(exc), "live": step.active})
        return JSONResponse({"curves": parse_curves(text.splitlines(), patterns), "live": step.active})

    @app.get("/api/metrics/{cid}/{job_id}")
    def metrics(cid: str, job_id: str, run: Optional[str] = None) -> JSONResponse:
        found = entry(cid)
        assert found.session is not None
        client = found.session.client_for(run_of(found, run)) if run else pool_client(found)
        pool = found.session.chain.pool
        try:
            job = client.get_job(pool, job_id)
        except JobChainError as exc:
            return JSONResponse({"metrics": {}, "error": str(exc)})
        start = parse_time(job.get("createdAt"))
        end = parse_time(job.get("finishedAt"))
        start_ts = int(start.timestamp()) - 60 if start else int(time.time()) - 3600
        end_ts = int(end.timestamp()) + 60 if end else int(time.time())
        out: Dict[str, Dict[str, Dict[str, List[float]]]] = {}
        for metric in METRICS:
            try:
                answer = client.job_metrics(pool, job_id, metric, start_time=start_ts, end_time=end_ts,  # type: ignore[attr-defined]
                                            time_step=max(1, (end_ts - start_ts) // METRIC_POINTS))
            except (JobChainError, AttributeError):
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

    # -- actions ---------------------------------------------------------------------------------
    @app.post("/action/{cid}/{run_id}/{action}", response_class=HTMLResponse)
    async def act(request: Request, cid: str, run_id: str, action: str) -> HTMLResponse:
        found = entry(cid)
        run = run_of(found, run_id)
        assert found.session is not None
        session = found.session
        try:
            if action == "stop":
                stopped = await run_in_threadpool(session.stop, run.run_id)
                message = f"run {run.run_id} stopped" + (
                    f": stopped step {', '.join(str(s.index) for s in stopped)}" if stopped else "")
            elif action == "resume":
                submitted = await run_in_threadpool(session.resume, run.run_id)
                message = ("every step already succeeded: nothing to resume" if not submitted else
                           "submitted " + ", ".join(f"step {s.step} attempt {s.attempt} (job {s.job_id})"
                                                    for s in submitted))
            else:
                raise NotFoundError(f"no action {action!r}: stop or resume")
            ok = True
        except JobChainError as exc:
            message, ok = str(exc), False
        catalog.forget(found, run.run_id)
        response = page(request, "_message.html", message=message, ok=ok)
        response.headers["HX-Trigger"] = "refresh-run"
        return response

    # -- submit ----------------------------------------------------------------------------------
    @app.get("/submit", response_class=HTMLResponse)
    def submit_page(request: Request, clone: str = "", step: Optional[int] = None) -> HTMLResponse:
        """The submit form; ``?clone=CHAIN&step=N`` fills it with that step's job as a one-step chain."""
        text, name = "", "chain.json"
        if clone and step is not None:
            found = entry(clone)
            assert found.session is not None
            chosen = found.session.chain.step(step)
            if chosen is None:
                raise NotFoundError(f"{found.path} has no step {step}")
            job = dict(chosen.body, jobSpec=dict(chosen.body["jobSpec"], command=chosen.script))
            if chosen.retries or chosen.metrics:
                job["jobChain"] = {k: v for k, v in (("retries", chosen.retries), ("metrics", chosen.metrics)) if v}
            text = json.dumps({"resourcePoolId": found.session.chain.pool, "jobs": [job]}, indent=2, ensure_ascii=False)
            name = re.sub(r"[^A-Za-z0-9._-]", "-", f"{chosen.name}-clone.json").lstrip(".-") or "clone.json"
        return page(request, "submit.html", home=catalog.home, text=text, name=name)

    def check_submission(text: str, name: str, params: str = "") -> Dict[str, Any]:
        """Parse and validate pasted chain JSON as if it were ``home/name`` (and the run's parameters,
        ``NAME=VALUE`` lines); problems at their path."""
        from job_chain.chain.loader import ChainFileError, check_chain_data
        from job_chain.chain.params import parse_param_args, resolve_params
        from job_chain.jsonfile import parse_json

        result: Dict[str, Any] = {"lines": [], "loose": [], "problems": [], "warnings": [], "name": name,
                                  "chain": None, "path": "", "params": {}}
        if not _FILE_NAME.match(name):
            result["loose"].append(f"file name {name!r}: use letters, digits, . _ - and end in .json")
            return result
        path = os.path.join(catalog.home, name)
        result["path"] = path
        if len(text.encode("utf-8")) > MAX_SUBMIT:
            result["loose"].append(f"the chain is larger than {MAX_SUBMIT // 1024} KiB")
            return result
        try:
            data = parse_json(text, name)
        except JobChainError as exc:
            result["loose"].append(str(exc))
            return result
        if not isinstance(data, dict):
            result["loose"].append(f"{name}: a chain file holds one JSON object, not a {type(data).__name__}")
            return result
        secrets = [data["api_config"]["sk"]] if isinstance(data.get("api_config"), dict) and isinstance(
            data["api_config"].get("sk"), str) else []
        lines = views.json_lines(views.redact(data, secrets))
        try:
            chain = check_chain_data(data, path, local=catalog.local)
            result["params"] = parse_param_args(line.strip() for line in params.splitlines() if line.strip())
            resolve_params(chain.params, result["params"], name)
            result["chain"] = chain
            result["warnings"] = list(chain.warnings)
        except ChainFileError as exc:
            result["problems"] = list(exc.problems)
            result["loose"] = views.annotate(lines, exc.problems)
        except JobChainError as exc:  # the parameters
            result["loose"].append(str(exc))
        result["lines"] = lines
        return result

    async def read_form(request: Request) -> Dict[str, str]:
        """htmx posts forms url-encoded: the standard library reads them (bounded)."""
        from urllib.parse import parse_qs

        body = b""
        async for piece in request.stream():
            body += piece
            if len(body) > 2 * MAX_SUBMIT:
                break
        return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}

    @app.post("/submit/check", response_class=HTMLResponse)
    async def submit_check(request: Request) -> HTMLResponse:
        form = await read_form(request)
        result = check_submission(str(form.get("chain") or ""), str(form.get("name") or "chain.json").strip(),
                                  str(form.get("params") or ""))
        return page(request, "_check.html", **result, started=None)

    @app.post("/submit/run", response_class=HTMLResponse)
    async def submit_run(request: Request) -> HTMLResponse:
        from job_chain.files import write_private

        form = await read_form(request)
        text = str(form.get("chain") or "")
        result = check_submission(text, str(form.get("name") or "chain.json").strip(), str(form.get("params") or ""))
        if result["chain"] is None:
            return page(request, "_check.html", **result, started=None)
        path = result["path"]
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as handle:
                if handle.read() != text:
                    result["loose"].append(f"{path} exists with other contents: choose another file name")
                    return page(request, "_check.html", **result, started=None)
        else:
            write_private(path, text)
        try:
            session = await run_in_threadpool(ChainSession.from_file, path, local=catalog.local)
            run = await run_in_threadpool(lambda: session.start(params=result["params"]))
        except JobChainError as exc:
            result["loose"].append(str(exc))
            return page(request, "_check.html", **result, started=None)
        found = catalog.add(path)
        response = page(request, "_check.html", **result, started=(found.id, run.run_id))
        response.headers["HX-Redirect"] = f"/run/{found.id}/{run.run_id}"
        return response

    # -- jobs ------------------------------------------------------------------------------------
    def pool_client(found: Entry) -> Any:
        assert found.session is not None
        runs = found.session.runs()
        return found.session.client_for(runs[0] if runs else None)

    def pools() -> List[Entry]:
        seen: Dict[str, Entry] = {}
        for found in catalog.entries():
            if found.session is not None:
                seen.setdefault(found.session.chain.pool, found)
        return list(seen.values())

    def job_rows() -> Tuple[List[Dict[str, Any]], List[str]]:
        runs: Dict[str, Tuple[str, str]] = {}
        for found in catalog.entries():
            if found.session is not None:
                for run in found.session.runs()[:RUNS_PER_CHAIN]:
                    runs[run.run_id] = (found.id, rel(found.path))
        rows, errors = [], []
        now = _dt.datetime.now(_dt.timezone.utc)
        for found in pools():
            assert found.session is not None
            pool = found.session.chain.pool
            try:
                client = pool_client(found)
                for n, job in enumerate(client.iter_jobs(pool, order_by="createdAt", order="desc")):
                    if n >= JOBS_PER_POOL:
                        break
                    labels = job_labels(job)
                    created = parse_time(job.get("createdAt"))
                    run_id = str(labels.get(LABEL_RUN) or "")
                    rows.append({"job": job, "pool": pool, "cid": found.id, "labels": labels,
                                 "created": created, "age": (now - created).total_seconds() if created else None,
                                 "run": run_id, "step": labels.get(LABEL_STEP), "run_link": runs.get(run_id)})
            except JobChainError as exc:
                errors.append(f"{pool}: {exc}")
        rows.sort(key=lambda r: r["created"] or _dt.datetime.min.replace(tzinfo=_dt.timezone.utc), reverse=True)
        return rows, errors

    @app.get("/jobs", response_class=HTMLResponse)
    def jobs_page(request: Request) -> HTMLResponse:
        rows, errors = job_rows()
        return page(request, "jobs.html", rows=rows, errors=errors)

    @app.get("/fragment/jobs", response_class=HTMLResponse)
    def jobs_fragment(request: Request) -> HTMLResponse:
        rows, errors = job_rows()
        return page(request, "_jobs_rows.html", rows=rows, errors=errors)

    @app.get("/job/{cid}/{job_id}", response_class=HTMLResponse)
    def job_page(request: Request, cid: str, job_id: str) -> HTMLResponse:
        found = entry(cid)
        assert found.session is not None
        client = pool_client(found)
        pool = found.session.chain.pool
        try:
            job = client.get_job(pool, job_id)
        except JobChainError as exc:
            raise NotFoundError(str(exc)) from None
        events: List[Dict[str, Any]] = []
        pod_events: Dict[str, List[Dict[str, Any]]] = {}
        try:
            events = list(client.job_events(pool, job_id).get("events") or [])
            for pod in pod_names(job):
                pod_events[pod] = list(client.pod_events(pool, job_id, pod).get("events") or [])  # type: ignore[attr-defined]
        except (JobChainError, AttributeError):
            pass
        pods = ((job.get("podList") or {}).get("pods")) or []
        shown = views.redact({k: v for k, v in job.items() if k != "podList"}, secrets_of(found))
        return page(request, "job.html", entry=found, job=job, pool=pool, labels=job_labels(job), events=events,
                    pod_events=pod_events, pods=pods, job_json=json.dumps(shown, indent=2, ensure_ascii=False))

    return app
