"""job_chain.util.jsonio: orjson where installed, the json module where not, with the same results."""

from __future__ import annotations

import json
import sys
from typing import Any, Iterator

import pytest

from job_chain.util import jsonio

CACHE_LIKE = {
    "pytorchjob-1": {"step": "训练 ünïcode", "attempt": 1, "jobId": "pytorchjob-1", "status": "Succeeded",
                     "exitCode": 0, "reason": None, "started": "2026-11-29T11:21:55+00:00", "final": True,
                     "submission": {"submitted": 1795951315.4942334, "revision": 1, "mode": "job", "x": [1, 2.5, -3]}},
    "pytorchjob-2": {"step": "a\"quote\\and\nnewline", "attempt": 2, "restarts": None, "nested": {"deep": [[{}]]}},
}


@pytest.fixture(params=["orjson", "json"])
def which(request: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(jsonio, "_tried", False)
    monkeypatch.setattr(jsonio, "_fast", None)
    if request.param == "json":
        monkeypatch.setitem(sys.modules, "orjson", None)  # as in a bundle's runtime: no orjson to import
    yield request.param


def test_each_way_reads_back_what_it_wrote_as_the_json_module_would(which: str) -> None:
    written = jsonio.dumps(CACHE_LIKE)
    assert (jsonio._orjson() is None) == (which == "json")
    assert json.loads(written.decode("utf-8")) == CACHE_LIKE
    assert jsonio.loads(written) == CACHE_LIKE
    assert jsonio.loads(json.dumps(CACHE_LIKE).encode("utf-8")) == CACHE_LIKE
    assert b"\n" not in written and b", " not in written  # compact


@pytest.mark.parametrize("refused", [{"a": "\ud800"}, {1: "int key"}, {"big": 2 ** 70}])
def test_what_orjson_will_not_write_is_written_by_the_json_module(which: str, refused: Any) -> None:
    written = jsonio.dumps(refused)
    assert written == json.dumps(refused, separators=(",", ":")).encode("ascii")


def test_what_is_not_json_is_a_value_error(which: str) -> None:
    with pytest.raises(ValueError):
        jsonio.loads(b"{not json")
