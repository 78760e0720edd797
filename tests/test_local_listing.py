"""The local server's job list (``GET /api/v1/aijobs``) keeps each job's item as JSON text while the
job's row is unchanged (``backend.ListedJobs``): the answer must be byte for byte what encoding the
job's :meth:`Backend.job_view` gives, and never a stale view, whatever changed the row. In-process: a
real Store and Backend, an Executor that never starts, the HTTP layer's own encoder (``JSONAnswer``);
the wire itself is checked in test_local_api.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from conftest import store_page

from job_chain.aihc import v2
from job_chain.local.backend import Backend, ListedJobs
from job_chain.local.backend_v2 import BackendV2
from job_chain.local.executor import Executor
from job_chain.local.shapes import JSONItems, json_text
from job_chain.local.store import LIST_NAMES, SUCCEEDED, Store
from job_chain.local.wire import JSONAnswer
from job_chain.util.safe_text import without_surrogates

POOL, OTHER = "cce-list", "cce-other"


@pytest.fixture()
def local(tmp_path: Path) -> Iterator[Tuple[Store, Backend]]:
    store = Store(str(tmp_path / "state.db"))
    store.configure([(POOL, None), (OTHER, None)], [(POOL, "default", None), (POOL, "q2", None)])
    yield store, Backend(store, Executor(store, str(tmp_path)), str(tmp_path), "http://127.0.0.1:9")
    store.close()


def create(backend: Backend, name: str, **extra: Any) -> str:
    body = {"name": name, "jobSpec": {"image": "local", "command": f"echo {name}", "replicas": 1}, **extra}
    return str(backend.create_job(POOL, body, None)["jobId"])


def sent(backend: Backend, pool: str = POOL, **query: str) -> bytes:
    """The bytes the server sends for a page (the route wraps the result as here)."""
    result = backend.list_jobs(pool, query.get("queue"), query.get("orderBy"), query.get("order"),
                               query.get("pageNo"), query.get("pageSize", "100"))
    return bytes(JSONAnswer({"requestId": "r", "result": result}).body)


def expected(backend: Backend, store: Store, pool: str = POOL, **query: str) -> bytes:
    """What a page must send: every job's view made afresh from its row, encoded in place
    (how the server answered before items were kept)."""
    descending = query.get("order", "desc") == "desc"
    total, jobs = store_page(store, pool, query.get("queue"), query.get("orderBy", "createdAt"), descending,
                             0, int(query.get("pageSize", "100")))
    result = {"total": total, "jobs": [backend.job_view(j) for j in jobs],
              "orderBy": query.get("orderBy", "createdAt"), "order": query.get("order", "desc"), "pageNo": 1,
              "pageSize": int(query.get("pageSize", "100"))}
    text = json.dumps({"requestId": "r", "result": result}, ensure_ascii=False, allow_nan=False,
                      separators=(",", ":"))
    return without_surrogates(text).encode("utf-8")


def listed(backend: Backend) -> Dict[str, Dict[str, Any]]:
    return {j["jobId"]: j for j in json.loads(sent(backend))["result"]["jobs"]}


def test_a_page_is_byte_for_byte_the_views_encoded_in_place(local: Tuple[Store, Backend]) -> None:
    store, backend = local
    create(backend, "plain")
    create(backend, "labelled", labels=[{"key": "team", "value": "视觉"}, {"key": "aijob.cce.baidubce.com/"
                                        "create-from-aihcp-api", "value": "false"}], priority="high")
    create(backend, "tolerant", faultTolerance=True, faultToleranceArgs="--max-num-of-unconditional-retry=2",
           datasources=[{"type": "pfs", "name": "p", "mountPath": "/tmp/p"}], queue="q2")
    create(backend, "quoted", jobSpec={"image": "local", "command": 'printf "%s\\n" \'a\tb\' \\\\ \u2028',
                                       "replicas": 2, "envs": [{"name": "A", "value": "1.5"}]})
    for _ in range(2):  # the first answer makes the items, the second gives the kept ones
        for query in ({}, {"order": "asc"}, {"orderBy": "finishedAt"}, {"queue": "q2"}, {"pageSize": "2"}):
            assert sent(backend, **query) == expected(backend, store, **query), query
    assert len(backend.listed) == 4


def test_a_lone_surrogate_in_a_stored_row_is_sent_as_a_replacement_character(local: Tuple[Store, Backend]) -> None:
    """A row an older server stored with one (test_surrogates.py has the whole story)."""
    store, backend = local
    body = {"name": "poison", "jobSpec": {"image": "i", "command": "echo caf\udce9", "replicas": 1},
            "labels": [{"key": "team", "value": "caf\udce9"}], "queue": "default", "priority": "normal"}
    store.create_job(POOL, "poison", body, "normal", "default", None, 1)
    for _ in range(2):
        raw = sent(backend)
        assert raw == expected(backend, store)
        job = json.loads(raw)["result"]["jobs"][0]
        assert job["command"] == "echo caf\ufffd" and {"key": "team", "value": "caf\ufffd"} in job["labels"]


def test_a_stop_a_new_priority_and_an_end_are_listed_at_once(local: Tuple[Store, Backend]) -> None:
    store, backend = local
    first, second, third = create(backend, "first"), create(backend, "second"), create(backend, "third")
    before = listed(backend)
    assert {j["status"] for j in before.values()} == {"Pending"} and before[second]["priority"] == "normal"
    backend.stop_job(POOL, first)
    backend.update_job(POOL, second, {"priority": "high"})
    assert store.transition(third, ["Pending"], status=SUCCEEDED, scheduled_at=1795940000.0,
                            started_at=1795940001.0, finished_at=1795940061.0)
    after = listed(backend)
    assert after[first]["status"] == "Stopped" and after[first]["finishedAt"] != ""
    assert after[second]["priority"] == "high" and after[second]["status"] == "Pending"
    assert (after[third]["status"], after[third]["scheduledAt"], after[third]["runningAt"],
            after[third]["finishedAt"]) == ("Succeeded", "2026-11-29T08:13:20Z", "2026-11-29T08:13:21Z",
                                            "2026-11-29T08:14:21Z")
    assert sent(backend) == expected(backend, store)


# What each listed column becomes in a change of the row (the spec: new labels and command, as a
# hand edit or a future migration could make; the listing must follow whatever made it)
CHANGES: Dict[str, Any] = {
    "seq": 99, "pool": OTHER, "name": "renamed", "status": "Running", "priority": "low", "queue": "q2",
    "created_at": 1795000000.5, "scheduled_at": 1795000001.0, "started_at": 1795000002.0,
    "finished_at": 1795000003.0, "restarts": 2,
    "spec": json.dumps({"name": "renamed", "jobSpec": {"image": "other", "command": "echo changed", "replicas": 1},
                        "labels": [{"key": "team", "value": "changed"}]}),
}


@pytest.mark.parametrize("column", [c for c in LIST_NAMES if c != "id"])
def test_any_change_of_a_listed_column_is_listed(local: Tuple[Store, Backend], column: str) -> None:
    store, backend = local
    job_id = create(backend, "changing")
    create(backend, "unchanged")
    sent(backend)  # kept
    store.set_job(job_id, **{column: CHANGES[column]})
    assert sent(backend) == expected(backend, store)
    if column == "pool":  # listed in its new pool, as a job of that pool
        sent(backend, OTHER)
        assert sent(backend, OTHER) == expected(backend, store, OTHER)
        assert json.loads(sent(backend, OTHER))["result"]["jobs"][0]["resourcePoolId"] == OTHER
    if column == "spec":
        assert {"key": "team", "value": "changed"} in listed(backend)[job_id]["labels"]


def described(backend: Backend, **body: str) -> bytes:
    """The bytes the server sends for v2's DescribeJobs (a flat answer, as routes_v2 makes it)."""
    return bytes(JSONAnswer(dict(BackendV2(backend).call("DescribeJobs", {"resourcePoolId": POOL}, body),
                                 requestId="r")).body)


def described_expected(backend: Backend, store: Store) -> bytes:
    total, jobs = store_page(store, POOL, None, "createdAt", True, 0, 100)
    user = BackendV2(backend).user_id
    answer = {"totalCount": total, "jobs": [v2.job_to_v2(backend.job_view(j), user) for j in jobs], "requestId": "r"}
    text = json.dumps(answer, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return without_surrogates(text).encode("utf-8")


def test_v2_lists_are_kept_apart_and_follow_every_change(local: Tuple[Store, Backend]) -> None:
    store, backend = local
    job_id = create(backend, "v2-listed", labels=[{"key": "team", "value": "视觉"}])
    other = create(backend, "v2-other")
    for _ in range(2):  # v1's items first: v2's are never v1's
        assert sent(backend) == expected(backend, store)
        assert described(backend, pageSize="100") == described_expected(backend, store)
    backend.update_job(POOL, job_id, {"priority": "high"})
    backend.stop_job(POOL, other)
    assert described(backend, pageSize="100") == described_expected(backend, store)
    answer = json.loads(described(backend, pageSize="100"))
    assert {j["jobId"]: (j["priority"], j["status"]) for j in answer["jobs"]} == {
        job_id: ("high", "Pending"), other: ("normal", "Stopped")}
    assert {key[0] for key in backend.listed._kept} == {"v1", f"v2 {BackendV2(backend).user_id}"}
    backend.delete_job(POOL, job_id)  # both styles' items dropped
    assert not [key for key in backend.listed._kept if key[1] == job_id]


def test_kept_items_stay_within_their_budget_least_recently_listed_first(local: Tuple[Store, Backend]) -> None:
    store, backend = local
    ids = [create(backend, f"job-{i}") for i in range(6)]
    _, rows = store.list_rows(POOL, None, "createdAt", False, 0, 10)
    one = ListedJobs()
    one.texts("v1", backend.job_view, rows[:1])
    backend.listed = small = ListedJobs(budget=one.size * 3 + one.size // 2)  # room for 3
    assert sent(backend) == expected(backend, store)
    assert len(small) == 3 and small.size <= small.budget
    assert [row[0] for row in rows if ("v1", row[0]) in small._kept] == ids[:3]  # the page's last three
    small.texts("v1", backend.job_view, rows[2:3])  # job-2 listed again: job-1 is now the least recently
    small.texts("v1", backend.job_view, rows[3:4])
    assert [row[0] for row in rows if ("v1", row[0]) in small._kept] == [ids[0], ids[2], ids[3]]
    kept = small.size
    assert kept <= small.budget
    backend.delete_job(POOL, ids[3])  # a deleted job's item is dropped
    assert ("v1", ids[3]) not in small._kept and 0 < small.size < kept
    assert sent(backend) == expected(backend, store) and small.size <= small.budget


def test_json_items_are_spliced_exactly_where_they_stand() -> None:
    items = [json_text({"a": "x\"y"}), json_text([1, 2.5, None])]
    value: Dict[str, Any] = {"before": 'say "' + "0" * 32, "jobs": JSONItems(items), "empty": JSONItems([]),
                             "after": [True]}
    assert json.loads(json_text(value)) == {"before": 'say "' + "0" * 32, "jobs": [{"a": "x\"y"}, [1, 2.5, None]],
                                            "empty": [], "after": [True]}
    with pytest.raises(TypeError):
        json_text({"x": object()})
    with pytest.raises(ValueError):
        json_text({"x": float("nan")})



def test_a_page_asked_again_of_an_unchanged_state_reads_no_job(local: Tuple[Store, Backend]) -> None:
    store, backend = local
    for i in range(3):
        create(backend, f"read-{i}")
    first = sent(backend)
    assert first == expected(backend, store)
    statements: List[str] = []
    store._db.set_trace_callback(statements.append)
    assert sent(backend) == first
    assert [s for s in statements if "FROM jobs" in s] == []
    assert len(backend.listed._pages) == 1 and 0 < backend.listed.pages_size <= backend.listed.page_budget


def test_a_change_by_another_connection_is_listed_at_once(local: Tuple[Store, Backend], tmp_path: Path) -> None:
    """A hand edit of the state (sqlite3 beside the server): PRAGMA data_version sees it."""
    store, backend = local
    job_id = create(backend, "edited")
    assert listed(backend)[job_id]["status"] == "Pending"
    other = sqlite3.connect(str(tmp_path / "state.db"), isolation_level=None)
    try:
        other.execute("UPDATE jobs SET status='Failed', finished_at=1795940061.0 WHERE id=?", (job_id,))
    finally:
        other.close()
    assert (listed(backend)[job_id]["status"], listed(backend)[job_id]["finishedAt"]) == ("Failed",
                                                                                         "2026-11-29T08:14:21Z")
    assert sent(backend) == expected(backend, store)


def test_the_state_version_changes_with_every_change(local: Tuple[Store, Backend], tmp_path: Path) -> None:
    store, backend = local
    seen = [store.version()]
    job_id = create(backend, "versioned")
    seen.append(store.version())
    store.set_job(job_id, priority="high")
    seen.append(store.version())
    assert store.transition(job_id, ["Pending"], status="Stopped")
    seen.append(store.version())
    store.add_event(job_id, "JobStopped", "stopped")
    seen.append(store.version())
    other = sqlite3.connect(str(tmp_path / "state.db"), isolation_level=None)
    other.execute("UPDATE jobs SET name='x' WHERE id=?", (job_id,))
    other.close()
    seen.append(store.version())
    store.delete_job(job_id)
    seen.append(store.version())
    assert len(set(seen)) == len(seen), seen
    assert store.version() == seen[-1]  # and only with a change


def test_kept_pages_stay_within_their_budget(local: Tuple[Store, Backend]) -> None:
    store, backend = local
    for i in range(4):
        create(backend, f"paged-{i}")
    sent(backend, pageSize="1")
    one = backend.listed.pages_size
    backend.listed = pages = ListedJobs(page_budget=one * 2 + one // 2)  # room for 2
    for number in ("1", "2", "3", "1"):
        sent(backend, pageNo=number, pageSize="1")
    assert [q[5] for q in pages._pages] == [2, 0] and pages.pages_size <= pages.page_budget  # offsets
    assert [j["name"] for j in json.loads(sent(backend, pageNo="3", pageSize="1"))["result"]["jobs"]] == ["paged-1"]
