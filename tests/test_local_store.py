"""The local server's job listing, in-process on the Store: served from an index, never a sort
of the whole pool, in the same order as before, and old state.db files get the indexes on open."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterator, List, Optional

import pytest
from conftest import store_page

from job_chain.local.store import LIST_COLUMNS, Store

# The listing query before the indexes: what the new one must order exactly like.
OLD_ORDER = ("SELECT id FROM jobs WHERE pool=? {where} ORDER BY COALESCE({column}, 0) {direction},"
             " seq {direction}")
OLD_SCHEMA = """
CREATE TABLE jobs (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, pool TEXT NOT NULL, name TEXT NOT NULL,
    spec TEXT NOT NULL, status TEXT NOT NULL, priority TEXT NOT NULL, queue TEXT NOT NULL,
    created_at REAL NOT NULL, started_at REAL, finished_at REAL, client_token TEXT, master_port INTEGER,
    UNIQUE (pool, client_token));
CREATE INDEX jobs_pool ON jobs (pool, created_at);
INSERT INTO jobs VALUES ('pytorchjob-old', 1, 'p', 'old', '{"jobSpec": {"command": "true"}}', 'Succeeded',
    'normal', 'default', 1000.0, 1001.0, 1002.0, NULL, NULL);
"""


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    """A store holding jobs in two pools and two queues; some finished (at times out of
    creation order, one tie), some not; two created at the same instant."""
    found = Store(str(tmp_path / "state.db"))
    rows = [  # name, pool, queue, created_at, finished_at
        ("a", "p", "q1", 10.0, 50.0), ("b", "p", "q2", 20.0, None), ("c", "p", "q1", 20.0, 40.0),
        ("d", "other", "q1", 25.0, None), ("e", "p", "q2", 30.0, 40.0), ("f", "p", "q1", 40.0, None),
    ]
    for name, pool, queue, created, finished in rows:
        job, _ = found.create_job(pool, name, {"name": name, "jobSpec": {"command": "true"}}, "normal", queue,
                                  None, 1)
        found.set_job(job["id"], created_at=created, finished_at=finished)
    yield found
    found.close()


def _old_order(store: Store, column: str, direction: str, queue: Optional[str]) -> List[str]:
    where, args = ("AND queue=?", ["p", queue]) if queue else ("", ["p"])
    sql = OLD_ORDER.format(where=where, column=column, direction=direction)
    return [r["id"] for r in store._rows(sql, args)]


@pytest.mark.parametrize("order_by,column", [("createdAt", "created_at"), ("finishedAt", "finished_at")])
@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("queue", [None, "q1"])
def test_a_page_comes_in_the_old_order_straight_from_an_index(
        store: Store, order_by: str, column: str, descending: bool, queue: Optional[str]) -> None:
    direction = "DESC" if descending else "ASC"
    expected = _old_order(store, column, direction, queue)
    statements: List[str] = []
    store._db.set_trace_callback(statements.append)  # the SQL as run, values filled in
    total, first = store_page(store, "p", queue, order_by, descending, 0, 2)
    store._db.set_trace_callback(None)
    _, rest = store_page(store, "p", queue, order_by, descending, 2, 100)
    assert total == len(expected) and [j["id"] for j in first + rest] == expected
    page = next(s for s in statements if s.startswith("SELECT") and "LIMIT" in s)
    plan = " / ".join(r["detail"] for r in store._rows("EXPLAIN QUERY PLAN " + page))
    assert "INDEX jobs_pool_" in plan and "TEMP B-TREE" not in plan, (page, plan)


def test_a_create_finds_its_client_token_from_an_index_not_a_scan(store: Store) -> None:
    statements: List[str] = []
    store._db.set_trace_callback(statements.append)
    _, created = store.create_job("p", "tok", {"jobSpec": {"command": "true"}}, "normal", "default", "tok-1", 1)
    store._db.set_trace_callback(None)
    assert created
    lookup = next(s for s in statements if "client_token=" in s and s.startswith("SELECT"))
    plan = " / ".join(r["detail"] for r in store._rows("EXPLAIN QUERY PLAN " + lookup))
    assert "USING INDEX jobs_token" in plan and "SCAN" not in plan, plan


def test_a_listed_job_carries_what_a_listing_shows_and_no_more(store: Store) -> None:
    _, jobs = store_page(store, "p", None, "createdAt", True, 0, 1)
    assert set(jobs[0]) == {c.strip() for c in LIST_COLUMNS.split(",")}
    assert jobs[0]["spec"]["jobSpec"] == {"command": "true"}  # decoded, as get_job gives it


def test_a_state_db_from_before_gets_the_indexes_on_open(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SCHEMA)
    store = Store(str(path))
    try:
        indexes = {r["name"] for r in store._rows("SELECT name FROM sqlite_master WHERE type='index'")}
        assert {"jobs_pool_created", "jobs_pool_queue_created", "jobs_pool_finished", "jobs_seq"} <= indexes
        assert "jobs_pool" not in indexes  # superseded by jobs_pool_created
        total, jobs = store_page(store, "p", None, "finishedAt", True, 0, 10)
        assert total == 1 and jobs[0]["id"] == "pytorchjob-old" and jobs[0]["finished_at"] == 1002.0
        made, created = store.create_job("p", "new", {"jobSpec": {"command": "true"}}, "normal", "default", None, 1)
        assert created and made["seq"] == 2  # next after the old job
    finally:
        store.close()
    Store(str(path)).close()  # opening again is a no-op, not an error
