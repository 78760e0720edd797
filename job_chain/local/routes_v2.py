"""HTTP for the AIHC OpenAPI v2: ``POST|GET /?action=Name`` dispatched to :mod:`backend_v2`.

Registered by :func:`job_chain.local.routes.create_app` beside the v1 routes, behind the same
request-id and signature middleware: the v2 SDK signs ``/`` with the ``action`` query parameter
(jobs: its BCE signer; pools and queues: its own requests-based signer over
``content-type;host;x-bce-date``), and both verify with the one check in :mod:`auth`. The method
and the API-version header each action needs are checked by :class:`BackendV2`.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from job_chain.local.backend import Backend
from job_chain.local.backend_v2 import BackendV2
from job_chain.local.errors import BadRequest
from job_chain.local.wire import parse_body


def add_v2_routes(app: FastAPI, backend: Backend,
                  answer_v2: Callable[..., Awaitable[JSONResponse]]) -> None:
    actions = BackendV2(backend)

    @app.api_route("/", methods=["GET", "POST"])
    async def action(request: Request) -> JSONResponse:
        name = request.query_params.get("action")
        if not name:
            raise BadRequest("the v2 API needs ?action=Name (e.g. ?action=DescribeJobs)")
        body: Any = parse_body(await request.body()) if request.method == "POST" else None
        return await answer_v2(request, actions.call, name, request.method, request.headers,
                               dict(request.query_params), body)
