"""Who may use the console: a URL token (as Jupyter does), CSRF and Host checks.

- Every request must carry the token, on loopback too (on a shared login node any local user
  can reach 127.0.0.1): ``?token=`` once, traded for an HttpOnly cookie. ``--no-token`` drops
  this on loopback only, for those who ask.
- Browsers send a host's cookies to every port of it, so the cookie is named for its port and
  holds a value derived from the token, never the token: another service on another port sees
  a value only this console accepts, and never learns the URL's token.
- ``/?token=`` redirects only to a path of this console (``//evil.example`` is not one).
- Every request's ``Host`` must name this console (DNS rebinding cannot reach it from a page).
- Every POST must carry the per-process CSRF token in the ``X-CSRF-Token`` header (which a
  cross-site form cannot set) and, when the browser sends one, an ``Origin`` matching the Host.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Awaitable, Callable, Optional, Set
from urllib.parse import urlencode, urlsplit

from fastapi import Request
from fastapi.responses import PlainTextResponse, RedirectResponse, Response

from job_chain.aihc.endpoint import is_loopback
from job_chain.errors import UsageError

COOKIE = "job_chain_ui_"  # + the port: consoles on other ports keep their own cookie
CSRF_HEADER = "x-csrf-token"


def local_path(path: str) -> str:
    """``path`` as a path of this site: ``//evil.example/x`` (another host, to a browser) -> ``/evil.example/x``."""
    return "/" + path.lstrip("/\\")


def same(a: Optional[str], b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode("utf-8", "replace"), b.encode("utf-8"))


def refuse_no_token_off_loopback(bind: str) -> None:
    if not is_loopback(bind):
        raise UsageError(f"--no-token is for a loopback --bind only: on {bind} anyone who can reach the "
                         "port could submit chains; keep the token (the URL printed first carries it)")


READ_ONLY = ("refused: this console was started with --no-token, so anyone on this machine can open it and it "
             "only shows runs; to submit, stop, resume or delete, start it without --no-token and open the URL "
             "it prints (it carries the token)")


class Guard:
    """The console's access rules; ``token`` is None only with ``--no-token`` (on loopback)."""

    def __init__(self, token: Optional[str], hosts: Set[str], port: int = 0, *, read_only: bool = False) -> None:
        self.token = token
        self.read_only = read_only  # --no-token: pages only; nothing that submits, stops or deletes
        self.hosts = hosts  # acceptable Host headers ("127.0.0.1:8780", ...); empty: any
        self.csrf = secrets.token_urlsafe(24)
        self.cookie = f"{COOKIE}{port}"
        # what the cookie holds: bound to this token (a restarted console's old cookies fail)
        self.cookie_value = hmac.new((token or "").encode("utf-8"), b"job-chain console cookie",
                                     hashlib.sha256).hexdigest()

    @classmethod
    def for_bind(cls, bind: str, port: int, *, token: bool = True) -> Guard:
        """The rules for a console on ``bind:port``; ``token=False`` (``--no-token``) only on loopback,
        and read-only: anyone on the machine gets in, so nobody may submit, stop, resume or delete
        through it (that would run commands as the console's user)."""
        if not token:
            refuse_no_token_off_loopback(bind)
        hosts: Set[str] = set()
        if is_loopback(bind):
            named = f"[{bind}]" if ":" in bind else bind
            hosts = {f"{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]", named)}
        return cls(secrets.token_urlsafe(24) if token else None, hosts, port, read_only=not token)

    def host_ok(self, request: Request) -> bool:
        return not self.hosts or request.headers.get("host", "") in self.hosts

    def origin_ok(self, request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is None:
            return True
        return urlsplit(origin).netloc == request.headers.get("host", "")

    def csrf_ok(self, request: Request) -> bool:
        """Pages send the token in a header (htmx's hx-headers): a foreign form cannot set one."""
        return same(request.headers.get(CSRF_HEADER), self.csrf) and self.origin_ok(request)

    async def __call__(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if not self.host_ok(request):
            return PlainTextResponse("this console answers only to the address it printed", status_code=403)
        if self.token is not None:
            given = request.query_params.get("token")
            if same(given, self.token):
                # the token leaves the address bar (and browser history) at once; the cookie carries it
                query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
                target = local_path(request.url.path) + (f"?{query}" if query else "")
                response: Response = RedirectResponse(target, status_code=303)
                response.set_cookie(self.cookie, self.cookie_value, httponly=True, samesite="strict")
                return response
            if not same(request.cookies.get(self.cookie), self.cookie_value):
                return PlainTextResponse("open the console with the URL it printed (it carries ?token=...)",
                                         status_code=403)
        if request.method not in ("GET", "HEAD", "OPTIONS") and self.read_only:
            return PlainTextResponse(READ_ONLY, status_code=403)
        if request.method not in ("GET", "HEAD", "OPTIONS") and not self.csrf_ok(request):
            return PlainTextResponse("refused: missing or wrong CSRF token, or a foreign Origin "
                                     "(reload the page and try again)", status_code=403)
        return await call_next(request)
