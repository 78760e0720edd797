"""A loopback stand-in for the DingTalk, Feishu/Lark, WeCom and Slack bots, over real HTTP.

It checks what each vendor documents it checks — the signature (computed here from the vendor's
algorithm, not with job-chain's code), the timestamp's age, the token or key in the URL, the size
of a WeCom markdown message — and answers the way the vendor does: DingTalk and WeCom ``{"errcode":
0}``, Feishu ``{"code": 0}``, Slack ``ok``, each vendor's own error code when a check fails.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List

DING_TOKEN, DING_SECRET = "ding-token-5f2c", "SECding-secret-91ab"
FEISHU_HOOK, FEISHU_SECRET = "feishu-hook-77de", "feishu-secret-0c3f"
WECOM_KEY = "wecom-key-4a6e"
SLACK_PATH = "T0001/B0001/slacktoken8899"


def ding_sign(secret: str, timestamp: str) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}\n{secret}".encode(), hashlib.sha256)
    return base64.b64encode(mac.digest()).decode()  # the query carries it URL-encoded; parse_qs decodes it


def feishu_sign(secret: str, timestamp: str) -> str:
    mac = hmac.new(f"{timestamp}\n{secret}".encode(), b"", hashlib.sha256)
    return base64.b64encode(mac.digest()).decode()


class Bots:
    """Every request as (vendor, parsed body, arrival time); ``refuse`` makes every answer an error."""

    def __init__(self) -> None:
        self.received: List[Dict[str, Any]] = []
        self.rejected: List[Dict[str, Any]] = []
        bots = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                at = time.time()
                url = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(url.query)
                body = json.loads(raw.decode("utf-8"))
                vendor, status, answer = bots.check(url.path, query, body, at)
                (bots.received if status == 200 and _ok(answer) else bots.rejected).append(
                    {"vendor": vendor, "body": body, "at": at, "query": query, "answer": answer})
                data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.urls = {"dingtalk": f"{base}/robot/send?access_token={DING_TOKEN}",
                     "feishu": f"{base}/open-apis/bot/v2/hook/{FEISHU_HOOK}",
                     "wecom": f"{base}/cgi-bin/webhook/send?key={WECOM_KEY}",
                     "slack": f"{base}/services/{SLACK_PATH}"}
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def check(self, path: str, query: Dict[str, List[str]], body: Dict[str, Any], at: float) -> Any:
        if path == "/robot/send":
            ts, sign = (query.get("timestamp") or [""])[0], (query.get("sign") or [""])[0]
            if query.get("access_token") != [DING_TOKEN]:
                return "dingtalk", 200, {"errcode": 300001, "errmsg": "token is not exist"}
            if not ts.isdigit() or abs(int(ts) / 1000 - at) > 3600 or sign != ding_sign(DING_SECRET, ts):
                return "dingtalk", 200, {"errcode": 310000, "errmsg": "sign not match"}
            return "dingtalk", 200, {"errcode": 0, "errmsg": "ok"}
        if path == f"/open-apis/bot/v2/hook/{FEISHU_HOOK}":
            ts, sign = str(body.get("timestamp") or ""), body.get("sign")
            if not ts.isdigit() or abs(int(ts) - at) > 3600 or sign != feishu_sign(FEISHU_SECRET, ts):
                return "feishu", 200, {"code": 19021, "data": {},
                                       "msg": "sign match fail or timestamp is not within one hour from current time"}
            return "feishu", 200, {"code": 0, "data": {}, "msg": "success"}
        if path == "/cgi-bin/webhook/send":
            if query.get("key") != [WECOM_KEY]:
                return "wecom", 200, {"errcode": 93000, "errmsg": "invalid webhook url"}
            content = (body.get("markdown") or {}).get("content", "")
            if len(content.encode("utf-8")) > 4096:
                return "wecom", 200, {"errcode": 40058, "errmsg": "markdown.content exceed max length 4096"}
            return "wecom", 200, {"errcode": 0, "errmsg": "ok"}
        if path == f"/services/{SLACK_PATH}":
            return "slack", 200, "ok"
        return "unknown", 404, "no_service"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _ok(answer: Any) -> bool:
    if isinstance(answer, str):
        return answer == "ok"
    return answer.get("errcode", answer.get("code", 0)) == 0
