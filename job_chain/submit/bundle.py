"""``job-chain bundle DIR``: a runtime on shared storage that training images can use.

The bundle is job-chain's own source plus what ``advance`` imports (click, the BCE SDK,
future, six, pycryptodome), resolved by pip for CPython 3.8+ on x86_64: pure-Python wheels,
and pycryptodome's abi3 wheel for its compiled part (not orjson, whose wheels are one per Python
version: :mod:`job_chain.util.jsonio` uses the json module there). Jobs run it as
``PYTHONPATH=DIR python3 -m job_chain``; nothing is installed in the image or at run time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import List, Optional

from job_chain.errors import JobChainError

RUNTIME_REQUIREMENTS = [
    "bce-python-sdk-next>=0.9.0",
    "pycryptodome>=3.15",
    "future>=0.18",
    "click>=8.1,<9",
]
TARGET_FLAGS = [
    "--only-binary=:all:", "--python-version", "3.8", "--implementation", "cp",
    "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
    "--abi", "cp38", "--abi", "abi3", "--abi", "none",
]


def pip_command(target: str, wheels: Optional[str]) -> List[str]:
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               "--no-compile", "--target", target, *TARGET_FLAGS]
    if wheels:
        command += ["--no-index", "--find-links", wheels]
    return command + RUNTIME_REQUIREMENTS


def download_command(wheels: str) -> List[str]:
    """Fetch the runtime's wheels once (e.g. at install time) for offline bundles."""
    return [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            "--dest", wheels, *TARGET_FLAGS, *RUNTIME_REQUIREMENTS]


def write_bundle(directory: str, wheels: Optional[str] = None) -> str:
    """Build the runtime in a temp dir next to ``directory``, then swap it in whole."""
    import job_chain

    target = os.path.abspath(directory)
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".job-chain-bundle-", dir=parent)
    try:
        done = subprocess.run(pip_command(staging, wheels), capture_output=True, text=True)
        if done.returncode != 0:
            lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()
                     and "Location" not in line]
            raise JobChainError(f"pip could not fetch the runtime: {lines[-1] if lines else 'unknown error'}"
                                + ("" if wheels else " (offline? pass --wheels DIR with downloaded wheels)"))
        source = os.path.dirname(os.path.abspath(job_chain.__file__))
        shutil.copytree(source, os.path.join(staging, "job_chain"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "local"))
        shutil.rmtree(os.path.join(staging, "bin"), ignore_errors=True)
        if os.path.exists(target):
            old = target + ".old"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
            os.replace(staging, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return (f"runtime written to {target}; set \"scrips_path\": \"{target}\" in the chain file "
            f"(jobs run: PYTHONPATH={target} python3 -m job_chain)")
