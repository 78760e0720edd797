"""The AIAK model and dataset tables shipped with job-chain (``aiak_dict/*.csv``).

They are data, not code, so users and maintainers can update them without touching Python.
"""

from __future__ import annotations

import csv
import difflib
import os
from dataclasses import dataclass
from typing import Dict, List, Optional

TABLE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aiak_dict")
NO_DEFAULT = "#N/A"


@dataclass(frozen=True)
class Model:
    series: str
    name: str
    hf_name: str
    url: str
    tp: Optional[int]  # None: AIAK has no recommended split for this model
    pp: Optional[int]


@dataclass(frozen=True)
class Dataset:
    name: str
    url: str


def _rows(filename: str) -> List[List[str]]:
    with open(os.path.join(TABLE_DIR, filename), encoding="utf-8-sig", newline="") as handle:
        return [row for row in csv.reader(handle)][1:]


def _split(value: str) -> Optional[int]:
    value = value.strip()
    return None if not value or value == NO_DEFAULT else int(value)


def models() -> Dict[str, Model]:
    """models.csv by model name: series, HF name, BOS URL of the weights, default TP/PP."""
    return {r[1]: Model(r[0], r[1], r[2], r[3], _split(r[4]), _split(r[5]))
            for r in _rows("models.csv") if r}


def datasets() -> Dict[str, Dataset]:
    """datasets.csv by dataset name: BOS URL of the raw data."""
    return {r[0]: Dataset(r[0], r[1]) for r in _rows("datasets.csv") if r}


def suggest(name: str, known: List[str]) -> str:
    """``" (did you mean X?)"`` for a close match, else a hint to list the table."""
    lowered = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.5)
    if close:
        return " (did you mean " + " or ".join(lowered[c] for c in close) + "?)"
    return ""
