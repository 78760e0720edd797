"""The runs page, a run's page and its live fragments, a step's panel, and stop / resume."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, List, Optional, Tuple

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from job_chain.errors import JobChainError
from job_chain.record.records import run_start
from job_chain.session.summaries import parse_since
from job_chain.ui import dag, views
from job_chain.ui.catalog import Entry, short_names
from job_chain.ui.pages import NotFoundError, Pages, say
from job_chain.util.redaction import redact

PAGE = 50  # runs on a page of the runs list
SINCE = ("1h", "24h", "7d", "30d")  # the time filter's choices (besides any time)


def pager_digest(more: bool, page: int) -> str:
    """What the page's pager row shows (its rows' digests say the same of each run)."""
    return f"{int(more)}{page}"


def register(app: FastAPI, pages: Pages) -> None:
    catalog = pages.catalog

    def run_rows(outcome: str, chain: str, since: str, page: int) -> Tuple[List[Dict[str, Any]], List[Entry], bool]:
        """One page of runs, newest first, of every chain (or of the chain whose id is ``chain``),
        each from its summary: (rows, chains that cannot be opened, whether older runs follow)."""
        entries = catalog.entries()
        names = short_names([e.path for e in entries])
        since_at = parse_since(since) if since in SINCE else None
        # every chain's runs as listed (no look), newest first; only those the page shows are worked out
        listed: List[Tuple[float, str, Entry, Any]] = []
        broken: List[Entry] = []
        for found in entries:
            if chain and found.id != chain:
                continue
            if found.session is None:
                broken.append(found)
                continue
            listed += [(run_start(item.run, item.run_id) or 0.0, item.run_id, found, item)
                       for item in found.session.listed(since=since_at)]
        listed.sort(key=lambda c: (c[0], c[1]), reverse=True)

        def row(found: Entry, item: Any) -> Dict[str, Any]:
            summary = found.session.summary_of(item)  # type: ignore[union-attr]
            return {"entry": found, "name": names.get(found.path, found.path), "s": summary,
                    "id": f"r-{found.id}-{summary.run_id}"}

        if not outcome:  # the page's rows alone: a run with no summary (copied in by hand) is worked out when shown
            shown = [row(found, item) for _, _, found, item in listed[page * PAGE:(page + 1) * PAGE]]
            more = len(listed) > (page + 1) * PAGE
        else:  # by outcome: the newest runs are worked out until the page is full and one more is found
            rows: List[Dict[str, Any]] = []
            for _, _, found, item in listed:
                if len(rows) > (page + 1) * PAGE:
                    break
                candidate = row(found, item)
                if candidate["s"].outcome == outcome:
                    rows.append(candidate)
            shown, more = rows[page * PAGE:(page + 1) * PAGE], len(rows) > (page + 1) * PAGE
        for item in shown:
            html = pages.env.get_template("_run_row.html").render(r=item)
            item["digest"] = hashlib.sha1(html.encode("utf-8", "surrogateescape")).hexdigest()[:16]
            item["html"] = html.replace('<tr class="run-row"', f'<tr data-digest="{item["digest"]}" class="run-row"', 1)
        return shown, broken, more

    def page_number(page: str) -> int:
        return int(page) if page.isdigit() and len(page) < 7 else 0

    @app.get("/", response_class=HTMLResponse)
    def runs_page(request: Request, outcome: str = "", chain: str = "", since: str = "",
                  page: str = "") -> HTMLResponse:
        """A page of runs, newest first; ``?chain=ID``, ``?outcome=…`` and ``?since=7d`` filter them (the
        filter's selects set them), ``?page=N`` pages back."""
        number = page_number(page)
        rows, broken, more = run_rows(outcome, chain, since, number)
        entries = catalog.entries()
        names = short_names([e.path for e in entries])
        choices = sorted(((e.id, names.get(e.path, e.path), pages.rel(e.path)) for e in entries), key=lambda c: c[1])
        return pages.page("runs.html", rows=rows, broken=broken, outcome=outcome, chain=chain, since=since,
                          page=number, more=more, page_size=PAGE, choices=choices, sinces=SINCE, paths=catalog.paths,
                          chains=len(catalog.files()))

    @app.get("/fragment/runs", response_class=HTMLResponse)
    def runs_fragment(request: Request, outcome: str = "", chain: str = "", since: str = "", page: str = "",
                      seen: str = "") -> Response:
        """The live poll: nothing (204) when the rows the page shows (``seen``: ``ID:DIGEST,…``) are
        unchanged; only the rows that changed when the same runs are shown; else the page's rows."""
        number = page_number(page)
        rows, _, more = run_rows(outcome, chain, since, number)
        known = [item.partition(":") for item in seen.split(",") if item]
        if seen and [k[0] for k in known] == [r["id"] for r in rows] + ["pager"]:
            old = {k[0]: k[2] for k in known}
            changed = [r for r in rows if old.get(r["id"]) != r["digest"]]
            if old["pager"] == pager_digest(more, number) and not changed:
                return Response(status_code=204)
            if old["pager"] == pager_digest(more, number):
                response = pages.page("_runs_changed.html", rows=changed)
                response.headers["HX-Reswap"] = "none"  # the rows swap themselves (out of band)
                return response
        return pages.page("_runs_rows.html", rows=rows, outcome=outcome, chain=chain, since=since, page=number,
                          more=more, page_size=PAGE)

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
                          pod=chosen.log_pod(pods) if chosen is not None else None, pod_error=pod_error,
                          request_json=request_json)

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
            elif action == "resume":  # a going run is revised by the one look that finds it going
                revised = await run_in_threadpool(session.revise_running, run.run_id)
                if revised.going:
                    message = going_message(revised)
                else:
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


def going_message(plan: Any) -> str:
    """What a resume of a going run did: nothing stopped or submitted; what it applied, what not."""
    applied = [c.line()[2:] for c in plan.changes if c.applied]
    held = [c.line()[2:] for c in plan.changes if not c.applied]
    text = f"run {plan.run_id} is still going: nothing was stopped or submitted"
    if applied:
        text += f"; revision {plan.revision} applies " + "; ".join(applied)
    if held:
        text += "; not applied: " + "; ".join(held)
    if not plan.changes:
        text += "; the chain file matches the run"
    return text
