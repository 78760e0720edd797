"""HTTP for the local AIHC server (moto's ``urls.py`` + ``responses.py``): parse, call, answer.

Request pipeline, outermost first: request id → body size cap → [extra middleware, e.g. fault
injection] → BCE signature check → routes. Every answer is JSON; every error is ``{"requestId", "code",
"message"}``, including unknown paths and bad JSON. FastAPI is imported at module level because
it resolves the (string) annotations of the handlers here; only the server imports this module.
"""

from __future__ import annotations

import asyncio
import codecs
import functools
import json
import os
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from fastapi import FastAPI, Request, WebSocket
from fastapi.exceptions import RequestValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect

from job_chain.local.auth import Sessions, check_body_hash, verify, wants_body_hash
from job_chain.local.backend import Backend
from job_chain.local.errors import BadRequest, Forbidden, LocalAPIError, NotSupported, error_body
from job_chain.local.routes_v2 import add_v2_routes
from job_chain.local.wire import BodyLimitMiddleware, parse_body
from job_chain.local.wire import JSONAnswer as JSONResponse  # never fails to encode a stored row

API = "/api/v1/aijobs"
UNSIGNED_PATHS = frozenset({"/healthz"})



def request_id_of(scope: Scope) -> str:
    return scope.setdefault("state", {}).setdefault("request_id", str(uuid.uuid4()))


async def send_json(send: Send, status: int, body: Mapping[str, Any],
                    request_id: str) -> None:
    """Answer from a pure ASGI middleware (auth failures, fault injection)."""
    raw = json.dumps(body).encode("utf-8")
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()),
        (b"x-bce-request-id", request_id.encode()),
    ]})
    await send({"type": "http.response.body", "body": raw})


class RequestIdMiddleware:
    """Give each request an id (``x-bce-request-id``) that its answer and errors carry."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                if not any(k.lower() == b"x-bce-request-id" for k, _ in headers):
                    headers.append((b"x-bce-request-id", request_id.encode()))
                message = dict(message, headers=headers)
            await send(message)

        await self.app(scope, receive, send_with_id)


class AuthMiddleware:
    """Reject HTTP requests without a valid BCE v1 signature (``/healthz`` is open)."""

    def __init__(self, app: ASGIApp, keys: Mapping[str, str], sessions: Optional[Sessions] = None) -> None:
        self.app = app
        self.keys = keys
        self.sessions = sessions  # temporary (STS) keys this server issued

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNSIGNED_PATHS:
            await self.app(scope, receive, send)
            return
        from urllib.parse import parse_qsl

        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        raw_path = scope.get("raw_path") or scope["path"].encode("utf-8")
        headers = scope.get("headers") or []
        try:
            scope.setdefault("state", {})["access_key"] = verify(
                scope["method"], raw_path, query, headers, self.keys, sessions=self.sessions)
            if wants_body_hash(headers):
                body = await read_body(receive)
                if body is None:  # the client went away
                    return
                check_body_hash(headers, body)
                receive = replay(body, receive)
        except LocalAPIError as exc:
            request_id = request_id_of(scope)
            await send_json(send, exc.status, error_body(exc.code, exc.message, request_id),
                            request_id)
            return
        await self.app(scope, receive, send)


async def read_body(receive: Receive) -> Optional[bytes]:
    """The whole request body (None if the client disconnected first)."""
    chunks: List[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body already read, then behaves as the original."""
    pending: List[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def again() -> Message:
        return pending.pop() if pending else await receive()

    return again


# AIHC APIs the local server does not emulate: a clear BCE error, never invented data.
UNSUPPORTED_V1 = ("/api/v1/datasets", "/api/v1/models", "/api/v1/services", "/api/v1/devinstances")
POOLS = "/api/v1/resourcepools"


def create_app(backend: Backend, keys: Mapping[str, str],
               middleware: Sequence[Tuple[Any, Dict[str, Any]]] = ()) -> FastAPI:
    """The FastAPI app. ``middleware``: (class, kwargs) pairs placed between id and auth."""
    app = FastAPI(title="job-chain local AIHC", docs_url=None, redoc_url=None, openapi_url=None)

    def rid(request: Request) -> str:
        return request_id_of(request.scope)

    def error(request: Request, status: int, code: str, message: str) -> JSONResponse:
        return JSONResponse(error_body(code, message, rid(request)), status_code=status)

    @app.exception_handler(LocalAPIError)
    async def _domain(request: Request, exc: LocalAPIError) -> JSONResponse:
        return error(request, exc.status, exc.code, exc.message)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "NotFound", 405: "MethodNotAllowed"}
        message = f"no such API: {request.method} {request.url.path}" if exc.status_code in codes \
            else str(exc.detail)
        return error(request, exc.status_code, codes.get(exc.status_code, "BadRequest"), message)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(request, 400, "InvalidParameter", "invalid request parameters")

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        return error(request, 500, "InternalError", f"internal error: {type(exc).__name__}")

    async def answer(request: Request, func: Callable[..., Dict[str, Any]], *args: Any,
                     wrap: bool = True) -> JSONResponse:
        result = await run_in_threadpool(func, *args)
        body = {"requestId": rid(request), "result": result} if wrap \
            else dict(result, requestId=rid(request))
        return JSONResponse(body)

    async def answer_flat(request: Request, func: Callable[..., Dict[str, Any]], *args: Any) -> JSONResponse:
        """v2 answers are flat: ``{"requestId", ...fields}``."""
        return await answer(request, func, *args, wrap=False)

    def pool_of(request: Request) -> str:
        pool = request.query_params.get("resourcePoolId")
        if not pool:
            raise BadRequest("resourcePoolId is required (query parameter)")
        return pool

    async def json_body(request: Request) -> Any:
        """The body as JSON, read with the chain files' rules (no NaN, huge numbers, deep nesting)."""
        raw = await request.body()
        if not raw.strip():
            return None
        return parse_body(raw)

    @app.get("/healthz")
    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse(backend.health())

    @app.post(API)
    async def create_job(request: Request) -> JSONResponse:
        pool = pool_of(request)
        body = await json_body(request)
        return await answer(request, backend.create_job, pool, body,
                            request.query_params.get("clientToken") or None)

    @app.get(API)
    async def list_jobs(request: Request) -> JSONResponse:
        p = request.query_params
        return await answer(request, backend.list_jobs, pool_of(request), p.get("queue"),
                            p.get("orderBy"), p.get("order"), p.get("pageNo"), p.get("pageSize"))

    @app.get(API + "/{job_id}")
    async def get_job(request: Request, job_id: str) -> JSONResponse:
        return await answer(request, backend.get_job, pool_of(request), job_id)

    @app.delete(API + "/{job_id}")
    async def delete_job(request: Request, job_id: str) -> JSONResponse:
        return await answer(request, backend.delete_job, pool_of(request), job_id)

    @app.put(API + "/{job_id}")
    async def update_job(request: Request, job_id: str) -> JSONResponse:
        pool = pool_of(request)
        body = await json_body(request)
        return await answer(request, backend.update_job, pool, job_id, body)

    @app.post(API + "/{job_id}/stop")
    async def stop_job(request: Request, job_id: str) -> JSONResponse:
        return await answer(request, backend.stop_job, pool_of(request), job_id)

    @app.get(API + "/{job_id}/events")
    async def job_events(request: Request, job_id: str) -> JSONResponse:
        p = request.query_params
        return await answer(request, backend.events, pool_of(request), job_id, None,
                            p.get("jobFramework"), p.get("startTime"), p.get("endTime"), wrap=False)

    @app.get(API + "/{job_id}/pods/{pod}/events")
    async def pod_events(request: Request, job_id: str, pod: str) -> JSONResponse:
        p = request.query_params
        return await answer(request, backend.events, pool_of(request), job_id, pod,
                            p.get("jobFramework"), p.get("startTime"), p.get("endTime"), wrap=False)

    @app.get(API + "/{job_id}/pods/{pod}/logs")
    async def pod_logs(request: Request, job_id: str, pod: str) -> JSONResponse:
        p = request.query_params
        return await answer(request, functools.partial(
            backend.logs, pool_of(request), job_id, pod, p.get("startTime"), p.get("maxLines"), p.get("chunk"),
            end=p.get("endTime"), keywords=p.get("keywords"), marker=p.get("marker")))

    @app.get(API + "/{job_id}/metrics")
    async def job_metrics(request: Request, job_id: str) -> JSONResponse:
        p = request.query_params
        return await answer(request, backend.metrics, pool_of(request), job_id,
                            p.get("metricType"), p.get("startTime"), p.get("endTime"),
                            p.get("timeStep"))

    @app.get(API + "/{job_id}/nodes")
    async def job_nodes(request: Request, job_id: str) -> JSONResponse:
        return await answer(request, backend.nodes, pool_of(request), job_id)

    @app.get(API + "/{job_id}/pods/{pod}/webterminal")
    async def webterminal(request: Request, job_id: str, pod: str) -> JSONResponse:
        p = request.query_params
        return await answer(request, backend.webterminal, pool_of(request), job_id, pod,
                            p.get("handshakeTimeoutSecond"), p.get("pingTimeoutSecond"))

    # -- pools, queues, nodes (seed's neighbours; the v1 SDK's get_all_pools ... get_queue) ------
    @app.get(POOLS)
    async def list_pools(request: Request) -> JSONResponse:
        p = request.query_params
        return await answer(request, backend.pools.list_pools, p.get("pageNo"), p.get("pageSize"))

    @app.get(POOLS + "/{pool}")
    async def get_pool(request: Request, pool: str) -> JSONResponse:
        return await answer(request, backend.pools.get_pool, pool)

    @app.get(POOLS + "/{pool}/nodes")
    async def pool_nodes(request: Request, pool: str) -> JSONResponse:
        p = request.query_params
        return await answer(request, backend.pools.pool_nodes, pool, p.get("pageNo"), p.get("pageSize"))

    @app.get(POOLS + "/{pool}/queue")
    async def list_queues(request: Request, pool: str) -> JSONResponse:
        p = request.query_params
        return await answer(request, backend.pools.list_queues, pool, p.get("pageNo"), p.get("pageSize"))

    @app.get(POOLS + "/{pool}/queue/{name}")
    async def get_queue(request: Request, pool: str, name: str) -> JSONResponse:
        return await answer(request, backend.pools.get_queue, pool, name)

    for prefix in UNSUPPORTED_V1:
        @app.api_route(prefix, methods=["GET", "POST", "PUT", "DELETE"])
        @app.api_route(prefix + "/{rest:path}", methods=["GET", "POST", "PUT", "DELETE"])
        async def unsupported(request: Request) -> JSONResponse:
            raise NotSupported(f"{request.method} {request.url.path} is not supported by the local "
                               "server (it runs training jobs only)")

    add_v2_routes(app, backend, answer_v2=answer_flat)

    @app.post("/v1/sessionToken")
    async def session_token(request: Request) -> JSONResponse:
        """BCE STS GetSessionToken (the SDK's StsClient, served here rather than on sts.bj.baidubce.com):
        temporary credentials, asked for with this server's own keys."""
        if request.scope.get("state", {}).get("access_key") not in keys:
            raise Forbidden("temporary credentials cannot get a session token: sign with the server's own keys",
                            code="AccessDenied")
        body = await json_body(request)
        return await answer(request, backend.mint_session, request.query_params.get("durationSeconds"), body,
                            wrap=False)

    @app.websocket("/webterminal/establish")
    async def terminal(websocket: WebSocket) -> None:
        token = websocket.query_params.get("token") or ""
        target = await run_in_threadpool(backend.terminal_target, token)
        if target is None:
            await websocket.close(code=4401, reason="invalid or expired token")
            return
        await websocket.accept()
        await stream_log(websocket, target, backend)

    # The one place the pipeline is assembled, outermost first.
    app.user_middleware = (
        [Middleware(RequestIdMiddleware), Middleware(BodyLimitMiddleware)]
        + [Middleware(cls, **options) for cls, options in middleware]
        + [Middleware(AuthMiddleware, keys=keys, sessions=backend.store.session)]
    )
    return app


async def stream_log(websocket: Any, target: Dict[str, Any], backend: Backend,
                     poll: float = 0.1) -> None:
    """Send the pod log so far, then follow appends until the pod ends or the client leaves."""
    gone = asyncio.Event()

    async def watch_client() -> None:
        try:
            while True:
                message = await websocket.receive()
                if message.get("type") == "websocket.disconnect":
                    break
        except (WebSocketDisconnect, RuntimeError):
            pass
        gone.set()

    watcher = asyncio.ensure_future(watch_client())
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    position = 0
    try:
        while not gone.is_set():
            finished = await run_in_threadpool(backend.pod_finished, target["job_id"], target["pod"])
            chunk = b""
            if os.path.exists(target["log_path"]):
                with open(target["log_path"], "rb") as handle:
                    handle.seek(position)
                    chunk = handle.read(1 << 16)
            if chunk:
                position += len(chunk)
                text = decoder.decode(chunk)
                if text:
                    await websocket.send_text(text)
                continue
            if finished:
                await websocket.close(code=1000)
                return
            try:
                await asyncio.wait_for(gone.wait(), timeout=poll)
            except asyncio.TimeoutError:
                pass
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass
    finally:
        watcher.cancel()
