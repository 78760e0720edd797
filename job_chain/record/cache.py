"""Cached steps' entries: one file per key, ``<key>.json``, written when a step with
``jobChain.cache`` succeeds and read when a later run reaches the same step (docs/caching.md).

Entries live in ``FILE.runs/.cache/`` unless the chain's top-level ``cacheDir`` names another
directory (shared by several chain files; relative to the chain file). An entry is only ever
written for an attempt that succeeded; one that cannot be read is a miss, never a hit. What a
key is made of, and whether a step may reuse an entry, is :mod:`job_chain.submit.cache`'s.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

from job_chain.record.layout import CACHE_DIR, CACHE_ENTRY, RUNS_SUFFIX
from job_chain.util.files import read_json_dict, write_private

MAX_ENTRIES_LISTED = 100_000  # a directory with more is read that far (a listing must end)


def cache_dir(chain_path: str, setting: Optional[str]) -> str:
    """Where the entries of the chain at ``chain_path`` live (``setting``: its ``cacheDir``)."""
    if setting:
        base = os.path.dirname(os.path.abspath(chain_path))
        return os.path.normpath(os.path.join(base, os.path.expanduser(setting)))
    return os.path.join(os.path.abspath(chain_path) + RUNS_SUFFIX, CACHE_DIR)


class CacheStore:
    """The entries in one directory."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def _path(self, key: str) -> str:
        if not CACHE_ENTRY.fullmatch(f"{key}.json"):
            raise ValueError(f"not a cache key: {key!r}")
        return os.path.join(self.directory, f"{key}.json")

    def get(self, key: str) -> Optional[Dict[str, Any]]:
        """The entry of ``key``; None when there is none or it cannot be read (a miss)."""
        entry = read_json_dict(self._path(key))
        if entry is None or entry.get("key") != key or not isinstance(entry.get("from"), dict):
            return None
        return entry

    def put(self, entry: Dict[str, Any]) -> bool:
        """Write ``entry`` (atomic, 0600); False (not an error) when the directory is not writable here."""
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            write_private(self._path(str(entry["key"])), json.dumps(entry, indent=1, sort_keys=True))
            return True
        except OSError:
            return False

    def entries(self) -> List[Dict[str, Any]]:
        """Every readable entry, newest first."""
        try:
            names = sorted(os.listdir(self.directory))[:MAX_ENTRIES_LISTED]
        except OSError:
            return []
        out = []
        for name in names:
            found = CACHE_ENTRY.fullmatch(name)
            entry = self.get(found.group(1)) if found else None
            if entry is not None:
                out.append(entry)
        return sorted(out, key=lambda e: -float(e.get("at") or 0))

    def forget(self, key: str) -> bool:
        try:
            os.remove(self._path(key))
            return True
        except FileNotFoundError:
            return False
