"""HTTP for the AIHC OpenAPI v2: ``POST|GET /?action=Name`` dispatched to :mod:`backend_v2`.

Registered by :func:`job_chain.local.routes.create_app` beside the v1 routes, behind the same
request-id and signature middleware: the v2 SDK signs ``/`` with the ``action`` query parameter
(jobs: its BCE signer; pools and queues: its own requests-based signer over
``content-type;host;x-bce-date``), and both verify with the one check in :mod:`auth`.

How each action is sent is checked here, as its Baidu page gives it: job actions are ``POST``
with ``X-API-Version: v2``, pool and queue actions ``GET`` with ``version: v2`` (both SDKs send
these too); a request sent otherwise is refused, as the service would not route it.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Dict, Tuple

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from job_chain.local.backend import Backend
from job_chain.local.backend_v2 import JOB_ACTIONS, POOL_ACTIONS, BackendV2, unknown_action
from job_chain.local.errors import BadRequest, MethodNotAllowed
from job_chain.local.wire import parse_body

JOB = ("POST", "X-API-Version")  # Baidu's job pages (CreateJob Hmayv96tj, DescribeJob Kmayvejf0, …)
POOL = ("GET", "version")  # the pool and queue pages (DescribeResourcePools dmgrw0t8l, DescribeQueue Jmfcjhru0)
SENT_AS: Dict[str, Tuple[str, str]] = {**dict.fromkeys(JOB_ACTIONS, JOB), **dict.fromkeys(POOL_ACTIONS, POOL)}


def check_sent_as(action: str, method: str, version: Callable[[str], Any]) -> None:
    """Refuse an action sent with another method or without its page's version header
    (``version``: the request's header by name); an unknown action is refused first."""
    if action not in SENT_AS:
        raise unknown_action(action)
    wanted_method, header = SENT_AS[action]
    if method != wanted_method:
        raise MethodNotAllowed(f"action {action} is sent with {wanted_method} (Baidu's page for "
                               f"{action}), not {method}")
    if version(header) != "v2":
        raise BadRequest(f"action {action} needs the header {header}: v2 (Baidu's page for {action}); "
                         "without it the request is not one of the v2 API")


def add_v2_routes(app: FastAPI, backend: Backend,
                  answer_v2: Callable[..., Awaitable[JSONResponse]]) -> None:
    actions = BackendV2(backend)

    @app.api_route("/", methods=["GET", "POST"])
    async def action(request: Request) -> JSONResponse:
        name = request.query_params.get("action")
        if not name:
            raise BadRequest("the v2 API needs ?action=Name (e.g. ?action=DescribeJobs)")
        body: Any = parse_body(await request.body()) if request.method == "POST" else None
        check_sent_as(name, request.method, request.headers.get)
        return await answer_v2(request, actions.call, name, dict(request.query_params), body)
