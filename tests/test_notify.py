"""Issue 18 item 9: a webhook's redirect is never followed, least of all to another host."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Iterator, List, Tuple

import pytest

from job_chain.hop.notify import post


class Hook:
    """A loopback webhook that records each request and answers ``status`` (+ ``Location``)."""

    def __init__(self, status: int = 200, location: str = "") -> None:
        self.requests: List[Tuple[str, bytes]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                hook.requests.append((self.command, self.rfile.read(length)))
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook/SECRET-PATH"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def elsewhere() -> Iterator[Hook]:
    hook = Hook()
    yield hook
    hook.close()


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_webhook_redirect_to_another_host_is_not_followed(elsewhere: Hook, code: int) -> None:
    other = elsewhere.url.replace("127.0.0.1", "localhost")  # another host name, same machine
    redirecting = Hook(code, location=other)
    said: List[str] = []
    try:
        assert post(redirecting.url, {"text": "run failed"}, said.append, sleep=lambda _: None) is False
    finally:
        redirecting.close()
    assert len(redirecting.requests) == 1  # asked once: a redirect is no transient failure
    assert elsewhere.requests == []
    assert len(said) == 1 and f"it answered {code}, a redirect to http://localhost:" in said[0]
    assert "SECRET-PATH" not in said[0]


def test_a_webhook_that_answers_2xx_gets_the_message(elsewhere: Hook) -> None:
    assert post(elsewhere.url, {"text": "run failed"}, print) is True
    assert [(m, json.loads(b)) for m, b in elsewhere.requests] == [("POST", {"text": "run failed"})]
