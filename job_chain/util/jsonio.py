"""JSON for the big documents a look reads and writes: a long run's pages of jobs and its attempts cache.

A look at a 5,000-step run decodes 11 MB of the API's pages and writes a 2.5 MB cache; the json
module spends ~55 ms and ~30 ms on them, orjson ~27 ms and ~2 ms. orjson is job-chain's dependency;
the runtime a bundle carries into a training image (:mod:`job_chain.submit.bundle`: pure and abi3
wheels only) has none, and there these fall back to the json module, with the same results.

Only these documents: importing orjson costs a process that has not loaded what it needs ~20 ms,
so the hop (which reads small files) and every other reader keep the json module.
"""

from __future__ import annotations

import json
from typing import Any, Optional

_fast: Optional[Any] = None
_tried = False


def _orjson() -> Optional[Any]:
    global _fast, _tried
    if not _tried:
        try:
            import orjson

            _fast = orjson
        except ImportError:  # a bundle's runtime
            _fast = None
        _tried = True
    return _fast


def loads(data: bytes) -> Any:
    """The document in ``data`` (UTF-8 JSON); ValueError when it is not JSON. (orjson reads an integer
    beyond 64 bits as a float and refuses NaN: neither is in an API's answer or in what :func:`dumps`
    wrote.)"""
    fast = _orjson()
    return fast.loads(data) if fast is not None else json.loads(data.decode("utf-8"))


def dumps(obj: Any) -> bytes:
    """``obj`` as compact JSON (UTF-8): what the json module writes with ``separators=(",", ":")``,
    read back the same (but a NaN, which orjson writes as null). What orjson will not write (a lone
    surrogate, a key that is not a string, an integer beyond 64 bits) is written by the json module."""
    fast = _orjson()
    if fast is not None:
        try:
            return fast.dumps(obj)
        except TypeError:
            pass
    return json.dumps(obj, separators=(",", ":")).encode("ascii")
