"""Rules 7 and 8, in-process: the chain a run runs and the API config its clients start from are
decided once (``RunRecords.run_chain`` and ``RunRecords.api_config``), so the finishing job's tail
(:func:`job_chain.hop.entry.load_run`) and the session steering the run agree, also after the
chain file changed under the run. No server: the session's connect is captured, never called."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest
from chain_helpers import RECORDED_RUN as RUN
from chain_helpers import diamond_jobs, recorded_run

from job_chain import ChainSession
from job_chain.aihc.credentials import resolve_credentials
from job_chain.hop.entry import load_run
from job_chain.record.records import RunRecords
from job_chain.session import places

KEYS = {"ak": "a" * 32, "sk": "s" * 32}


def started_with(tmp_path: Path, api_config: Dict[str, Any], **top: Any) -> Path:
    """A job-mode run recorded as ``run`` records one, from a file whose ``api_config`` was
    ``api_config`` at start (the record keeps its copy when it held a key, as ``start`` does)."""
    path = tmp_path / "chain_info.json"
    _, records = recorded_run(path, "pool-x", diamond_jobs(), api_config=api_config, **top)
    if api_config.get("ak"):
        records.save_credentials(RUN, api_config)
    return path


def edit(path: Path, **api_config: Any) -> None:
    """The file's ``api_config`` changed after the run started."""
    data = json.loads(path.read_text())
    data.setdefault("api_config", {}).update(api_config)
    path.write_text(json.dumps(data))


def session_connects_with(path: Path, monkeypatch: pytest.MonkeyPatch, **options: Any) -> Dict[str, Any]:
    """What the session would build the run's client from (its call to connect, captured)."""
    calls: List[Dict[str, Any]] = []
    monkeypatch.setattr(places, "connect_to", lambda **kwargs: calls.append(kwargs) or object())
    s = ChainSession.from_file(str(path), strict=False, **options)
    s.client_for(s.run(RUN))
    assert len(calls) == 1
    return calls[0]


def test_a_host_written_into_the_file_after_start_is_ignored_alike_by_the_job_and_the_session(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disagreeing case: the record's copy holds keys but no host (it came from elsewhere at
    start), and the file gains a host later. The session used to take it and the jobs not."""
    path = started_with(tmp_path, dict(KEYS))
    edit(path, host="http://written-later.example:1")
    in_job = load_run(str(path), RUN, None)[2]
    in_session = session_connects_with(path, monkeypatch)["api_config"]
    assert in_job == in_session == KEYS


def test_a_run_keeps_the_api_version_it_was_frozen_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record holds no keys (they came from the environment at start), so the file's keys count,
    but not its version: the run was frozen without one, and a v2 written later changes neither
    side's API (the job's tail used to switch to v2)."""
    path = started_with(tmp_path, {})
    edit(path, host="http://later.example:1", version="v2", **KEYS)
    expected = {"host": "http://later.example:1", **KEYS}
    assert load_run(str(path), RUN, None)[2] == expected
    assert session_connects_with(path, monkeypatch)["api_config"] == expected


def test_the_frozen_version_wins_over_the_copy_and_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = started_with(tmp_path, {"version": "v2", **KEYS})
    edit(path, version="v1", ak="b" * 32)
    expected = {"version": "v2", **KEYS}
    assert load_run(str(path), RUN, None)[2] == expected
    assert session_connects_with(path, monkeypatch)["api_config"] == expected
    records = RunRecords(str(path))  # the planned hop asks with the plan's (the frozen) version
    assert records.api_config(RUN, "v2") == expected


def test_explicit_options_still_win_for_the_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = started_with(tmp_path, {"host": "http://at-start.example:1", **KEYS})
    explicit = {"host": "http://explicit.example:2", "ak": "x" * 32, "sk": "y" * 32}
    kwargs = session_connects_with(path, monkeypatch, **explicit)
    assert kwargs["api_config"] == {"host": "http://at-start.example:1", **KEYS}  # rule 8, as the job has it
    chosen = resolve_credentials(host=kwargs["host"], ak=kwargs["ak"], sk=kwargs["sk"],
                                 api_config=kwargs["api_config"], env={})
    assert (chosen.host, chosen.ak) == ("http://explicit.example:2", "x" * 32)


def test_a_frozen_run_runs_its_copy_on_both_sides_whatever_the_file_says(tmp_path: Path) -> None:
    path = started_with(tmp_path, {})
    data = json.loads(path.read_text())
    data["jobs"][0]["name"] = "renamed"
    data["jobs"][1]["jobChain"]["dependsOn"] = ["renamed"]
    data["jobs"][2]["jobChain"]["dependsOn"] = ["renamed"]
    path.write_text(json.dumps(data))
    in_job = load_run(str(path), RUN, None)[0]
    in_session = ChainSession.from_file(str(path)).frozen(RUN)
    assert [s.name for s in in_job.steps] == [s.name for s in in_session.steps] == ["a", "b", "c", "d"]
    assert in_job.revision == in_session.revision == 1


def test_a_run_recorded_before_freezing_runs_the_file_as_its_place_sees_it(tmp_path: Path) -> None:
    """No frozen copy: the file as it is now, and for a local run without the cluster's paths
    (its pods read this installation), on both sides."""
    path = started_with(tmp_path, {}, config_path="/root/pfs/nowhere/chain_info.json",
                        scrips_path="/root/pfs/nowhere/runtime")
    RunRecords(str(path)).update_run(RUN, revision=None, local=True)
    in_job = load_run(str(path), RUN, None)[0]
    in_session = ChainSession.from_file(str(path)).frozen(RUN)
    for chain in (in_job, in_session):
        assert (chain.revision, chain.config_path, chain.scrips_path) == (0, None, None)
    RunRecords(str(path)).update_run(RUN, local=False)
    assert load_run(str(path), RUN, None)[0].config_path == "/root/pfs/nowhere/chain_info.json"
    assert ChainSession.from_file(str(path)).frozen(RUN).config_path == "/root/pfs/nowhere/chain_info.json"
