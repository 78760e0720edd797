"""The top-level ``notify`` list: where a run's events go, and the secrets that takes.

A target is ``{"url", "on", "format", "secret", "console"}``. ``url`` and ``secret`` are a string
or ``{"env": "NAME"}``: a bot's URL carries its token, so both are credentials, read from the
starting user's environment at ``run``/``resume`` (:func:`resolve`) and kept in the run record
(never in the chain file, a job's command or environment). The chain, and so its frozen copy,
keeps only the reference. A literal secret (or a bot URL with its token) in the file is a warning.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional

from job_chain.aihc.keys import hint
from job_chain.errors import UsageError
from job_chain.util.jsonfile import describe

EVENTS = ("failed", "succeeded", "stopped", "stepFailed")
FORMATS = ("json", "text", "dingtalk", "feishu", "wecom", "slack")
SIGNED = ("dingtalk", "feishu")  # the formats whose bots can check a signature made with ``secret``
MAX_TARGETS = 16
KEYS = ("url", "on", "format", "secret", "console")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def env_name(value: Any) -> Optional[str]:
    """``NAME`` of ``{"env": "NAME"}``; None for anything else."""
    if isinstance(value, dict) and set(value) == {"env"} and isinstance(value["env"], str):
        return value["env"]
    return None


def check(value: Any, problems: List[str], warnings: List[str]) -> List[Dict[str, Any]]:
    """The checked targets (each with every key, ``secret``/``console`` None when not given)."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_TARGETS:
        problems.append(f"notify: must be a list of at most {MAX_TARGETS} {{\"url\", \"on\", \"format\"}} objects")
        return []
    targets = []
    for k, target in enumerate(value):
        where = f"notify[{k}]"
        if not isinstance(target, dict):
            problems.append(f"{where}: must be an object with url, on, format")
            continue
        unknown = sorted(set(target) - set(KEYS))
        if unknown:
            problems.append(f"{where}.{unknown[0]}: unknown key" + hint(unknown[0], KEYS))
        fmt = target.get("format", "json")
        if fmt not in FORMATS:
            problems.append(f"{where}.format: must be one of {', '.join(FORMATS)}, found {describe(fmt)}")
        url = _credential(target.get("url"), f"{where}.url", problems)
        if isinstance(url, str):
            if not re.fullmatch(r"https?://\S+", url) or len(url) > 2048:
                problems.append(f"{where}.url: must be an http:// or https:// URL, or {{\"env\": \"NAME\"}}")
            elif fmt in ("dingtalk", "feishu", "wecom", "slack"):
                warnings.append(f"{where}.url: a {fmt} bot's URL carries its token: anyone who reads the chain file "
                                f"can post to the group. Put it in an environment variable and write "
                                f"{{\"env\": \"NAME\"}} (docs/notifications.md)")
        elif url is None and "url" not in target:
            problems.append(f"{where}.url: required (an http:// or https:// URL, or {{\"env\": \"NAME\"}})")
        secret = _credential(target.get("secret"), f"{where}.secret", problems) if "secret" in target else None
        if isinstance(secret, str):
            warnings.append(f"{where}.secret: a literal secret in the chain file; write {{\"env\": \"NAME\"}} "
                            "and set NAME where you run job-chain (docs/notifications.md)")
        if secret is not None and fmt not in SIGNED:
            problems.append(f"{where}.secret: only {' and '.join(SIGNED)} bots sign their messages; a {fmt} "
                            "target has no secret (its URL is the credential)")
        events = target.get("on", ["failed"])
        if not isinstance(events, list) or not events or any(e not in EVENTS for e in events):
            problems.append(f"{where}.on: must be a list of events from {', '.join(EVENTS)}")
        console = target.get("console")
        if console is not None and (not isinstance(console, str) or not re.fullmatch(r"https?://\S+", console)):
            problems.append(f"{where}.console: must be the http(s):// address of job-chain's console "
                            "(job-chain ui), which the message links to")
        targets.append({"url": url, "on": events, "format": fmt, "secret": secret, "console": console})
    return targets


def _credential(value: Any, where: str, problems: List[str]) -> Any:
    """A string, ``{"env": "NAME"}`` (kept as it is), or None with a problem."""
    if value is None or isinstance(value, str):
        return value
    name = env_name(value)
    if name is not None and _ENV_NAME.fullmatch(name):
        return {"env": name}
    problems.append(f"{where}: must be a string or {{\"env\": \"NAME\"}} (NAME an environment variable), "
                    f"found {describe(value)}")
    return None


def references(targets: List[Dict[str, Any]]) -> List[str]:
    """Every environment variable the targets name, in order, once."""
    names: List[str] = []
    for target in targets:
        for key in ("url", "secret"):
            name = env_name(target.get(key))
            if name is not None and name not in names:
                names.append(name)
    return names


def resolve(targets: List[Dict[str, Any]], environ: Mapping[str, str], where: str) -> Dict[str, str]:
    """The value of every variable the targets name, from ``environ`` (the starting user's
    environment); a :class:`UsageError` naming every one that is not set (or empty)."""
    names = references(targets)
    missing = [n for n in names if not environ.get(n)]
    if missing:
        which = ", ".join(f"${n}" for n in missing)
        raise UsageError(f"{where}: notify names {which}, which {'is' if len(missing) == 1 else 'are'} not set "
                         f"here: set {'it' if len(missing) == 1 else 'them'} in the environment of the command that "
                         "starts or resumes the run (the value is kept in the run record, mode 0600, for the jobs "
                         "that send notifications)")
    urls = {env_name(t.get("url")) for t in targets} - {None}
    bad = [n for n in names if n in urls and not re.fullmatch(r"https?://\S+", environ[n].strip())]
    if bad:  # said before the run, not by every job that would send (and never the value: it is a credential)
        raise UsageError(f"{where}: notify's URL ${bad[0]} is not an http:// or https:// URL (its value is "
                         "not shown: a bot's URL is a credential)")
    return {n: environ[n].strip() if n in urls else environ[n] for n in names}
