"""What a wheel of job-chain carries, checked against the tree (no build: nothing is downloaded)."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_every_directory_of_package_files_is_a_listed_package_so_builds_do_not_warn() -> None:
    """Issue 18 item 20: `make demo` printed ~120 lines of setuptools warnings, one block per build
    step, because job_chain.ui.static, .static.vendor and .templates held files but were no listed
    package. Every directory under job_chain/ with files is listed, and its files are package data."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    files = [p for p in (ROOT / "job_chain").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    packages = {str(p.parent.relative_to(ROOT)).replace(os.sep, ".") for p in files}
    assert packages | {"job_chain.aiak.aiak_dict"} == set(config["packages"])
    data = config["package-data"]
    for path in files:
        if path.suffix == ".py":
            continue
        package = str(path.parent.relative_to(ROOT)).replace(os.sep, ".")
        patterns = data.get(package, []) + data.get("*", [])
        assert any(fnmatch.fnmatch(path.name, pattern) for pattern in patterns), f"{path} is left out of wheels"
