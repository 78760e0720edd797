"""Webhook notifications: a POST per run event, at most once, never failing the chain.

Events: ``stepFailed`` (a step failed with no retry left, with why), and ``failed`` /
``succeeded`` / ``stopped`` when the run ended; ``failed`` names the steps that failed and why.
Each carries the GPU-hours spent (and lost in failed attempts). Formats: plain ``json``,
or the text-message bodies of Feishu, DingTalk, WeCom and Slack incoming webhooks. A claim file
in the run record makes each (run, round, event, step) go out at most once however many jobs
notice it — a resumed run that fails again notifies again; a webhook that keeps failing is
logged and given up after a few tries. Uses only the standard library: this runs inside
training images.

Whichever process notices the event sends it: a step's job in the cluster (``stepFailed``, the
end of the run), the machine running ``--advance watch``, or the machine where ``job-chain stop``
ran (``stopped``) — so every one of them must be able to reach the webhook. A redirect is never
followed: urllib would turn the POST into a GET without the message, and a redirect to another
host would hand the request to a host nobody configured.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Tuple

from job_chain.spec.model import Chain

TRIES = 3
TIMEOUT = 10.0


def message(chain: Chain, run_id: str, event: str, step: Optional[str], status: str,
            exit_code: Optional[int], failed: Optional[List[Dict[str, Any]]] = None, failure: Any = None,
            gpu: Optional[Tuple[float, float]] = None) -> Dict[str, Any]:
    """The facts of one event, and the command that shows more. ``failure``: why the step failed
    (stepFailed); ``gpu``: (GPU-hours, of which lost in failed attempts) of the step or run."""
    look = f"job-chain status {shlex.quote(chain.path)} --run {run_id}"
    if step is not None and event == "stepFailed":
        look = f"job-chain logs {shlex.quote(chain.path)} --run {run_id} --step {shlex.quote(step)}"
    where = f" step {step}" if step is not None else ""
    code = f", exit code {exit_code}" if exit_code is not None else ""
    text = f"job-chain: run {run_id} of {chain.path}:{where} {status}{code}"
    if failure is not None:
        text += f": {failure.summary()}"
    if failed:
        text += " — " + "; ".join(
            f"{f['name']} failed" + (f" with exit code {f['exitCode']}" if f.get("exitCode") is not None else "")
            + (f" ({f.get('cause') or f['reason']})" if f.get("cause") or f.get("reason") else "") for f in failed)
    if gpu is not None:
        text += f". GPU-hours: {gpu[0]:.2f}" + (f" ({gpu[1]:.2f} lost in failed attempts)" if gpu[1] else "")
    text += f". See: {look}"
    facts: Dict[str, Any] = {"event": event, "chain": chain.path, "run": run_id, "step": step, "name": step,
                             "status": status, "exitCode": exit_code, "failedSteps": failed or [], "command": look,
                             "text": text}
    if failure is not None:
        facts["failure"] = failure.as_json()
    if gpu is not None:
        facts["gpuHours"], facts["lostGpuHours"] = round(gpu[0], 4), round(gpu[1], 4)
    return facts


def body(fmt: str, facts: Dict[str, Any]) -> Dict[str, Any]:
    text = facts["text"]
    if fmt == "feishu":
        return {"msg_type": "text", "content": {"text": text}}
    if fmt in ("dingtalk", "wecom"):
        return {"msgtype": "text", "text": {"content": text}}
    if fmt == "slack":
        return {"text": text}
    return facts


class _Redirected(Exception):
    """A webhook answered with a redirect (3xx), which is not followed."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        from urllib.parse import urljoin, urlsplit

        target = urlsplit(urljoin(req.full_url, newurl))
        raise _Redirected(f"it answered {code}, a redirect to {target.scheme}://{target.netloc}/…, which is "
                          "not followed (put the final URL in notify)")


def post(url: str, payload: Dict[str, Any], log: Callable[[str], None],
         sleep: Callable[[float], None] = time.sleep) -> bool:
    data = json.dumps(payload).encode("ascii")  # \u escapes: any text, even a lone surrogate in a path
    handlers = [_NoRedirects()] + ([urllib.request.ProxyHandler({})] if _loopback(url) else [])
    opener = urllib.request.build_opener(*handlers)
    for attempt in range(TRIES):
        try:
            request = urllib.request.Request(url, data=data, method="POST",
                                             headers={"Content-Type": "application/json"})
            with opener.open(request, timeout=TIMEOUT) as answer:
                if 200 <= answer.status < 300:
                    return True
        except _Redirected as exc:  # the same answer on every try
            log(f"notification to {_safe(url)} not sent: {exc}")
            return False
        except (urllib.error.URLError, OSError, ValueError) as exc:
            if attempt == TRIES - 1:
                log(f"notification to {_safe(url)} failed: {exc}")
        if attempt < TRIES - 1:
            sleep(1.0 * (attempt + 1))
    return False


def _loopback(url: str) -> bool:
    from urllib.parse import urlsplit

    from job_chain.aihc.endpoint import is_loopback

    return is_loopback(urlsplit(url).hostname or "")


def _safe(url: str) -> str:
    """A webhook URL carries its secret in the path or query: show only scheme and host."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/…"


def notify(chain: Chain, records: Any, run_id: str, event: str, *, step: Optional[str] = None,
           status: str = "", exit_code: Optional[int] = None, failed: Optional[List[Dict[str, Any]]] = None,
           failure: Any = None, gpu: Optional[Tuple[float, float]] = None,
           log: Optional[Callable[[str], None]] = None) -> int:
    """Send ``event`` to every hook that asks for it, once per round; the number of hooks that took it."""
    hooks: List[Dict[str, Any]] = [h for h in chain.notify if event in (h.get("on") or ["failed"])]
    if not hooks:
        return 0
    round_ = records.round(run_id) if records is not None else 0
    if records is not None and not records.claim_notification(run_id, round_, event, step):
        return 0
    say = log or (lambda text: print(f"job-chain: {text}", file=sys.stderr, flush=True))
    facts = message(chain, run_id, event, step, status or event, exit_code, failed, failure, gpu)
    return sum(post(h["url"], body(h.get("format", "json"), facts), say) for h in hooks)
