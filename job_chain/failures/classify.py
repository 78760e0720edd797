"""Match log tails against the failure catalogue: which class, which signature, which line.

Every pod's tail is searched with the user's ``failureRules`` first, then the catalogue of
:mod:`job_chain.failures.signatures`. The first root cause wins: the best tier (rules, verdicts,
root causes, consequences, generic errors), then the earliest line — by the time stamps in
the lines when every candidate has one (PyTorch's ``[E1206 18:44:12.7…]``, ISO dates), else by
pod order (the pod that failed first comes first) and position. job-chain's own messages
(``job-chain: …``) never match anything but the watchdog's verdicts.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import Any, Dict, Iterable, List, Optional, Pattern, Sequence, Tuple

from job_chain.engine.jobs import HUNG, RESTARTED
from job_chain.failures.signatures import CLASSES, SIGNATURES, VERDICT
from job_chain.util.user_regex import PatternTimeout, compile_user, first_matches

TAIL_BYTES = 256 * 1024  # of each pod's log: failures are worded at the end
LINE_CHARS = 500  # of the matching line, kept and shown
RULE_TIER = -1  # the user's rules come before every built-in signature
_OWN = "job-chain: "
_LOOKBACK = 60  # lines before a match searched for a time stamp (a traceback has none of its own)
_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")
_GLOG = re.compile(r"\b[IWEF](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{1,9})")  # [E321 02:07:08.408…] is March 21


@dataclass(frozen=True)
class Failure:
    """Why one attempt failed: ``cls`` (infra, oom, hang, timeout, user, platform, unknown or a user class),
    the signature that matched, its line, the pod whose log held it, what to do, and the
    signature's phrase (``killed after 6h (timeout)``) when it has one."""

    cls: str
    signature: str = ""
    line: str = ""
    pod: str = ""
    explanation: str = ""
    words: str = ""

    def summary(self) -> str:
        """``infra (nccl-watchdog-timeout on pod train-worker-0)``, ``killed after 6h (timeout)``."""
        where = f" on pod {self.pod}" if self.pod else ""
        if self.words:
            return f"{self.words}{where}"
        if not self.signature:
            return f"{self.cls} (no known signature in the logs)"
        return f"{self.cls} ({self.signature}{where})"

    def redacted(self, secrets: Iterable[str]) -> Failure:
        """This failure with every known secret hidden in its line and words (the line is a log's:
        ``status``, ``runs --json``, webhooks and the console show it as the log view would)."""
        from job_chain.util.redaction import redact

        known = [s for s in secrets if s]
        if not known:
            return self
        return replace(self, line=redact(self.line, known), words=redact(self.words, known))

    def as_json(self) -> Dict[str, Any]:
        data = {"class": self.cls, "signature": self.signature or None, "line": self.line or None,
                "pod": self.pod or None}
        if self.words:
            data["words"] = self.words
        return data

    def to_record(self) -> Dict[str, Any]:
        return dict(self.as_json(), explanation=self.explanation or None)

    @classmethod
    def from_record(cls, data: Any) -> Optional[Failure]:
        if not isinstance(data, dict) or not isinstance(data.get("class"), str):
            return None
        return cls(data["class"], str(data.get("signature") or ""), str(data.get("line") or ""),
                   str(data.get("pod") or ""), str(data.get("explanation") or ""), str(data.get("words") or ""))


@dataclass(frozen=True)
class _Rule:
    name: str
    cls: str
    tier: int
    regex: Pattern[str]
    explanation: str
    words: str = ""


_BUILTIN: List[_Rule] = []


def builtin_rules() -> List[_Rule]:
    """The catalogue, compiled once."""
    if not _BUILTIN:
        _BUILTIN.extend(_Rule(s.name, s.cls, s.tier, re.compile(s.pattern, re.MULTILINE), s.explanation, s.words)
                        for s in SIGNATURES)
    return _BUILTIN


def _user_rules(user_rules: Iterable[Any]) -> List[_Rule]:
    """The user's rules (:class:`~job_chain.spec.model.FailureRule`), run by :mod:`job_chain.util.user_regex`."""
    return [_Rule(r.name, r.cls, RULE_TIER, compile_user(r.pattern, multiline=True),
                  r.explanation or f"matched the step's own failure rule {r.name}") for r in user_rules]


@dataclass(frozen=True)
class _Hit:
    rule: _Rule
    order: int  # the rule's place in its list (a tie on one line goes to the earlier rule)
    pod_rank: int
    line_no: int
    line: str
    when: Optional[float]
    groups: Dict[str, str]


def _stamp(text: str) -> Optional[float]:
    """Seconds within the year of a line's time stamp (year ignored: logs of one failure share it)."""
    found = _GLOG.search(text)
    if found:
        month, day, hour, minute, second, frac = found.groups()
    else:
        iso = _ISO.search(text)
        if not iso:
            return None
        _, month, day, hour, minute, second, frac = iso.groups()
    return (((int(month) * 32 + int(day)) * 24 + int(hour)) * 60 + int(minute)) * 60 + int(second) \
        + float(f"0.{frac or 0}")


def _hit(rule: _Rule, order: int, pod_rank: int, text: str, at: int, groups: Dict[str, str]) -> _Hit:
    """The hit of ``rule`` whose match starts at ``at`` in one pod's text."""
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    line = text[start:len(text) if end < 0 else end]
    return _Hit(rule, order, pod_rank, text.count("\n", 0, start), line.strip()[:LINE_CHARS],
                _when(text, start, line), groups)


def _scan(text: str, pod_rank: int, rules: Sequence[_Rule], first: int = 0) -> List[_Hit]:
    """Each built-in rule's first match in one pod's text (skipping job-chain's own lines)."""
    hits = []
    for order, rule in enumerate(rules, start=first):
        pos = 0
        while True:
            found = rule.regex.search(text, pos)
            if found is None:
                break
            end = text.find("\n", found.start())
            end = len(text) if end < 0 else end
            line = text[text.rfind("\n", 0, found.start()) + 1:end]
            if line.lstrip().startswith(_OWN) and rule.tier != VERDICT:
                pos = end + 1
                continue
            hits.append(_hit(rule, order, pod_rank, text, found.start(),
                             {k: v for k, v in found.groupdict().items() if v}))
            break
    return hits


def _scan_user(logs: Sequence[Tuple[str, str]], rules: Sequence[_Rule],
               seconds: Optional[float]) -> Tuple[List[_Hit], str]:
    """The user's rules' first matches in every pod's text, in bounded time; when they ran out of it,
    no hits and the sentence that says so."""
    if not rules:
        return [], ""
    try:
        found = first_matches([r.regex.pattern for r in rules], [text for _, text in logs], _OWN, seconds)
    except PatternTimeout as exc:
        return [], f"the step's failureRules were not applied: they {exc}"
    hits = []
    for order, (rule, per_pod) in enumerate(zip(rules, found)):
        for rank, hit in enumerate(per_pod):
            if hit is not None:
                hits.append(_hit(rule, order, rank, logs[rank][1], hit[0], hit[1]))
    return hits, ""


def _when(text: str, start: int, line: str) -> Optional[float]:
    own = _stamp(line)
    if own is not None:
        return own
    before = text[max(0, start - 200 * _LOOKBACK):start].splitlines()[-_LOOKBACK:]
    for earlier in reversed(before):
        found = _stamp(earlier)
        if found is not None:
            return found
    return None


def classify(logs: Sequence[Tuple[str, str]], user_rules: Iterable[Any] = (),
             exit_code: Optional[int] = None, seconds: Optional[float] = None) -> Failure:
    """The first root cause in ``logs`` — (pod name, log tail) pairs, the pod that failed first
    first — or ``unknown`` when nothing matched. The user's rules run in at most ``seconds``
    (:data:`job_chain.util.user_regex.SECONDS`); when they do not finish, the catalogue decides
    and the explanation says the rules were not applied."""
    own = _user_rules(user_rules)
    hits, skipped = _scan_user(logs, own, seconds)
    builtin = builtin_rules()
    for rank, (_, text) in enumerate(logs):
        hits += _scan(text, rank, builtin, first=len(own))
    failure = _best(logs, hits, exit_code)
    if skipped:
        failure = replace(failure, explanation=f"{failure.explanation} ({skipped})".lstrip())
    return failure


def _best(logs: Sequence[Tuple[str, str]], hits: List[_Hit], exit_code: Optional[int]) -> Failure:
    if not hits:
        return Failure("unknown", explanation=_unknown_explanation(exit_code))
    tier = min(h.rule.tier for h in hits)
    top = [h for h in hits if h.rule.tier == tier]
    if all(h.when is not None for h in top):
        best = min(top, key=lambda h: (h.when, h.pod_rank, h.line_no, h.order))
    else:
        best = min(top, key=lambda h: (h.pod_rank, h.line_no, h.order))
    words = ""
    if best.rule.words:
        try:
            words = best.rule.words.format(**best.groups)
        except (KeyError, IndexError):
            words = ""
    return Failure(best.rule.cls, best.rule.name, best.line, logs[best.pod_rank][0], best.rule.explanation, words)


# the platform's Warning events that say why a job could not run (Kubernetes' and AIHC's reasons), and
# what to do; a pod's own exit (``Error … exitCode: 1``) and AIHC's fault-tolerance notice say nothing new
PLATFORM_EVENTS = {
    "FailedMount": "a datasource could not be mounted: do what the event says (create the directory, check the "
                   "storage instance and the mountPath), then resume the run",
    "FailedAttachVolume": "a volume could not be attached: check the datasource, then resume the run",
    "FailedScheduling": "no node could take the job (the pool's quota or free GPUs): free resources or ask for "
                        "fewer, then resume the run",
    "ErrImagePull": "the image could not be pulled: check its name and tag and the registry's credentials, then "
                    "resume the run",
    "ImagePullBackOff": "the image could not be pulled: check its name and tag and the registry's credentials, then "
                        "resume the run",
    "Failed": "the container could not be started (the event says why): fix it, then resume the run",
    "FailedCreatePodSandBox": "the pod could not be created on its node: retry, on other nodes if it repeats",
    "FailedLaunch": "the job could not be started (the event says why): fix it, then resume the run",
    "Evicted": "the node evicted the pod (it ran out of memory or disk): retry, on other nodes if it repeats",
}
# (a hang is a cause only when it ended the job's last run: :func:`engine_hang` decides that)
NOT_A_CAUSE = frozenset({"Error", "FailedToStartFaultTolerance", "JobFailed", "ExitedWithCode", RESTARTED, HUNG})
EVENT_CHARS = 300  # of an event's message, kept and shown


# an engine's verdict on a job it ended itself, as its event's kind (slurm/engine.py: ``Job`` and Slurm's state),
# and the catalogue's signature for it: what the job's log says when slurmstepd could write it
VERDICT_EVENTS = {"JobTimeout": "slurm-time-limit", "JobNodeFail": "slurm-node-fail", "JobBootFail": "slurm-node-fail",
                  "JobPreempted": "slurm-preempted", "JobOutOfMemory": "slurm-oom-kill",
                  "JobCancelled": "slurm-cancelled"}


def verdict_cause(events: Iterable[Any]) -> Optional[Failure]:
    """When no log line matched: the cause the engine's own verdict names (:data:`VERDICT_EVENTS`), its
    event's words as the line; None without one."""
    from job_chain.failures.signatures import signature

    found = next((e for e in events if e.kind in VERDICT_EVENTS and e.message), None)
    if found is None:
        return None
    sig = signature(VERDICT_EVENTS[found.kind])
    return Failure(sig.cls, sig.name, " ".join(found.message.split())[:EVENT_CHARS], explanation=sig.explanation,
                   words=sig.words)


def platform_cause(events: Iterable[Any], reason: str, logged: bool) -> Optional[Failure]:
    """When no log line matched: the ``platform`` cause from the job's Warning events (``kind``,
    ``severity``, ``message``: a :class:`~job_chain.engine.jobs.Event`) — one of
    :data:`PLATFORM_EVENTS` always; when no pod logged anything (the script never ran), any other
    Warning, else the job's ``reason``. None: nothing says the platform failed it."""
    warnings = [e for e in events if e.severity == "Warning" and e.message and e.kind not in NOT_A_CAUSE]
    found = next((e for e in warnings if e.kind in PLATFORM_EVENTS), None)
    if found is None and not logged:
        found = warnings[0] if warnings else None
    if found is not None:
        message = " ".join(found.message.split())[:EVENT_CHARS]
        what = PLATFORM_EVENTS.get(found.kind, "the platform failed the job (the event says why): fix what it "
                                               "says, then resume the run")
        return Failure("platform", found.kind, message, explanation=what, words=f"platform ({found.kind}: {message})")
    if not logged and reason:
        text = " ".join(reason.split())[:EVENT_CHARS]
        return Failure("platform", "job-reason", text, explanation="the job failed before its script wrote a line; "
                       "AIHC's reason is all it says: look at 'job-chain jobs events' for the job, fix, then resume "
                       "the run", words=f"platform ({text})")
    return None


ENGINE_HANG = "aihc-hang-detection"  # the signature name of a hang the engine itself found


def engine_hang(events: Sequence[Any]) -> Optional[Failure]:
    """``hang`` when the engine's own hang detection ended the job's last run: its newest hang event
    (:data:`~job_chain.engine.jobs.HUNG`) came after its newest restart (``events`` as the engine
    lists them, newest first; by time where times differ). None otherwise."""
    ordered = sorted(events, key=lambda e: -(e.time or 0.0))  # stable: the engine's order among equal times
    last = next((e for e in ordered if e.kind in (HUNG, RESTARTED)), None)
    if last is None or last.kind != HUNG:
        return None
    message = " ".join(last.message.split())[:EVENT_CHARS]
    return Failure("hang", ENGINE_HANG, message, explanation="AIHC's hang detection found no pod writing to its "
                   "log for the job's hangDetectionTimeoutMinutes and its fault tolerance ended the job: typically "
                   "a collective stuck on a dead peer or a data loader that stopped; a retry (elsewhere) usually "
                   "helps", words=f"hung ({message}) (AIHC's hang detection)")


def _unknown_explanation(exit_code: Optional[int]) -> str:
    text = CLASSES["unknown"].rstrip(".") + f" (the last {TAIL_BYTES // 1024} KB of each)"
    hints = {137: "exit code 137 is SIGKILL: often the OOM killer", 139: "exit code 139 is a segmentation fault",
             134: "exit code 134 is SIGABRT: an abort() (NCCL and CUDA abort on fatal errors)",
             143: "exit code 143 is SIGTERM: something stopped it", 127: "exit code 127: a command was not found"}
    if exit_code in hints:
        text += f"; {hints[exit_code]}"
    return text + ". Read the logs, or add a failureRules entry for it."


def read_tail(path: str, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` bytes of a file, from its first whole line: a 1 GB log costs what a small one does."""
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        start = max(0, size - limit)
        handle.seek(start)
        data = handle.read(limit)
    if start > 0:
        cut = data.find(b"\n")
        data = data[cut + 1:] if 0 <= cut < len(data) - 1 else data
    return data.decode("utf-8", "replace")


def classify_files(paths: Sequence[str], user_rules: Iterable[Any] = ()) -> Failure:
    """The first root cause in log files (one per pod, in the order given), reading only their tails."""
    return classify([(path, read_tail(path)) for path in paths], user_rules)


def tail_text(text: str, limit: int = TAIL_BYTES) -> str:
    """The same cut for text already fetched (an API answer may hold more than the tail)."""
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    newline = cut.find("\n")
    return cut[newline + 1:] if 0 <= newline < len(cut) - 1 else cut
