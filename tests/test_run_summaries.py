"""A summary per run (issue 35): ``runs``, the console and ``ChainSession.summaries`` read it, and a
run whose summary is missing or older than its record is looked at once and its summary written.

In-process on the in-memory jobs API (the moto pattern): what is checked is which runs are looked at,
not the wire; the CLI through CliRunner over summaries the library wrote.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, List, Tuple

import pytest
from chain_helpers import age_run, memory_runs
from click.testing import CliRunner

from job_chain import ChainSession
from job_chain.cli import cli as job_chain_cli
from job_chain.session import look


def _age(run_dir: Path) -> None:
    age_run(run_dir)


def _finished(tmp_path: Path, count: int, exit_codes: Tuple[int, ...] = (0,)) -> Tuple[Path, List[str], Any]:
    return memory_runs(tmp_path, count, exit_codes)


@pytest.fixture
def looks(monkeypatch: pytest.MonkeyPatch) -> List[str]:
    """The runs a listing looked at (worked out a status for)."""
    seen: List[str] = []
    real = look.status

    def counting(ctx: Any, run_id: Any = None, **kwargs: Any) -> Any:
        seen.append(run_id)
        return real(ctx, run_id, **kwargs)

    monkeypatch.setattr(look, "status", counting)
    return seen


def counted_loads(monkeypatch: pytest.MonkeyPatch) -> List[str]:
    """Each path the loader reads a chain file from, from now on, in order."""
    from job_chain.spec import loader

    loads: List[str] = []
    real = loader.load_chain

    def counting(*args: Any, **kwargs: Any) -> Any:
        loads.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(loader, "load_chain", counting)
    return loads


def test_a_listing_reads_summaries_and_looks_once_at_a_run_that_changed(tmp_path: Path, looks: List[str]) -> None:
    chain, ids, api = _finished(tmp_path, 3, exit_codes=(0, 3))
    looks.clear()
    session = ChainSession.from_file(str(chain), client=api)
    runs_dir = chain.parent / "chain_info.json.runs"
    for run_id in ids:
        _age(runs_dir / run_id)
    first = session.summaries()
    assert [s.run_id for s in first] == ids[::-1]  # newest first
    assert [s.outcome for s in first] == ["succeeded", "failed", "succeeded"]
    assert sorted(looks) == sorted(ids)  # missing: each worked out once, and written
    assert sorted(p.name for p in (runs_dir / ".summaries").iterdir()) == sorted(f"{i}.json" for i in ids)

    looks.clear()
    again = ChainSession.from_file(str(chain), client=api).summaries()
    assert looks == [] and [(s.run_id, s.outcome, s.failed and s.failed[0]["exitCode"]) for s in again] == \
        [(s.run_id, s.outcome, s.failed and s.failed[0]["exitCode"]) for s in first]

    (runs_dir / ids[0] / "note.json").write_text("{}")  # the record changed: its summary is stale
    session.summaries()
    assert looks == [ids[0]]
    _age(runs_dir / ids[0])
    looks.clear()
    session.summaries()
    assert looks == [ids[0]]  # the look after the change was dated by the change: once more, then settled
    looks.clear()
    session.summaries()
    assert looks == []


def test_a_run_copied_in_by_hand_is_found_and_a_damaged_one_listed(tmp_path: Path, looks: List[str]) -> None:
    chain, ids, api = _finished(tmp_path, 1)
    runs_dir = chain.parent / "chain_info.json.runs"
    _age(runs_dir / ids[0])
    ChainSession.from_file(str(chain), client=api).summaries()
    copy = "20200101-000000-beef"
    shutil.copytree(runs_dir / ids[0], runs_dir / copy)
    record = json.loads((runs_dir / copy / "run.json").read_text())
    (runs_dir / copy / "run.json").write_text(json.dumps(dict(record, id=copy, started=1577836800.0)))
    (runs_dir / "20190101-000000-dead").mkdir()
    looks.clear()
    found = ChainSession.from_file(str(chain), client=api).summaries()
    assert [s.run_id for s in found] == [ids[0], copy, "20190101-000000-dead"]
    assert looks == [copy] and found[1].outcome == "succeeded"
    assert found[2].outcome == "unknown" and "is damaged" in found[2].error


def test_limit_and_since_narrow_the_listing_and_look_only_at_what_is_shown(tmp_path: Path, looks: List[str]) -> None:
    chain, ids, api = _finished(tmp_path, 3)
    looks.clear()
    session = ChainSession.from_file(str(chain), client=api)
    assert [s.run_id for s in session.summaries(limit=2)] == ids[:0:-1]
    assert sorted(looks) == sorted(ids[1:])
    runs_dir = chain.parent / "chain_info.json.runs"
    record = json.loads((runs_dir / ids[0] / "run.json").read_text())
    (runs_dir / ids[0] / "run.json").write_text(json.dumps(dict(record, started=time.time() - 3 * 86400)))
    assert [s.run_id for s in session.summaries(since=time.time() - 86400)] == ids[:0:-1]


def test_runs_table_decides_its_params_column_once_not_once_per_row() -> None:
    """The quadratic ``any(e.get("params") for e in entries)`` inside the loop over every run."""
    from job_chain.cli.run_view import runs_columns, runs_rows

    asked = []

    class Entry(dict):
        def get(self, key: str, default: Any = None) -> Any:
            if key == "params":
                asked.append(1)
            return super().get(key, default)

    entries = [Entry(run=f"r{i}", started=None, outcome="succeeded", params={"lr": "1"} if i == 399 else {},
                     current=[], failedSteps=[], gpuHours=None) for i in range(400)]
    rows = runs_rows(entries)
    assert len(rows) == 400 and rows[-1][3] == "lr=1" and rows[0][3] == "-"
    assert len(asked) <= 3 * len(entries), len(asked)
    assert "PARAMS" in runs_columns(entries)


def test_runs_cli_limit_since_and_a_bad_since(tmp_path: Path, looks: List[str]) -> None:
    chain, ids, api = _finished(tmp_path, 3)
    runs_dir = chain.parent / "chain_info.json.runs"
    ChainSession.from_file(str(chain), client=api).summaries()
    for run_id in ids:
        _age(runs_dir / run_id)
    ChainSession.from_file(str(chain), client=api).summaries()  # settled summaries: no API is asked below
    env = {"JOB_CHAIN_CREDENTIALS": None, "AIHC_HOST": "127.0.0.1:9", "AIHC_AK": "a", "AIHC_SK": "b"}
    listed = CliRunner().invoke(job_chain_cli, ["runs", str(chain), "--json", "--limit", "2"], env=env)
    assert listed.exit_code == 0, listed.output
    assert [e["run"] for e in json.loads(listed.output)] == ids[:0:-1]
    assert all(e["outcome"] == "succeeded" for e in json.loads(listed.output))
    table = CliRunner().invoke(job_chain_cli, ["runs", str(chain), "--since", "1h"], env=env)
    assert table.exit_code == 0 and all(i in table.output for i in ids), table.output
    none = CliRunner().invoke(job_chain_cli, ["runs", str(chain), "--since", "2999-01-01"], env=env)
    assert none.exit_code == 0 and "no run of" in none.output and "started since 2999-01-01" in none.output
    bad = CliRunner().invoke(job_chain_cli, ["runs", str(chain), "--since", "yesterday"], env=env)
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert "--since 'yesterday' is neither an age (30m, 12h, 7d, 2w) nor a UTC date" in bad.output
    assert len(bad.output.strip().splitlines()) == 1


def test_status_reads_and_checks_the_chain_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35, status of a 5,000-step run: the file the command opened was validated a second time to
    say whether it differs from the run (each a third of the command's time)."""

    chain, ids, api = _finished(tmp_path, 1)
    ChainSession.from_file(str(chain), client=api).status(ids[0])  # its jobs known to the record: no API below
    loads = counted_loads(monkeypatch)
    env = {"JOB_CHAIN_CREDENTIALS": None, "AIHC_HOST": "127.0.0.1:9", "AIHC_AK": "a", "AIHC_SK": "b"}
    shown = CliRunner().invoke(job_chain_cli, ["status", str(chain)], env=env)
    assert shown.exit_code == 0 and "succeeded" in shown.output, shown.output
    assert len(loads) == 1, loads
    data = json.loads(chain.read_text())
    data["jobs"][0]["jobSpec"]["image"] = "local:v2"  # a change the line must still tell
    chain.write_text(json.dumps(data))
    shown = CliRunner().invoke(job_chain_cli, ["status", str(chain)], env=env)
    assert shown.exit_code == 0 and "the chain file differs from run" in shown.output, shown.output


def _copies(runs_dir: Path, template: str, count: int) -> List[str]:
    """``count`` copies of run ``template`` put into ``runs_dir`` by hand (no summary), a minute apart,
    the newest an hour before ``template``'s start."""
    record = json.loads((runs_dir / template / "run.json").read_text())
    made = []
    for i in range(count):
        started = record["started"] - 3600 - 60 * i
        run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started)) + f"-{i:04x}"
        shutil.copytree(runs_dir / template, runs_dir / run_id)
        (runs_dir / run_id / "run.json").write_text(json.dumps(dict(record, id=run_id, started=started)))
        made.append(run_id)
    return made


def test_the_console_works_out_only_the_runs_its_page_shows(tmp_path: Path, looks: List[str]) -> None:
    """Issue 35: a fresh console's first view worked out every run without a summary (19 s for 2,000
    copied runs); now only the page's rows are, and the next page's when it is asked for."""
    import re
    import threading

    import requests
    import uvicorn

    from job_chain.ui.app import create_app
    from job_chain.ui.catalog import Catalog
    from job_chain.ui.security import Guard
    from job_chain.ui.server import bind_socket

    chain, ids, api = _finished(tmp_path / "team", 1)
    runs_dir = chain.parent / "chain_info.json.runs"
    ChainSession.from_file(str(chain), client=api).status(ids[0])  # its job known to the record: no API below
    copied = _copies(runs_dir, ids[0], 70)
    for run_id in [ids[0], *copied]:
        _age(runs_dir / run_id)  # copied a while ago: a look's summary settles at once
    ChainSession.from_file(str(chain), client=api).summaries(limit=1)  # the original's summary is written
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    app = create_app(Catalog([str(tmp_path)]), Guard.for_bind("127.0.0.1", port, token=False))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.01)
        looks.clear()
        first = requests.get(f"http://127.0.0.1:{port}/", timeout=60)
        assert first.status_code == 200
        shown = re.findall(r'id="r-[^"]+-(\d{8}-\d{6}-[0-9a-f]+)"', first.text)
        assert shown == [ids[0], *copied[:49]]  # newest first, a page of 50
        assert sorted(looks) == sorted(copied[:49])  # the page's runs without a summary; none of the 21 others
        looks.clear()
        again = requests.get(f"http://127.0.0.1:{port}/", timeout=60)
        assert again.status_code == 200 and looks == []  # written when worked out
        second = requests.get(f"http://127.0.0.1:{port}/?page=1", timeout=60)
        assert re.findall(r'id="r-[^"]+-(\d{8}-\d{6}-[0-9a-f]+)"', second.text) == copied[49:]
        assert sorted(looks) == sorted(copied[49:])
    finally:
        server.should_exit = True
        thread.join(10)


def test_status_validates_the_chain_file_only_when_it_or_a_script_changed(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35/28, status of a big run: reading and checking a 500-step file was a third of the command.
    What the file was found to be is kept with the digests of what its load read; while the file and its
    scripts read the same, status neither validates it nor compares it with the run again."""

    chain, ids, api = memory_runs(tmp_path, 1, steps=[{"name": "train", "script": "echo one\n"}])
    ChainSession.from_file(str(chain), client=api).status(ids[0])  # its job known to the record: no API below
    loads = counted_loads(monkeypatch)
    env = {"JOB_CHAIN_CREDENTIALS": None, "AIHC_HOST": "127.0.0.1:9", "AIHC_AK": "a", "AIHC_SK": "b"}

    def status() -> str:
        shown = CliRunner().invoke(job_chain_cli, ["status", str(chain)], env=env)
        assert shown.exit_code == 0 and "succeeded" in shown.output, shown.output
        return shown.output

    first = status()
    assert len(loads) == 1 and "differs" not in first  # checked once, and kept
    loads.clear()
    assert "differs" not in status() and loads == []  # the file and its script read the same: not validated
    from job_chain.session import chainfile

    monkeypatch.setattr(chainfile, "checker", lambda: "another job-chain")  # upgraded: its rules check again
    assert "differs" not in status() and len(loads) == 1
    loads.clear()
    assert "differs" not in status() and loads == []  # and its check is kept
    monkeypatch.undo()
    loads = counted_loads(monkeypatch)
    status()
    loads.clear()
    (chain.parent / "train.sh").write_text("echo two\n")  # the script changed: checked again, and told
    assert "the chain file differs from run" in status() and len(loads) == 1
    (chain.parent / "train.sh").write_text("echo one\n")  # as it was: checked again (the kept check is the last)
    loads.clear()
    back = status()
    assert "differs" not in back and len(loads) == 1, back
    loads.clear()
    assert "differs" not in status() and loads == []
    chain.write_text(chain.read_text().replace('"resourcePoolId"', '"resourcePoolID"'))  # broken now
    broken = CliRunner().invoke(job_chain_cli, ["status", str(chain)], env=env)
    assert broken.exit_code == 0 and "cannot be used now" in broken.output, broken.output
    chain.write_text(json.dumps(json.loads(chain.read_text().replace('"resourcePoolID"', '"resourcePoolId"'))))
    loads.clear()  # sound again, written otherwise: validated once, then known to be sound
    assert ChainSession.from_file(str(chain), strict=False).chain_problem is None and len(loads) == 1
    assert ChainSession.from_file(str(chain), strict=False).chain_problem is None and len(loads) == 1  # (the console)


def test_a_look_reads_one_listing_and_no_finished_jobs_submission_again(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35/28: a look at a finished 5,000-step run listed its directory three times and read every
    step's submission file each time; a finished job's submission is kept with what the look knew. The
    record's word on the run's start is read once too (it was read for the refusal, the walk, the
    never-started case and the facts)."""
    from job_chain.record.layout import START_FAILED
    from job_chain.record.records import RunRecords

    chain, ids, api = memory_runs(tmp_path, 1)
    session = ChainSession.from_file(str(chain), client=api)
    first = session.status(ids[0])
    session.status(ids[0])  # the previous look's cache had no submissions yet: this one keeps them
    reads: List[str] = []
    listings: List[str] = []
    real_read, real_names = RunRecords.read, RunRecords.names

    def reading(self: RunRecords, run_id: str, name: str) -> Any:
        reads.append(name)
        return real_read(self, run_id, name)

    def listing(self: RunRecords, run_id: str) -> Any:
        listings.append(run_id)
        return real_names(self, run_id)

    monkeypatch.setattr(RunRecords, "read", reading)
    monkeypatch.setattr(RunRecords, "names", listing)
    again = ChainSession.from_file(str(chain), client=api).status(ids[0])
    assert [(s.name, s.status, s.job_id) for s in again.steps] == [(s.name, s.status, s.job_id) for s in first.steps]
    assert not [n for n in reads if n.startswith("step-")], reads
    assert listings == [ids[0]]
    assert reads.count(START_FAILED) == 1, reads


def _every_field_set() -> Any:
    """A look with every field of the run, its steps and their attempts away from its default."""
    import datetime as dt

    from job_chain.failures.classify import Failure
    from job_chain.status.types import Attempt, Outcome, RunStatus, StepStatus

    when = dt.datetime(2026, 11, 28, 8, 33, 43, 123456, tzinfo=dt.timezone.utc)
    failed = Attempt("train", 1, "job-1", "Failed", when, when, 137, "OOMKilled", when,
                     Failure("oom", "cuda-oom", "CUDA out of memory", "train-worker-0", "lower the batch",
                             "out of memory"),
                     checkpoint_iteration=400, resume_from=(200, "/ckpt/iter_200"), gpu_hours=1.5,
                     cached={"run": "r0", "step": "train"}, lost_gpu_hours=0.5, restarts=None)
    earlier = Attempt("train", 0, "job-0", "Succeeded", when, when, 0, restarts=2)
    step = StepStatus(3, "train", "Failed", "job-1", 1, 137, "OOMKilled", when, when, [failed], [1, 2], "failure",
                      [earlier], 2, 1.5, 0.5, {1: "retried from iteration 200"}, "train[lr=1]", "train",
                      {"lr": "1"}, {"loss": "0.1"}, "removed in revision 2")
    return RunStatus("r1", "/chains/a.json", Outcome.FAILED, [step], 3, when, "train failed", True, "http://x",
                     True, 2, [{"revision": 1}], "abc", {"lr": "1"}, ["slack: 500"])


def test_a_kept_look_reads_back_as_the_look_it_kept_every_field() -> None:
    from dataclasses import MISSING, fields

    from job_chain.status import kept

    found = _every_field_set()
    for item in (found, found.steps[0], found.steps[0].attempts[0]):  # a field added and not kept here fails
        for f in fields(item):
            default = f.default_factory() if f.default_factory is not MISSING else f.default  # type: ignore[misc]
            assert getattr(item, f.name) != default, f"{type(item).__name__}.{f.name} is left at its default"
    again = kept.load(json.loads(json.dumps(kept.dump(found))), "/chains/moved.json")
    assert again is not None and again.chain_path == "/chains/moved.json"
    again.chain_path = found.chain_path
    assert again == found and again.as_json() == found.as_json()
    assert kept.load({"version": 0, "status": {}}, "x") is None
    assert kept.load({"version": 1, "status": {"a": 1}}, "x") is None


def test_an_ended_runs_look_is_kept_whole_and_shown_from_it_until_its_record_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain, ids, api = _finished(tmp_path, 1, exit_codes=(3,))
    run_dir = chain.parent / "chain_info.json.runs" / ids[0]
    _age(run_dir)
    worked: List[str] = []
    real = look.summarize
    monkeypatch.setattr(look, "summarize", lambda *a, **k: worked.append("look") or real(*a, **k))
    first = ChainSession.from_file(str(chain), client=api).status(ids[0])
    assert worked == ["look"] and first.outcome == "failed"
    assert (chain.parent / "chain_info.json.runs" / ".looks" / f"{ids[0]}.json").is_file()

    again = ChainSession.from_file(str(chain), client=api).status(ids[0])
    assert worked == ["look"]  # shown from the kept look: no chain thawed, no step worked out
    assert again == first and again.as_json() == first.as_json()

    (run_dir / "note.json").write_text("{}")  # the record changed: the kept look no longer stands in
    ChainSession.from_file(str(chain), client=api).status(ids[0])
    assert worked == ["look", "look"]

    ChainSession.from_file(str(chain), client=api).delete_run(ids[0])
    assert not (chain.parent / "chain_info.json.runs" / ".looks" / f"{ids[0]}.json").exists()
    assert not (chain.parent / "chain_info.json.runs" / ".summaries" / f"{ids[0]}.json").exists()


def test_a_look_that_tells_a_run_s_end_keeps_a_summary_a_listing_reads(tmp_path: Path, looks: List[str]) -> None:
    """The first look at a failed run no job could tell sends its end (session/look.tell_a_silent_end)
    before keeping the run's summary: the summary it keeps stands in at once (the claims it wrote are
    in its basis), and the look says which target refused the message."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from chain_helpers import Hooks

    class Refusing(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(403)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    taking, refusing = Hooks(), HTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=refusing.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        chain, ids, api = memory_runs(tmp_path, 1, (3,), notify=[
            {"url": taking.url, "on": ["failed"], "format": "json"},
            {"url": f"http://127.0.0.1:{refusing.server_address[1]}/hook", "on": ["failed"], "format": "json"}])
        runs_dir = chain.parent / "chain_info.json.runs"
        _age(runs_dir / ids[0])
        session = ChainSession.from_file(str(chain), client=api)
        found = session.status(ids[0])
        assert found.outcome.value == "failed"
        assert [b["event"] for b in taking.bodies] == ["failed"]  # this look told the end
        assert len(found.notify_failed) == 1 and "403" in found.notify_failed[0]
        looks.clear()
        assert [s.outcome for s in session.summaries()] == ["failed"]
        assert looks == []  # the summary the telling look kept stands in
    finally:
        taking.server.shutdown()
        refusing.shutdown()


def test_a_kept_look_that_lacks_a_field_without_a_default_is_not_one() -> None:
    from job_chain.status import kept

    data = json.loads(json.dumps(kept.dump(_every_field_set())))
    del data["status"]["steps"][0]["attempts"][0]["job_id"]
    assert kept.load(data, "x") is None


def test_a_look_that_could_not_find_a_failures_cause_is_not_kept_and_the_next_look_finds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from job_chain.engine.errors import EngineError
    from job_chain.status import causes

    chain, ids, api = _finished(tmp_path, 1, exit_codes=(3,))
    runs_dir = chain.parent / "chain_info.json.runs"
    _age(runs_dir / ids[0])
    real = causes.classify_job

    def unreadable(*args: Any, **kwargs: Any) -> Any:
        raise EngineError("the logs cannot be read now", status=503)

    monkeypatch.setattr(causes, "classify_job", unreadable)
    first = ChainSession.from_file(str(chain), client=api).status(ids[0])
    assert first.outcome == "failed" and first.steps[0].failure is None
    assert not (runs_dir / ".looks" / f"{ids[0]}.json").exists()  # kept, it would stand in for the next look

    monkeypatch.setattr(causes, "classify_job", real)
    _age(runs_dir / ids[0])
    again = ChainSession.from_file(str(chain), client=api).status(ids[0])
    assert again.steps[0].failure is not None  # the next look found it, and keeps that look
    assert (runs_dir / ".looks" / f"{ids[0]}.json").exists()


def test_a_run_whose_attempts_an_older_job_chain_cached_is_kept_whole_all_the_same(tmp_path: Path) -> None:
    chain, ids, api = _finished(tmp_path, 1)
    run_dir = chain.parent / "chain_info.json.runs" / ids[0]
    ChainSession.from_file(str(chain), client=api).status(ids[0])
    cache = run_dir / "attempts.json"
    data = json.loads(cache.read_text())
    for item in data.values():
        assert item["final"] is True
        del item["restarts"]  # what a job-chain before engine restarts were counted cached: final, no count
    cache.write_text(json.dumps(data))
    _age(run_dir)
    ChainSession.from_file(str(chain), client=api).status(ids[0])
    assert (run_dir.parent / ".looks" / f"{ids[0]}.json").is_file()  # no later look would ask again
