"""The Jobs page (every job of the pools the chains use) and one job's page."""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse

from job_chain.aihc.client import pod_names
from job_chain.aihc.engine import labels_of
from job_chain.aihc.timefmt import parse_time
from job_chain.engine.jobs import LABEL_RUN, LABEL_STEP
from job_chain.errors import JobChainError
from job_chain.ui import views
from job_chain.ui.catalog import Entry
from job_chain.ui.pages import RUNS_PER_CHAIN, NotFoundError, Pages, say
from job_chain.util.redaction import redact

JOBS_PER_POOL = 200


def register(app: FastAPI, pages: Pages) -> None:
    catalog = pages.catalog

    def pools() -> List[Entry]:
        seen: Dict[str, Entry] = {}
        for found in catalog.entries():
            if found.session is not None:
                pool = pages.pool_of(found)
                if pool:
                    seen.setdefault(pool, found)
        return list(seen.values())

    def job_rows() -> Tuple[List[Dict[str, Any]], List[str]]:
        runs: Dict[str, Tuple[str, str]] = {}
        chains: Dict[str, Entry] = {}
        for found in catalog.entries():
            if found.session is not None:
                chains[found.id] = found
                for run in found.session.runs()[:RUNS_PER_CHAIN]:
                    runs[run.run_id] = (found.id, pages.rel(found.path))
        steps: Dict[str, Set[str]] = {}

        def has_step(run_id: str, step: Any) -> bool:
            """Whether the run's page can open ``step`` (a renamed or removed one may not): a link
            to a step must never land on "no step …"."""
            if run_id not in steps:
                steps[run_id] = set()
                found = chains[runs[run_id][0]]
                try:
                    chain = pages.session(found).frozen(run_id)  # the revision it runs now
                except JobChainError:
                    chain = None
                for known in chain.steps if chain is not None else []:
                    steps[run_id] |= {known.name, str(known.index)}
            return str(step) in steps[run_id]

        rows, errors = [], []
        now = _dt.datetime.now(_dt.timezone.utc)
        for found in pools():
            pool = pages.pool_of(found) or ""
            try:
                client = pages.pool_client(found)
                for n, job in enumerate(client.iter_jobs(pool, order_by="createdAt", order="desc")):
                    if n >= JOBS_PER_POOL:
                        break
                    labels = labels_of(job)
                    created = parse_time(job.get("createdAt"))
                    run_id = str(labels.get(LABEL_RUN) or "")
                    rows.append({"job": job, "pool": pool, "cid": found.id, "labels": views.own_labels(labels),
                                 "created": created, "age": (now - created).total_seconds() if created else None,
                                 "run": run_id, "step": labels.get(LABEL_STEP), "run_link": runs.get(run_id),
                                 "step_link": run_id in runs and labels.get(LABEL_STEP) is not None
                                 and has_step(run_id, labels.get(LABEL_STEP))})
            except JobChainError as exc:
                errors.append(f"{pool}: {exc}")
        rows.sort(key=lambda r: r["created"] or _dt.datetime.min.replace(tzinfo=_dt.timezone.utc), reverse=True)
        return rows, errors

    @app.get("/jobs", response_class=HTMLResponse)
    def jobs_page(request: Request) -> HTMLResponse:
        rows, errors = job_rows()
        return pages.page("jobs.html", rows=rows, errors=errors)

    @app.get("/fragment/jobs", response_class=HTMLResponse)
    def jobs_fragment(request: Request) -> HTMLResponse:
        rows, errors = job_rows()
        return pages.page("_jobs_rows.html", rows=rows, errors=errors)

    @app.get("/job/{cid}/{job_id}", response_class=HTMLResponse)
    def job_page(request: Request, cid: str, job_id: str, run: Optional[str] = None) -> HTMLResponse:
        """One job; ``run``: of that run, in the pool and on the endpoint it runs on (not the file's)."""
        found = pages.entry(cid)
        if run:
            session, ran = pages.session(found), pages.run_of(found, run)
            try:
                client, pool = session.client_for(ran), session.frozen(ran).pool
            except JobChainError as exc:
                raise NotFoundError(say(exc)) from None
        else:
            client, pool = pages.pool_client(found), pages.pool_of(found) or ""
        try:
            job = client.get_job(pool, job_id)
        except JobChainError as exc:
            raise NotFoundError(say(exc)) from None
        events: List[Dict[str, Any]] = []
        pod_events: Dict[str, List[Dict[str, Any]]] = {}
        # not a JobsAPI call: AIHC's clients have it, another client shows no pod events
        events_of_pod: Optional[Callable[..., Dict[str, Any]]] = getattr(client, "pod_events", None)
        try:
            events = list(client.job_events(pool, job_id).get("events") or [])
            if events_of_pod is not None:
                for pod in pod_names(job):
                    pod_events[pod] = list(events_of_pod(pool, job_id, pod).get("events") or [])
        except JobChainError:
            pass
        pods = ((job.get("podList") or {}).get("pods")) or []
        shown = redact({k: v for k, v in job.items() if k != "podList"}, pages.secrets_of(found))
        return pages.page("job.html", entry=found, job=job, pool=pool, labels=labels_of(job), events=events,
                          pod_events=pod_events, pods=pods, job_json=json.dumps(shown, indent=2, ensure_ascii=False))
