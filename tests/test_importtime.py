"""benchmarks/importtime.py, the -X importtime parser that import-budget tests build on."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPORT = """\
import time: self [us] | cumulative | imported package
import time:       120 |        120 |   _io
import time:        50 |         50 |       _heavy_leaf
import time:       300 |        350 |     heavy.inner
import time:       400 |        750 |   heavy
import time:        30 |        900 | app
Traceback lines and other stderr are ignored
import time:        10 |         10 | other
"""


@pytest.fixture(scope="module")
def importtime() -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "importtime.py"
    spec = importlib.util.spec_from_file_location("importtime", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["importtime"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_rows_depths_costs_and_who_imported_what(importtime: ModuleType) -> None:
    rows = importtime.parse(REPORT)
    assert [(r.module, r.depth, r.self_us, r.cumulative_us) for r in rows] == [
        ("_io", 1, 120, 120), ("_heavy_leaf", 3, 50, 50), ("heavy.inner", 2, 300, 350), ("heavy", 1, 400, 750),
        ("app", 0, 30, 900), ("other", 0, 10, 10)]
    assert importtime.chain(rows, "_heavy_leaf") == ["_heavy_leaf", "heavy.inner", "heavy", "app"]
    assert importtime.present(rows, ["heavy"]) == ["heavy.inner", "heavy"]  # a package covers its submodules
    assert importtime.explain(rows, ["heavy"]) == "heavy (0.8 ms) imported via app"
    assert importtime.total_ms(rows) == pytest.approx(0.91)
    assert [r.module for r in importtime.top(rows, 1)] == ["app"]


def test_a_real_interpreter_beyond_a_bare_one(importtime: ModuleType) -> None:
    found = importtime.measure(["-c", "import json"])
    extra = importtime.added(found, importtime.baseline())
    assert "json" in importtime.modules(extra) and "json.decoder" in importtime.modules(extra)
    assert importtime.chain(found, "json.decoder")[-1] == "json"
    assert importtime.present(found, ["click"]) == []
    with pytest.raises(RuntimeError, match="exited 1"):
        importtime.measure(["-c", "raise SystemExit(1)"])
