"""Notifications: a message per run event to each ``notify`` target, at most once, never failing
the chain.

Events: ``stepFailed`` (a step failed with no retry left, with why), and ``failed`` /
``succeeded`` / ``stopped`` when the run ended; ``failed`` names the steps that failed and why.
Each carries the GPU-hours spent (and lost in failed attempts). Formats: plain ``json`` (the
facts), ``text``, and the bots of DingTalk, Feishu/Lark, WeCom and Slack (:mod:`job_chain.hop.bots`:
their bodies, signatures and limits). A claim file in the run record makes each (run, round,
event, step) go out at most once however many jobs notice it — a resumed run that fails again
notifies again. A target's URL and secret written as ``{"env": "NAME"}`` are the values the run
record kept at run/resume. Sends to one bot are spread to keep its vendor's rate limit across
every process that sends (:mod:`job_chain.record.ratelimit`). A target that refuses or cannot be
reached is logged (scheme and host only: a bot's URL is a credential), recorded once in the run
record (status says so), and never stops or fails the run. Uses only the standard library: this
runs inside training images.

Whichever process notices the event sends it: a step's job in the cluster (``stepFailed``, the
end of the run), the machine running ``--advance watch``, or the machine where ``job-chain stop``
ran (``stopped``) — so every one of them must be able to reach the webhook. A redirect is never
followed: urllib would turn the POST into a GET without the message, and a redirect to another
host would hand the request to a host nobody configured.
"""

from __future__ import annotations

import shlex
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from job_chain.hop import bots
from job_chain.spec.model import Chain
from job_chain.spec.notify import env_name

TRIES = 3
TIMEOUT = 10.0
MAX_WAIT = 150.0  # seconds a sender waits for its bot's rate limit; past that the message is not sent


def message(chain: Chain, run_id: str, event: str, step: Optional[str], status: str,
            exit_code: Optional[int], failed: Optional[List[Dict[str, Any]]] = None, failure: Any = None,
            gpu: Optional[Tuple[float, float]] = None, note: str = "") -> Dict[str, Any]:
    """The facts of one event, and the command that shows more. ``failure``: why the step failed
    (stepFailed); ``gpu``: (GPU-hours, of which lost in failed attempts) of the step or run.
    ``title`` and ``lines`` (label, value) are what a bot's card shows; ``text`` is all in one line;
    ``note``: how the event came to be told, when not by the job it is about."""
    look = f"job-chain status {shlex.quote(chain.path)} --run {run_id}"
    if step is not None and event == "stepFailed":
        look = f"job-chain logs {shlex.quote(chain.path)} --run {run_id} --step {shlex.quote(step)}"
    where = f" step {step}" if step is not None else ""
    code = f", exit code {exit_code}" if exit_code is not None else ""
    text = f"job-chain: run {run_id} of {chain.path}:{where} {status}{code}"
    title = f"job-chain: {'step ' + step if step is not None else 'run'} {status}"
    lines: List[Tuple[str, str]] = [("Run", f"{run_id} of {chain.path}")]
    if step is not None:
        lines.append(("Step", f"{step} {status}{code}" + (f": {failure.summary()}" if failure is not None else "")))
    if failure is not None:
        text += f": {failure.summary()}"
    if failed:
        said = [f"{f['name']} failed" + (f" with exit code {f['exitCode']}" if f.get("exitCode") is not None else "")
                + (f" ({f.get('cause') or f['reason']})" if f.get("cause") or f.get("reason") else "") for f in failed]
        text += " — " + "; ".join(said)
        lines.extend(("Failed step", line) for line in said)
    if gpu is not None:
        hours = f"{gpu[0]:.2f}" + (f" ({gpu[1]:.2f} lost in failed attempts)" if gpu[1] else "")
        text += f". GPU-hours: {hours}"
        lines.append(("GPU-hours", hours))
    if note:
        text += f" ({note})"
        lines.append(("Note", note))
    text += f". See: {look}"
    facts: Dict[str, Any] = {"event": event, "chain": chain.path, "run": run_id, "step": step, "name": step,
                             "status": status, "exitCode": exit_code, "failedSteps": failed or [], "command": look,
                             "text": text, "title": title, "lines": lines}
    if failure is not None:
        facts["failure"] = failure.as_json()
    if note:
        facts["note"] = note
    if gpu is not None:
        facts["gpuHours"], facts["lostGpuHours"] = round(gpu[0], 4), round(gpu[1], 4)
    return facts


def console_link(base: str, chain_path: str, run_id: str) -> str:
    """The run's page in job-chain's console at ``base`` (``job-chain ui``)."""
    from job_chain.record.index import chain_id

    return f"{base.rstrip('/')}/run/{chain_id(chain_path)}/{run_id}"


class _Redirected(Exception):
    """A webhook answered with a redirect (3xx), which is not followed."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        from urllib.parse import urljoin, urlsplit

        target = urlsplit(urljoin(req.full_url, newurl))
        raise _Redirected(f"it answered {code}, a redirect to {target.scheme}://{target.netloc}/…, which is "
                          "not followed (put the final URL in notify)")


def send(url: str, data: bytes, content_type: str, fmt: str = "json",
         sleep: Callable[[float], None] = time.sleep) -> Optional[str]:
    """POST ``data``; None when the target took it, else why not (never the URL: it is a credential).
    A connection error or a 5xx is tried again (``TRIES`` in all); a refusal is not."""
    handlers = [_NoRedirects()] + ([urllib.request.ProxyHandler({})] if _loopback(url) else [])
    opener = urllib.request.build_opener(*handlers)
    why = "not sent"
    for attempt in range(TRIES):
        try:
            request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": content_type})
            with opener.open(request, timeout=TIMEOUT) as answer:
                return bots.refusal(fmt, answer.read(65536))
        except _Redirected as exc:  # the same answer on every try
            return str(exc)
        except urllib.error.HTTPError as exc:
            detail = exc.read(300).decode("utf-8", "replace").strip() if exc.fp is not None else ""
            why = f"it answered HTTP {exc.code}" + (f": {detail}" if detail else f" {exc.reason}")
            if exc.code < 500 and exc.code != 429:
                return why
        except ValueError:  # its text would quote the URL, a credential
            return "its URL is not a valid http:// or https:// URL"
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            why = f"it could not be reached: {reason}"
        if attempt < TRIES - 1:
            sleep(1.0 * (attempt + 1))
    return why


def post(url: str, payload: Dict[str, Any], log: Callable[[str], None],
         sleep: Callable[[float], None] = time.sleep) -> bool:
    """POST ``payload`` as JSON; whether it was taken (why not is logged)."""
    data, content_type = bots.encode("json", payload)
    why = send(url, data, content_type, "json", sleep)
    if why is not None:
        log(f"notification to {_safe(url)} not sent: {why}")
    return why is None


def _loopback(url: str) -> bool:
    from urllib.parse import urlsplit

    from job_chain.aihc.endpoint import is_loopback

    return is_loopback(urlsplit(url).hostname or "")


def _safe(url: str) -> str:
    """A webhook URL carries its secret in the path or query: show only scheme and host."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/…"


def describe_target(index: int, target: Mapping[str, Any]) -> str:
    """``notify[1] (dingtalk, $DING_URL)``: a target named without its secret."""
    url = target.get("url")
    name = env_name(url)
    shown = f"${name}" if name else _safe(str(url))
    return f"notify[{index}] ({target.get('format', 'json')}, {shown})"


class Sender:
    """Sends one message to each target: resolves its URL and secret (``secrets``: the values the
    run record kept), waits for its bot's rate limit (``records``: where that is kept), signs it
    at the moment it goes, and says what failed. ``clock``/``sleep`` are injected by tests."""

    def __init__(self, records: Any, secrets: Mapping[str, str], log: Callable[[str], None],
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
        self.records, self.secrets, self.log, self.clock, self.sleep = records, secrets, log, clock, sleep

    def value(self, setting: Any) -> Optional[str]:
        name = env_name(setting)
        if name is None:
            return setting if isinstance(setting, str) else None
        return self.secrets.get(name) or None

    def send(self, index: int, target: Mapping[str, Any], facts: Dict[str, Any]) -> Optional[str]:
        """None when target ``index`` took the message, else why not (a sentence without secrets)."""
        fmt = str(target.get("format") or "json")
        url, secret = self.value(target.get("url")), self.value(target.get("secret"))
        for key in ("url", "secret"):
            name = env_name(target.get(key))
            if name is not None and not self.secrets.get(name):
                return (f"${name} was not kept in the run record (run or resume the run with it set in the "
                        "environment)")
        if not url:
            return "it has no URL"
        if target.get("console"):
            facts = dict(facts, console=console_link(str(target["console"]), facts["chain"], facts["run"]))
        payload = bots.body(fmt, facts)
        windows = bots.windows(fmt)
        now = self.clock()
        if windows and self.records is not None:
            at = self.records.reserve_send(bots.bot_key(url), windows, now, MAX_WAIT)
            if at is None:
                return (f"its rate limit ({_limits(bots.RATE_LIMITS[fmt])}) would hold it more than {MAX_WAIT:.0f}s: "
                        "too many messages to this bot at once")
            if at > now:
                self.sleep(at - now)
                now = at
        signed_url, signed_payload = bots.signed(fmt, url, payload, secret, now)
        data, content_type = bots.encode(fmt, signed_payload)
        return send(signed_url, data, content_type, fmt, self.sleep)

    def send_all(self, targets: Sequence[Tuple[int, Mapping[str, Any]]], facts: Dict[str, Any],
                 failed: Optional[Callable[[int, str], None]] = None) -> int:
        """Send to each (index, target); the number that took it. ``failed(index, why)`` is told the rest."""
        took = 0
        for index, target in targets:
            try:
                why = self.send(index, target, facts)
            except Exception as exc:  # noqa: BLE001 (a notification never fails the advance; its text may quote a URL)
                why = f"it could not be sent ({type(exc).__name__})"
            if why is None:
                took += 1
                continue
            self.log(f"notification to {describe_target(index, target)} failed: {why}")
            if failed is not None:
                failed(index, why)
        return took


def _limits(windows: Any) -> str:
    return " and ".join(f"{n} a {'second' if w == 1 else 'minute' if w == 60 else f'{w:g}s'}" for w, n in windows)


def notify(chain: Chain, records: Any, run_id: str, event: str, *, step: Optional[str] = None,
           status: str = "", exit_code: Optional[int] = None, failed: Optional[List[Dict[str, Any]]] = None,
           failure: Any = None, gpu: Optional[Tuple[float, float]] = None, note: str = "",
           log: Optional[Callable[[str], None]] = None) -> int:
    """Send ``event`` to every target that asks for it, once per round; the number of targets that
    took it. A target that did not is recorded in the run record (the first time) and logged."""
    targets = [(i, t) for i, t in enumerate(chain.notify) if event in (t.get("on") or ["failed"])]
    if not targets:
        return 0
    round_ = records.round(run_id) if records is not None else 0
    if records is not None and not records.claim_notification(run_id, round_, event, step):
        return 0
    say = log or (lambda text: print(f"job-chain: {text}", file=sys.stderr, flush=True))
    facts = message(chain, run_id, event, step, status or event, exit_code, failed, failure, gpu, note)
    secrets = records.notify_secrets(run_id) if records is not None else {}

    def failed_once(index: int, why: str) -> None:
        if records is not None:
            records.record_notify_failure(run_id, index, f"{describe_target(index, chain.notify[index])}: "
                                                         f"the {event} message was not sent: {why}")

    return Sender(records, secrets, say).send_all(targets, facts, failed_once)


def send_samples(chain: Chain, secrets: Mapping[str, str], records: Any, event: str = "failed",
                 log: Optional[Callable[[str], None]] = None) -> List[Tuple[str, Optional[str]]]:
    """``job-chain notify test``: a sample ``event`` message to every target of ``chain`` (whatever
    its ``on``), as a run would send it (signed, within the bot's rate limit); for each target, its
    description and None when it took the message, else why not."""
    step = chain.steps[0].name if chain.steps else "train"
    run_id = "notify-test"
    if event in ("failed", "stepFailed"):
        from job_chain.failures.classify import Failure

        failure = Failure("user", words="a sample failure (notify test)")
        facts = message(chain, run_id, event, step if event == "stepFailed" else None, "failed", 1,
                        [{"name": step, "exitCode": 1, "cause": "a sample failure (notify test)"}]
                        if event == "failed" else None, failure if event == "stepFailed" else None, gpu=(1.5, 0.5))
    else:
        facts = message(chain, run_id, event, None, event, None, gpu=(1.5, 0.0))
    facts["title"] = "[test] " + facts["title"]
    facts["text"] = "[test] " + facts["text"]
    facts["test"] = True
    results: List[Tuple[str, Optional[str]]] = []
    sender = Sender(records, secrets, log or (lambda _: None))
    for index, target in enumerate(chain.notify):
        results.append((describe_target(index, target), sender.send(index, target, facts)))
    return results
