"""A pattern a person wrote (``failureRules``, ``metrics``): compiled here, and run here in bounded time.

Python's ``re`` backtracks: ``^(a+)+$`` over 40 characters takes hours, and while it runs it holds
the interpreter (a hop that never fails, a console that answers nobody). Linear-time engines (RE2)
have compiled bindings per CPython version, which the job's runtime (any CPython 3.8+, a bundle of
wheels resolved once) cannot promise. So a person's patterns run in a child process with a hard
time limit (:data:`SECONDS`), killed when it is over; the caller says what was not decided. The
built-in patterns (the failure catalogue, the default curves) are job-chain's own and run in-process.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Dict, List, Optional, Pattern, Sequence, Tuple

SECONDS = 5.0  # for one batch: every user pattern over every text it is given

# The child: the standard library only, isolated (-I), so it starts in milliseconds anywhere.
_CHILD = r"""
import json, re, sys
job = json.loads(sys.stdin.read())
own = job["skip"]
out = []
if job["mode"] == "first":
    # each pattern's first match in each text, skipping lines that start with `own`
    for pattern in job["patterns"]:
        regex = re.compile(pattern, re.MULTILINE)
        per_text = []
        for text in job["texts"]:
            pos, hit = 0, None
            while True:
                found = regex.search(text, pos)
                if found is None:
                    break
                start = text.rfind("\n", 0, found.start()) + 1
                end = text.find("\n", found.start())
                end = len(text) if end < 0 else end
                if own and text[start:end].lstrip().startswith(own):
                    pos = end + 1
                    continue
                hit = [found.start(), {k: v for k, v in found.groupdict().items() if v}]
                break
            per_text.append(hit)
        out.append(per_text)
else:
    # each pattern's group 1 in each line: [[line index, text], ...]
    regexes = [re.compile(p) for p in job["patterns"]]
    for regex in regexes:
        hits = []
        for i, line in enumerate(job["texts"]):
            found = regex.search(line)
            if found is not None and found.re.groups >= 1 and found.group(1) is not None:
                hits.append([i, found.group(1)])
        out.append(hits)
sys.stdout.write(json.dumps(out))
"""


class PatternTimeout(Exception):
    """The user's patterns did not finish within the time limit (the child was killed)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"did not finish within {seconds:g} s (a pattern with nested repeats such as "
                         f"(a+)+ can take hours on one line; write it without them)")
        self.seconds = seconds


def compile_user(pattern: str, multiline: bool = False) -> Pattern[str]:
    """Compile a person's pattern (``re.error`` when it is not one); compiling is fast, running is not:
    use :func:`first_matches` / :func:`line_groups` to run it."""
    return re.compile(pattern, re.MULTILINE if multiline else 0)


def _run(job: Dict[str, Any], seconds: Optional[float]) -> List[Any]:
    """The one place a user pattern runs: in a child process, killed after ``seconds``."""
    import subprocess  # only when a person's pattern runs: a hop that succeeds never needs it

    limit = SECONDS if seconds is None else seconds
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", _CHILD], input=json.dumps(job),
                              capture_output=True, text=True, timeout=limit, encoding="utf-8")
    except subprocess.TimeoutExpired:
        raise PatternTimeout(limit) from None
    if done.returncode != 0:  # a pattern that does not compile was refused by validate; say it anyway
        lines = (done.stderr or "").strip().splitlines()
        raise re.error(lines[-1] if lines else f"the pattern runner exited {done.returncode}")
    result = json.loads(done.stdout)
    return result if isinstance(result, list) else []


def first_matches(patterns: Sequence[str], texts: Sequence[str], skip_prefix: str = "",
                  seconds: Optional[float] = None) -> List[List[Optional[Tuple[int, Dict[str, str]]]]]:
    """For each pattern (multi-line mode), for each text: its first match's (start, named groups) —
    skipping matches on lines that start with ``skip_prefix`` — or None. Raises :class:`PatternTimeout`."""
    if not patterns:
        return []
    found = _run({"mode": "first", "patterns": list(patterns), "texts": list(texts), "skip": skip_prefix}, seconds)
    return [[(int(hit[0]), dict(hit[1])) if hit else None for hit in per_text] for per_text in found]


def line_groups(patterns: Sequence[str], lines: Sequence[str],
                seconds: Optional[float] = None) -> List[List[Tuple[int, str]]]:
    """For each pattern, the (line index, first group) of each line it matches. Raises :class:`PatternTimeout`."""
    if not patterns:
        return []
    found = _run({"mode": "lines", "patterns": list(patterns), "texts": list(lines), "skip": ""}, seconds)
    return [[(int(i), str(text)) for i, text in hits] for hits in found]
