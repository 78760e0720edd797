"""The runs page, a run's page and its live fragments, a step's panel, and stop / resume."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from job_chain.errors import JobChainError
from job_chain.ui import dag, views
from job_chain.ui.catalog import Entry
from job_chain.ui.pages import RUNS_PER_CHAIN, NotFoundError, Pages, say
from job_chain.util.redaction import redact


def register(app: FastAPI, pages: Pages) -> None:
    catalog = pages.catalog

    def run_rows(outcome: str, chain: str) -> Tuple[List[Dict[str, Any]], List[Entry]]:
        """The runs shown, newest first, of every chain (or of the chain whose id is ``chain``)."""
        rows: List[Dict[str, Any]] = []
        broken: List[Entry] = []
        for found in catalog.entries():
            if chain and found.id != chain:
                continue
            if found.session is None:
                broken.append(found)
                continue
            for run in found.session.runs()[:RUNS_PER_CHAIN]:
                row: Dict[str, Any] = {"entry": found, "run": run, "status": None, "error": ""}
                try:
                    row["status"] = catalog.status(found, run.run_id)
                except JobChainError as exc:
                    row["error"] = say(exc).splitlines()[0]
                got = row["status"].outcome.value if row["status"] else "unknown"
                if outcome and got != outcome:
                    continue
                rows.append(row)
        rows.sort(key=lambda r: r["run"].started, reverse=True)
        return rows, broken

    @app.get("/", response_class=HTMLResponse)
    def runs_page(request: Request, outcome: str = "", chain: str = "") -> HTMLResponse:
        """Every run; ``?chain=ID`` and ``?outcome=…`` filter them (the filter's selects set both)."""
        rows, broken = run_rows(outcome, chain)
        choices = sorted(((e.id, pages.rel(e.path)) for e in catalog.entries()), key=lambda c: c[1])
        return pages.page("runs.html", rows=rows, broken=broken, outcome=outcome, chain=chain, choices=choices,
                          paths=catalog.paths, chains=len(catalog.files()))

    @app.get("/fragment/runs", response_class=HTMLResponse)
    def runs_fragment(request: Request, outcome: str = "", chain: str = "") -> HTMLResponse:
        rows, broken = run_rows(outcome, chain)
        return pages.page("_runs_rows.html", rows=rows, outcome=outcome, chain=chain)

    def run_context(cid: str, run_id: str) -> Dict[str, Any]:
        found = pages.entry(cid)
        run = pages.run_of(found, run_id)
        try:
            status = catalog.status(found, run.run_id)
        except JobChainError as exc:
            return {"entry": found, "run": run, "status": None, "error": say(exc)}
        return {"entry": found, "run": run, "status": status, "error": "", "timeline": views.timeline(status),
                "dag": dag.layout(status.steps)}

    @app.get("/run/{cid}/{run_id}", response_class=HTMLResponse)
    def run_page(request: Request, cid: str, run_id: str, step: Optional[str] = None,
                 attempt: Optional[int] = None) -> HTMLResponse:
        """The run; ``?step=NAME`` (or its number; ``&attempt=A``) opens that step's panel: the links
        steps carry."""
        context = run_context(cid, run_id)
        return pages.page("run.html", selected=step, attempt=attempt, **context)

    @app.get("/fragment/run/{cid}/{run_id}", response_class=HTMLResponse)
    def run_fragment(request: Request, cid: str, run_id: str) -> HTMLResponse:
        return pages.page("_run_live.html", **run_context(cid, run_id))

    @app.get("/fragment/step/{cid}/{run_id}/{step_key}", response_class=HTMLResponse)
    def step_fragment(request: Request, cid: str, run_id: str, step_key: str,
                      attempt: Optional[int] = None) -> HTMLResponse:
        found, run, step, chosen = pages.located(cid, run_id, step_key, attempt)
        session = pages.session(found)
        try:
            # the request this run sends for the step (its chosen attempt), from its frozen chain
            plan = redact(session.request(run.run_id, step.name, chosen.attempt if chosen else None),
                          pages.secrets_of(found, run))
            request_json = json.dumps(plan, indent=2, ensure_ascii=False)
        except JobChainError as exc:
            request_json = f"(cannot build the request: {exc})"
        pods: List[str] = []
        pod_error = ""
        if chosen is not None and chosen.job_id:  # (a cached attempt has no job)
            try:
                pods = list(session.pods(run, chosen.job_id))
            except JobChainError as exc:
                pod_error = say(exc)
        return pages.page("_step.html", entry=found, run=run, step=step, chosen=chosen, pods=pods,
                          pod_error=pod_error, request_json=request_json)

    @app.post("/action/{cid}/{run_id}/{action}", response_class=HTMLResponse)
    async def act(request: Request, cid: str, run_id: str, action: str) -> HTMLResponse:
        """stop; preview (what resume would change and submit); resume; delete (a run not going)."""
        found = pages.entry(cid)
        run = pages.run_of(found, run_id)
        session = await run_in_threadpool(pages.acting_session, found)
        redirect = ""
        try:
            if action == "stop":
                stopped = await run_in_threadpool(session.stop, run.run_id)
                message = f"run {run.run_id} stopped" + (
                    f": stopped {', '.join(s.name for s in stopped)}" if stopped else "")
            elif action == "preview":
                plan = await run_in_threadpool(session.preview_resume, run.run_id)
                return pages.page("_resume_plan.html", entry=found, run=run, plan=plan)
            elif action == "resume":
                submitted = await run_in_threadpool(session.resume, run.run_id)
                message = ("every step already succeeded: nothing to resume" if not submitted else
                           "submitted " + ", ".join(f"{s.step} attempt {s.attempt} (job {s.job_id})"
                                                    for s in submitted))
            elif action == "delete":
                await run_in_threadpool(session.delete_run, run.run_id)
                message, redirect = f"run {run.run_id} deleted (its jobs stay in AIHC)", f"/?chain={found.id}"
            else:
                raise NotFoundError(f"no action {action!r}: stop, preview, resume or delete")
            ok = True
        except JobChainError as exc:
            message, ok = say(exc), False
        catalog.forget(found, run.run_id)
        response = pages.page("_message.html", message=message, ok=ok)
        response.headers["HX-Trigger"] = "refresh-run"
        if redirect and ok:
            response.headers["HX-Redirect"] = redirect
        return response
