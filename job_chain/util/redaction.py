"""What is hidden when a request or a job is shown (``run --dry-run``, the web console).

One function for every place that shows one, so they cannot disagree: the values of
secret-looking keys (``sk``, ``*secret*``, ``authToken``, …), of environment variables with
secret-looking names (``*PASSWORD*``, ``*TOKEN*``, ``*SECRET*``, ``*KEY*``, ``*_SK``), and any
known secret string (the chain's SK, those env values) wherever else it appears.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, List

SECRET_KEYS = re.compile(r"^(sk|.*secret.*|.*password.*|token|.*(access|auth|api|bearer|session)_?token)$",
                         re.IGNORECASE)  # not clientToken: an idempotency key worth seeing
SECRET_ENV = re.compile(r"PASSWORD|TOKEN|SECRET|KEY|(?:^|_)SK$", re.IGNORECASE)
REDACTED = "••• (redacted)"
MIN_SECRET = 8  # a shorter env value ("1", "true") is hidden where it is set, not searched for elsewhere


def secret_env(item: Any) -> bool:
    """An ``{"name": ..., "value": ...}`` env entry whose name looks like it holds a secret."""
    return (isinstance(item, dict) and isinstance(item.get("name"), str) and SECRET_ENV.search(item["name"]) is not None
            and item.get("value") not in (None, ""))


def env_secrets(value: Any) -> List[str]:
    """The values of secret-looking env entries anywhere in ``value`` (no recursion: bodies nest)."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if secret_env(item) and isinstance(item["value"], str) and len(item["value"]) >= MIN_SECRET:
                found.append(item["value"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of ``value`` with secret-looking keys' and envs' values and every known secret hidden."""
    known = sorted({s for s in list(secrets) + env_secrets(value) if s}, key=len, reverse=True)
    return _redact(value, known)


def _redact(value: Any, known: List[str]) -> Any:
    if isinstance(value, dict):
        hidden = secret_env(value)
        return {k: (REDACTED if (hidden and k == "value") or (isinstance(k, str) and SECRET_KEYS.match(k)
                                                              and v not in (None, ""))
                    else _redact(v, known)) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, known) for v in value]
    if isinstance(value, str):
        for secret in known:
            value = value.replace(secret, REDACTED)
    return value
