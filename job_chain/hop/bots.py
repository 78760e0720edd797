"""What each kind of notify target is sent: its body, its signature, its size and rate limits, and
whether its answer means the message was taken.

From each vendor's documentation:

- **DingTalk** custom robot (自定义机器人), 加签: ``timestamp`` (ms) and ``sign`` in the query,
  ``sign = urlencode(base64(HMAC-SHA256(key=secret, msg=timestamp + "\\n" + secret)))``; at most
  20 messages a minute per robot; answers ``{"errcode": 0}`` when it took the message.
- **Feishu/Lark** custom bot (自定义机器人), 签名校验: ``timestamp`` (s) and ``sign`` in the JSON body,
  ``sign = base64(HMAC-SHA256(key=timestamp + "\\n" + secret, msg=""))`` (that string is the *key*,
  the message is empty); 5 requests a second and 100 a minute per bot, a body of at most 20 KB;
  answers ``{"code": 0}`` (``{"StatusCode": 0}`` from older bots).
- **WeCom** group robot (群机器人): no signature, the ``key`` in the URL is the credential; 20
  messages a minute; markdown ``content`` of at most 4096 bytes; answers ``{"errcode": 0}``.
- **Slack** incoming webhook: no signature (the URL is the credential); about one message a second;
  ``text`` is cut by Slack past 40,000 characters; answers ``ok`` (a 4xx with why otherwise).

A message longer than its vendor takes is shortened (the middle lines; the title and the command
that shows more are kept), never refused. Standard library only: this runs inside training images.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

# per format: (seconds, at most this many messages in any such span), for every bot of that kind
RATE_LIMITS: Dict[str, Tuple[Tuple[float, int], ...]] = {
    "dingtalk": ((60.0, 20),),
    "feishu": ((1.0, 5), (60.0, 100)),
    "wecom": ((60.0, 20),),
    "slack": ((1.0, 1),),
}
MARGIN = 0.25  # seconds each window is widened by: a message reaches the bot a little after it is sent


def windows(fmt: str) -> Tuple[Tuple[float, int], ...]:
    """The windows a sender keeps for ``fmt``: the vendor's, each :data:`MARGIN` wider."""
    return tuple((w + MARGIN, n) for w, n in RATE_LIMITS.get(fmt, ()))


# the most UTF-8 bytes of a message's text each takes (below the vendor's limit: room for the JSON)
TEXT_BYTES: Dict[str, int] = {"dingtalk": 18000, "feishu": 18000, "wecom": 4000, "slack": 39000}
SHORTENED = "… (shortened)"


def dingtalk_sign(secret: str, timestamp_ms: int) -> str:
    """DingTalk's ``sign`` query value for ``timestamp_ms`` (already URL-encoded)."""
    digest = hmac.new(secret.encode("utf-8"), f"{timestamp_ms}\n{secret}".encode(), hashlib.sha256).digest()
    return urllib.parse.quote_plus(base64.b64encode(digest).decode("ascii"))


def feishu_sign(secret: str, timestamp_s: int) -> str:
    """Feishu/Lark's ``sign`` body value for ``timestamp_s``: the string is the HMAC's key."""
    digest = hmac.new(f"{timestamp_s}\n{secret}".encode(), b"", hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def _clean(text: str) -> str:
    """Text any bot takes: a lone surrogate (a path that is not UTF-8) becomes U+FFFD."""
    return text.encode("utf-8", "replace").decode("utf-8")


def shorten(lines: List[str], head: int, tail: int, limit: int, sep: str = "\n") -> str:
    """``lines`` joined by ``sep`` in at most ``limit`` UTF-8 bytes: the first ``head`` and last
    ``tail`` lines are kept whole, the middle is cut (on a character) and marked :data:`SHORTENED`."""
    joined = sep.join(lines)
    if len(joined.encode("utf-8")) <= limit:
        return joined
    first, middle, last = lines[:head], lines[head:len(lines) - tail], lines[len(lines) - tail:]
    kept = sep.join(first + [""] + last).encode("utf-8")
    room = limit - len(kept) - len(SHORTENED.encode("utf-8")) - len(sep.encode("utf-8"))
    cut = sep.join(middle).encode("utf-8")[:max(room, 0)].decode("utf-8", "ignore")
    out = sep.join(first + [cut + SHORTENED] + last)
    while len(out.encode("utf-8")) > limit:  # the kept lines alone are too long: cut from the end
        out = out.encode("utf-8")[:limit - len(SHORTENED.encode("utf-8"))].decode("utf-8", "ignore") + SHORTENED
    return out


def card(facts: Dict[str, Any], fmt: str) -> Tuple[str, List[str]]:
    """(title, lines) of the readable message, in the markup ``fmt`` shows: the lines are the
    outcome, the failed steps and why, GPU-hours, the command that shows more, the console link."""
    bold = (lambda s: f"*{s}*") if fmt == "slack" else (lambda s: f"**{s}**")
    title = _clean(facts["title"])
    lines = [bold(title)]
    for label, value in facts["lines"]:
        lines.append(f"{bold(label)}: {_clean(value)}" if fmt != "feishu" else f"{label}: {_clean(value)}")
    look = _clean(facts["command"])
    lines.append(f"{bold('See')}: `{look}`" if fmt != "feishu" else f"See: {look}")
    if facts.get("console"):
        link = facts["console"]
        lines.append(f"<{link}|Open the run in the console>" if fmt == "slack"
                     else f"[Open the run in the console]({link})" if fmt != "feishu" else link)
    return title, lines


def body(fmt: str, facts: Dict[str, Any]) -> Any:
    """The JSON body for ``fmt`` (the text itself for ``text``), shortened to what the vendor takes."""
    if fmt == "json":
        return facts
    if fmt == "text":
        return _clean(facts["text"])
    title, lines = card(facts, fmt)
    tail = 2 if facts.get("console") else 1
    if fmt == "dingtalk":  # markdown: a line break needs an empty line
        return {"msgtype": "markdown", "markdown": {"title": title[:64],
                                                    "text": shorten(lines, 1, tail, TEXT_BYTES[fmt], "\n\n")}}
    if fmt == "wecom":
        return {"msgtype": "markdown", "markdown": {"content": shorten(lines, 1, tail, TEXT_BYTES[fmt])}}
    if fmt == "slack":
        return {"text": shorten(lines, 1, tail, TEXT_BYTES[fmt])}
    # feishu: a rich-text post, one paragraph per line, the console as a link
    text = shorten(lines[1:], 0, tail, TEXT_BYTES[fmt])
    paragraphs: List[List[Dict[str, str]]] = []
    for line in text.split("\n"):
        if facts.get("console") and line == facts["console"]:
            paragraphs.append([{"tag": "a", "text": "Open the run in the console", "href": line}])
        else:
            paragraphs.append([{"tag": "text", "text": line}])
    return {"msg_type": "post", "content": {"post": {"zh_cn": {"title": title, "content": paragraphs}}}}


def signed(fmt: str, url: str, payload: Any, secret: Optional[str], now: float) -> Tuple[str, Any]:
    """(URL, body) with the signature ``fmt`` takes, made at ``now`` (epoch seconds)."""
    if not secret:
        return url, payload
    if fmt == "dingtalk":
        ms = int(now * 1000)
        return url + ("&" if "?" in url else "?") + f"timestamp={ms}&sign={dingtalk_sign(secret, ms)}", payload
    if fmt == "feishu":
        seconds = int(now)
        return url, dict(payload, timestamp=str(seconds), sign=feishu_sign(secret, seconds))
    return url, payload


def encode(fmt: str, payload: Any) -> Tuple[bytes, str]:
    """(request body, its Content-Type)."""
    if fmt == "text":
        return str(payload).encode("utf-8"), "text/plain; charset=utf-8"
    if fmt == "json":  # \\u escapes: any text, even a lone surrogate in a path
        return json.dumps(payload).encode("ascii"), "application/json"
    return json.dumps(payload, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8"


def refusal(fmt: str, answer: bytes) -> Optional[str]:
    """Why a bot that answered 2xx did not take the message (its own error code), or None."""
    if fmt not in ("dingtalk", "feishu", "wecom"):
        return None
    try:
        data = json.loads(answer.decode("utf-8", "replace") or "{}")
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    key = "errcode" if fmt != "feishu" else ("code" if "code" in data else "StatusCode")
    code = data.get(key, 0)
    if code in (0, None):
        return None
    why = data.get("errmsg") or data.get("msg") or data.get("StatusMessage") or "no reason given"
    return f"the {fmt} bot refused it: {str(why)[:300]} ({key} {code})"


def bot_key(url: str) -> str:
    """A bot's name for its rate-limit state: a digest of its URL (never the URL: it is a credential)."""
    return hashlib.sha256(url.encode("utf-8", "replace")).hexdigest()[:24]
