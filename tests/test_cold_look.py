"""What a first look at a long run does to be quick, checked for being exactly as right as before:
pages asked for ahead, the collector held off, attempts copied without ``__init__``, times
memoized. In process, over the in-memory API."""

from __future__ import annotations

import dataclasses
import datetime as dt
import gc
import threading
import weakref
from typing import Any, List

import pytest
from memory_api import MemoryAPI

from job_chain.aihc import engine as aihc_engine
from job_chain.aihc.engine import BULK_AHEAD, BULK_PAGE_SIZE, AIHCEngine, PagesAhead
from job_chain.rules.state import AttemptFacts, planner_state
from job_chain.spec.model import Step
from job_chain.status.observe import by_id
from job_chain.status.types import Attempt, iso, utc
from job_chain.util.gcpause import paused


def _pool(jobs: int) -> MemoryAPI:
    api = MemoryAPI(clock=iter(range(1_000_000, 2_000_000)).__next__)
    for i in range(jobs):
        api.create_job("pool-a", {"name": f"step-{i}", "labels": [
            {"key": "job-chain/run", "value": "r1"}, {"key": "job-chain/step", "value": f"step-{i}"},
            {"key": "job-chain/attempt", "value": "1"}]})
    return api


def test_pages_asked_ahead_give_every_job_newest_first_as_a_walk_does() -> None:
    api = _pool(2 * BULK_PAGE_SIZE + 7)
    walked = [job.id for job in AIHCEngine(api).jobs("pool-a")]
    api.list_calls = 0
    ahead = [job.id for job in AIHCEngine(api).jobs("pool-a", expected=len(walked))]
    assert ahead == walked and len(ahead) == 2 * BULK_PAGE_SIZE + 7
    assert api.list_calls == 3  # two full pages and the short last one: no page asked twice, none beyond


def test_pages_asked_ahead_start_at_once_and_stop_when_closed() -> None:
    api = _pool(10 * BULK_PAGE_SIZE)
    listed = AIHCEngine(api).jobs("pool-a", expected=10 * BULK_PAGE_SIZE)
    assert isinstance(listed, PagesAhead)
    first = next(listed)
    assert first.name == f"step-{10 * BULK_PAGE_SIZE - 1}"
    listed.close()
    asked = api.list_calls
    assert asked <= BULK_AHEAD + 1  # what was in flight when it closed, and nothing after
    assert list(listed) == []
    assert api.list_calls == asked


def test_a_walk_that_may_stop_at_any_page_asks_one_page_at_a_time() -> None:
    api = _pool(3 * aihc_engine.PAGE_SIZE)
    walk = AIHCEngine(api).jobs("pool-a")
    assert not isinstance(walk, PagesAhead)
    next(walk)
    walk.close()  # type: ignore[attr-defined]
    assert api.list_calls == 0  # (it pages through iter_jobs, a page per request on a real client)


def test_a_page_that_fails_fails_the_listing_and_asks_no_more() -> None:
    api = _pool(4 * BULK_PAGE_SIZE)
    real = api.list_jobs

    def failing(pool: str, **kw: Any) -> Any:
        if kw.get("page_no") == 2:
            raise RuntimeError("the second page failed")
        return real(pool, **kw)

    api.list_jobs = failing  # type: ignore[method-assign]
    listed = AIHCEngine(api).jobs("pool-a", expected=4 * BULK_PAGE_SIZE)
    with pytest.raises(RuntimeError, match="second page"):
        list(listed)
    assert list(listed) == []


@pytest.mark.parametrize("offset_by", ["asked", "capped"])
def test_a_service_that_caps_the_page_size_is_read_on_at_its_size_every_job_once(offset_by: str) -> None:
    api = _pool(3 * BULK_PAGE_SIZE + 7)
    walked = [job.id for job in AIHCEngine(api).jobs("pool-a")]
    real = api.list_jobs
    sizes: List[int] = []

    def capped(pool: str, **kw: Any) -> Any:  # answers at most 100 a page, numbering pages by either size
        sizes.append(kw["page_size"])
        cap = min(kw["page_size"], 100)
        start = (kw["page_no"] - 1) * (kw["page_size"] if offset_by == "asked" else cap)
        answer = real(pool, page_no=1, page_size=len(walked), order_by=kw.get("order_by"), order=kw.get("order"))
        return dict(answer, jobs=answer["jobs"][start:start + cap], pageSize=cap)

    api.list_jobs = capped  # type: ignore[method-assign]
    ahead = [job.id for job in AIHCEngine(api).jobs("pool-a", expected=len(walked))]
    assert ahead == walked
    # the first page at the bulk size (and at most the pages asked with it, unless cancelled first), then 100s
    assert sizes[0] == BULK_PAGE_SIZE and sizes == sorted(sizes, reverse=True) and set(sizes) == {BULK_PAGE_SIZE, 100}
    assert sizes.count(BULK_PAGE_SIZE) <= BULK_AHEAD


def test_a_service_that_refuses_the_page_size_is_asked_again_at_aihc_s_cli_s() -> None:
    from job_chain.aihc.errors import AIHCError

    api = _pool(2 * BULK_PAGE_SIZE + 7)
    walked = [job.id for job in AIHCEngine(api).jobs("pool-a")]
    real = api.list_jobs

    def strict(pool: str, **kw: Any) -> Any:
        if kw["page_size"] > aihc_engine.SAFE_PAGE_SIZE:
            raise AIHCError("pageSize must be at most 100", status=400, code="InvalidParameter")
        return real(pool, **kw)

    api.list_jobs = strict  # type: ignore[method-assign]
    assert [job.id for job in AIHCEngine(api).jobs("pool-a", expected=len(walked))] == walked

    def down(pool: str, **kw: Any) -> Any:  # any other failure, or a 400 at the CLI's size, is the listing's
        raise AIHCError("no such pool", status=400, code="InvalidParameter")

    api.list_jobs = down  # type: ignore[method-assign]
    with pytest.raises(AIHCError, match="no such pool"):
        list(AIHCEngine(api).jobs("pool-a", expected=len(walked)))


def test_by_id_reads_the_pages_asked_for_ahead_instead_of_asking_again() -> None:
    api = _pool(300)
    ids = {job.id for job in AIHCEngine(api).jobs("pool-a")}
    api.list_calls = 0
    listed = AIHCEngine(api).jobs("pool-a", expected=300)
    attempts, known, settled = by_id(api, "pool-a", "r1", ids, cache={}, listed=listed)
    assert {a.job_id for a in attempts} == ids
    assert api.list_calls == -(-300 // BULK_PAGE_SIZE)
    again, _, _ = by_id(api, "pool-a", "r1", ids, cache={})  # asked for by itself: the same answer
    assert sorted(a.job_id for a in again) == sorted(a.job_id for a in attempts)


def test_by_id_closes_pages_asked_ahead_that_it_does_not_need() -> None:
    api = _pool(300)
    ids = {job.id for job in AIHCEngine(api).jobs("pool-a")}
    cache = {a.job_id: a for a in by_id(api, "pool-a", "r1", ids, cache={})[0]}
    listed = AIHCEngine(api).jobs("pool-a", expected=300)
    by_id(api, "pool-a", "r1", ids, cache=cache, final=set(ids), listed=listed)  # every job known for good
    assert list(listed) == []


def test_the_collector_is_held_off_while_looks_go_on_and_runs_again_after_the_last() -> None:
    assert gc.isenabled()
    inside = threading.Event()
    leave = threading.Event()

    def other_look() -> None:
        with paused():
            inside.set()
            leave.wait(5)

    thread = threading.Thread(target=other_look)
    with paused():
        assert not gc.isenabled()
        thread.start()
        assert inside.wait(5)
    assert not gc.isenabled()  # the other look still goes on
    leave.set()
    thread.join(5)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


class _Node:
    pass


def _cycle() -> weakref.ref[_Node]:
    node = _Node()
    node.me = node  # type: ignore[attr-defined]  # garbage only the cyclic collector frees
    return weakref.ref(node)


def test_a_look_that_goes_on_leaves_its_garbage_to_the_collector() -> None:
    with paused():
        made = _cycle()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.collect()
    assert made() is None


def test_a_one_off_command_freezes_what_it_made_and_a_later_look_thaws_it() -> None:
    with paused(for_good=True):
        with paused():  # (the look inside the command)
            made = _cycle()
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0  # never scanned again: the process ends
    gc.collect()
    assert made() is not None
    with paused():  # the process went on after all (a test, a library caller): collectable again
        assert gc.get_freeze_count() == 0
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert made() is None


def test_an_attempt_copied_with_changes_equals_dataclasses_replace() -> None:
    when = utc(1_700_000_000.0)
    item = Attempt("train", 2, "pytorchjob-1", "Failed", when, when, 1, "OOM", when, restarts=3)
    changes = dict(failure=None, checkpoint_iteration=40, resume_from=(40, "/ckpt/iter_40"), gpu_hours=1.5,
                   lost_gpu_hours=0.25)
    assert item.but(**changes) == dataclasses.replace(item, **changes)
    assert item.but(**changes) is not item and item.gpu_hours is None  # the original is left as it was
    with pytest.raises(TypeError, match="no field 'gpu_hour'"):
        item.but(gpu_hour=1.0)


def test_times_in_another_zone_are_written_in_their_own_zone_after_the_same_instant_in_utc() -> None:
    instant = utc(1_700_000_000.0)
    assert iso(instant) == "2023-11-14T22:13:20+00:00"
    beijing = instant.astimezone(dt.timezone(dt.timedelta(hours=8)))  # equal to it, and hashed alike
    assert iso(beijing) == "2023-11-15T06:13:20+08:00"
    assert utc(1_700_000_000.0) is instant  # (the same second is one object)


def test_causes_are_counted_only_for_an_attempt_that_failed() -> None:
    step = Step(0, {"name": "train"}, "exit 1", "inline", retries=1)
    asked: List[int] = []

    def counted() -> List[str]:
        asked.append(1)
        return ["unknown"]

    assert planner_state(step, AttemptFacts(1, "Succeeded", 0), counted) == "succeeded"
    assert asked == []
    assert planner_state(step, AttemptFacts(1, "Failed", 1), counted) == "retry-due"
    assert asked == [1]
    assert planner_state(step, AttemptFacts(1, "Failed", 1), ["unknown"]) == "retry-due"  # a list as before


def test_pages_asked_ahead_over_real_http_are_the_walk_and_make_the_client_once(tmp_path: Any) -> None:
    """On the local server (real signed requests, three in flight): the same jobs in the same order as
    a walk, and a client made on first use is made once though three threads first use it together."""
    from conftest import LocalServer, job_body

    from job_chain.aihc.api import LazyClient

    server = LocalServer(tmp_path / "server", max_running=1)
    server.start()
    try:
        client = server.client()
        client.create_job(server.pool, job_body("holder", "exec sleep 600"))  # the rest wait: no processes
        for i in range(2 * BULK_PAGE_SIZE + 5):
            client.create_job(server.pool, job_body(f"waiting-{i}", "true"))
        walked = [job.id for job in AIHCEngine(client).jobs(server.pool)]
        made: List[int] = []

        def build() -> Any:
            made.append(1)
            return server.client()

        ahead = [job.id for job in AIHCEngine(LazyClient(build)).jobs(server.pool, expected=len(walked))]
        assert ahead == walked and len(walked) == 2 * BULK_PAGE_SIZE + 6
        assert made == [1]
    finally:
        server.cleanup()


def test_an_attempt_of_a_job_is_the_attempt_its_constructor_makes() -> None:
    from job_chain.engine.jobs import Job
    from job_chain.status.types import attempt_of

    job = Job("pytorchjob-1", "train", "Succeeded", 1_700_000_000.0, 1_700_000_005.0, 1_700_000_100.0, 0,
              "r1", "train", 2, (), 1)
    made = attempt_of(job, "r1")
    assert made == Attempt("train", 2, "pytorchjob-1", "Succeeded", utc(1_700_000_000.0), utc(1_700_000_100.0), 0,
                           running=utc(1_700_000_005.0), restarts=1)
    assert vars(made) == vars(Attempt("train", 2, "pytorchjob-1", "Succeeded", utc(1_700_000_000.0),
                                      utc(1_700_000_100.0), 0, running=utc(1_700_000_005.0), restarts=1))


def test_a_job_read_for_its_labels_ignores_others_and_a_label_without_a_key() -> None:
    from job_chain.aihc.engine import job_of, labels_of

    answer = {"jobId": "pytorchjob-1", "name": "train", "status": "Running", "labels": [
        {"key": "aijob.cce.baidubce.com/ai-user-id", "value": "u"}, {"value": "no key"}, "not a label",
        {"key": "job-chain/run", "value": "r1"}, {"key": "job-chain/step", "value": "train"},
        {"key": "job-chain/attempt", "value": "3"}]}
    job = job_of(answer)
    assert (job.run_id, job.step, job.attempt) == ("r1", "train", 3)
    assert labels_of(answer)["job-chain/attempt"] == "3"


def test_a_step_without_settings_reads_as_reading_an_empty_object_gives() -> None:
    from job_chain.spec.settings import StepSettings, _read_step_settings, read_step_settings

    problems: List[str] = []
    assert _read_step_settings({}, "steps[0].jobChain", problems) == StepSettings() == read_step_settings(
        {}, "steps[0].jobChain", problems)
    assert problems == []


@pytest.mark.parametrize("top", [{"resourcePoolId": "pool-a"},
                                 {"resourcePoolId": "pool-a", "api_config": {"version": "v2"}},
                                 {"engine": "slurm"}])
def test_where_a_run_runs_is_read_from_its_frozen_copy_without_thawing_it_and_the_file_read_once(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, top: Any) -> None:
    import json

    from job_chain.record import records as records_module
    from job_chain.record.records import RecordDamaged, RunRecords
    from job_chain.spec.frozen import freeze
    from job_chain.spec.loader import load_chain

    (tmp_path / "a.sh").write_text("true\n")
    path = tmp_path / "chain_info.json"
    path.write_text(json.dumps({**top, "jobs": [{"name": "a", "jobSpec": {"command": "a.sh", "image": "img"}}]}))
    chain = load_chain(str(path))
    RunRecords(str(path)).create_run("r1", revision=1)
    RunRecords(str(path)).freeze("r1", freeze(chain), revision=1, reason="start")

    reads: List[str] = []
    real = records_module.read_json_dict
    monkeypatch.setattr(records_module, "read_json_dict", lambda p, **k: reads.append(str(p)) or real(p, **k))
    records = RunRecords(str(path))
    placed = records.run_placed("r1", lambda: chain)
    assert records._frozen == {}  # not thawed
    thawed = records.frozen("r1")
    assert placed == (thawed.engine, thawed.api_config.get("version"))
    assert placed == (chain.engine, chain.api_config.get("version"))
    assert records.run_placed("r1", lambda: chain) == placed
    assert len([p for p in reads if p.endswith("revision-1.json")]) == 1

    (tmp_path / "chain_info.json.runs" / "r1" / "revision-1.json").write_text('{"revision": 1, "chain": [')
    with pytest.raises(RecordDamaged, match="damaged: missing or not JSON"):
        RunRecords(str(path)).run_placed("r1", lambda: chain)
