"""AIHC job names: what the platform accepts, and how to make any text acceptable.

AIHC job names become Kubernetes object names (pods are ``<name>-master-0``), so they are
lowercase letters, digits and '-', start with a letter, end with a letter or digit, and stay
within ``MAX_JOB_NAME`` characters so the pod names fit the 63-character label limit.
"""

from __future__ import annotations

import re
from typing import Optional

MAX_JOB_NAME = 50
# use with re.fullmatch ("$" allows a final "\n"); text, compiled on first use: every hop imports this module
JOB_NAME = r"[a-z]([-a-z0-9]*[a-z0-9])?"
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def is_job_id(value: object) -> bool:
    """Whether ``value`` can be a job id the API gave (``pytorchjob-<uuid>``, ``job-xxxx``): ids read
    back from files (a run record) are checked before they reach a URL, a page or a terminal. The
    pattern ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``, checked without a regex: every hop checks ids, and
    compiling one costs a fresh python ~0.2 ms."""
    return (isinstance(value, str) and 0 < len(value) <= 128 and value[0] not in "._-"
            and _ID_CHARS.issuperset(value))


def job_name_problem(name: object) -> Optional[str]:
    """Why ``name`` is not a valid AIHC job name, or None if it is."""
    if not isinstance(name, str) or not name:
        return "required (a non-empty string)"
    if len(name) > MAX_JOB_NAME:
        return f"{len(name)} characters, at most {MAX_JOB_NAME} allowed"
    if not re.fullmatch(JOB_NAME, name):
        return ("use lowercase letters, digits and '-', starting with a letter and "
                "ending with a letter or digit")
    return None


def make_job_name(text: str, max_length: int = MAX_JOB_NAME) -> str:
    """Turn any text into a valid, stable job name (``STDiT-XL/2`` -> ``stdit-xl-2``).

    Too-long names are cut and given a short hash of the full text, so two different long
    inputs never collapse to the same name.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    slug = re.sub(r"-{2,}", "-", slug)
    if not slug or not slug[0].isalpha():
        slug = f"job-{slug}".rstrip("-")
    if len(slug) > max_length:
        import hashlib

        digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:6]
        slug = f"{slug[: max_length - 7].rstrip('-')}-{digest}"
    return slug
