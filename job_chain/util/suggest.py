"""Did you mean: the one place a misspelt name is matched against the names that exist.

Every "did you mean" job-chain prints comes from :func:`closest` (difflib, case aside), so a
chain file's key, a parameter, a retry cause, a step name given to ``--start`` and an aiak-gen
model name are matched the same way.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional

MAX_WORD = 100  # a longer "word" is not a typo of a name (and difflib is quadratic)


def close_matches(word: str, known: Iterable[str], *, n: int = 1, cutoff: float = 0.6) -> List[str]:
    """Up to ``n`` of ``known`` that ``word`` most likely misspells, best first, compared without
    case (``OOM`` -> ``oom``, ``resourcePoolID`` -> ``resourcePoolId``); as ``known`` spells them."""
    import difflib  # here: a job advancing a chain never misspells anything

    if len(word) > MAX_WORD:
        return []
    lowered: Dict[str, str] = {}
    for name in known:
        lowered.setdefault(str(name).lower(), str(name))
    return [lowered[c] for c in difflib.get_close_matches(word.lower(), sorted(lowered), n=n, cutoff=cutoff)]


def closest(word: str, known: Iterable[str], *, cutoff: float = 0.6) -> Optional[str]:
    """The one of ``known`` that ``word`` most likely misspells, or None."""
    found = close_matches(word, known, cutoff=cutoff)
    return found[0] if found else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'lr'?)`` for the closest known name, else ``""``."""
    from job_chain.util.jsonfile import describe

    near = closest(word, [k for k in known if k != word])
    return f" (did you mean {describe(near)}?)" if near else ""
