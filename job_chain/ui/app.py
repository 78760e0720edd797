"""The console's HTTP side: one FastAPI app, its guard, its error pages, and the route groups.

The routes live by what they show: :mod:`routes_runs` (runs, a run, a step, stop/resume),
:mod:`routes_logs` (logs and chart data), :mod:`routes_submit` and :mod:`routes_jobs`; who may
call them is :mod:`security`. Facts come from :class:`ChainSession` and the run's AIHC client.
Handlers are plain ``def`` so the blocking API calls run in FastAPI's thread pool.
"""

from __future__ import annotations

import os

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from job_chain.errors import JobChainError
from job_chain.ui import routes_jobs, routes_logs, routes_runs, routes_submit
from job_chain.ui.catalog import Catalog
from job_chain.ui.pages import HERE, NotFoundError, Pages, say
from job_chain.ui.security import Guard


def create_app(catalog: Catalog, guard: Guard) -> FastAPI:
    """The console for ``catalog``'s chains, behind ``guard``'s token/Host/CSRF checks."""
    app = FastAPI(title="job-chain console", docs_url=None, redoc_url=None, openapi_url=None)
    app.middleware("http")(guard)
    app.mount("/static", StaticFiles(directory=os.path.join(HERE, "static")), name="static")
    pages = Pages(catalog, guard)

    @app.exception_handler(NotFoundError)
    async def not_found(request: Request, exc: NotFoundError) -> HTMLResponse:
        return pages.page("error.html", 404, message=str(exc), title="Not found")

    @app.exception_handler(JobChainError)
    async def failed(request: Request, exc: JobChainError) -> HTMLResponse:
        """An expected failure (the API unreachable, credentials missing): its one line, not a traceback."""
        return pages.page("error.html", 502, message=say(exc), title="Cannot answer")

    for routes in (routes_runs, routes_logs, routes_submit, routes_jobs):
        routes.register(app, pages)
    return app
