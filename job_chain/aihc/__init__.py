"""A typed client for the AIHC training-job OpenAPI (v1), signed by the BCE SDK.

Names are imported on first use: a job advancing a chain imports ``job_chain.aihc.errors`` or
``status`` without paying for the HTTP stack unless it sends a request.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"AIHCClient": "job_chain.aihc.client", "Credentials": "job_chain.aihc.credentials",
            "AIHCError": "job_chain.aihc.errors"}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:  # PEP 562: lazy exports
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'job_chain.aihc' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
