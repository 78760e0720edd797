"""What the local server's HTTP layer guarantees whatever a request or a stored row holds.

* A request body is at most :data:`MAX_BODY` bytes. A larger ``Content-Length`` is answered
  413 before a byte of the body is read; a chunked body is counted as it arrives and refused
  the moment it passes the cap, so no request can make the server hold more than that.
* Every JSON answer encodes: a lone UTF-16 surrogate in stored text (rows written before
  creates refused them) is sent as U+FFFD instead of failing the answer with a 500.
* A request body is read with the chain files' JSON rules (:func:`parse_body`), shared by the v1
  and v2 routes.
"""

from __future__ import annotations

from typing import Any, List

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from job_chain.errors import UsageError
from job_chain.local.errors import BadRequest, error_body
from job_chain.local.shapes import json_text
from job_chain.util.jsonfile import parse_json
from job_chain.util.safe_text import without_surrogates

# A create body holds at most ~2 MiB of command and envs (the kernel's ARG_MAX, see
# job_chain.aihc.spec); JSON escapes can double that. Nothing else the API takes comes close.
MAX_BODY = 8 * 1024 * 1024
TOO_LARGE = "RequestEntityTooLarge"



class JSONAnswer(JSONResponse):
    """Starlette's JSONResponse that never fails to encode (lone surrogates become U+FFFD)."""

    def render(self, content: Any) -> bytes:
        text = json_text(content)  # JSONItems in it are sent as they are (already this encoding)
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            return without_surrogates(text).encode("utf-8")


class BodyLimitMiddleware:
    """Refuse request bodies over ``limit`` bytes (413 ``RequestEntityTooLarge``) before reading them."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            if not declared.strip().isdigit() or int(declared) > self.limit:
                await self._refuse(scope, receive, send, declared.decode("latin-1")[:20])
                return
            await self.app(scope, receive, send)
            return
        if b"transfer-encoding" not in headers:  # no body at all
            await self.app(scope, receive, send)
            return
        chunks: List[bytes] = []
        size = 0
        while True:  # chunked: read up to the cap, then hand the app the body read
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(scope, receive, send, f"more than {size}")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        pending: List[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay() -> Message:
            return pending.pop() if pending else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, size: str) -> None:
        request_id = str((scope.get("state") or {}).get("request_id", ""))  # RequestIdMiddleware's
        message = (f"request body of {size} bytes is over the local server's limit of {self.limit} bytes "
                   f"({self.limit // (1024 * 1024)} MiB)")
        await JSONAnswer(error_body(TOO_LARGE, message, request_id), status_code=413)(scope, receive, send)


def parse_body(raw: bytes) -> Any:
    """A request body as JSON with the chain files' rules (no NaN, huge numbers, deep nesting);
    None when empty. Not JSON: 400 MalformedJSON, as BCE answers."""
    if not raw.strip():
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"request body is not valid JSON: not UTF-8 (byte offset {exc.start})",
                         code="MalformedJSON") from None
    try:
        return parse_json(text, "request body")
    except UsageError as exc:
        detail = str(exc)[len("request body:"):].replace("invalid JSON: ", "")
        raise BadRequest(f"request body is not valid JSON at {detail}", code="MalformedJSON") from None
