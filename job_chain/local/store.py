"""The local server's state in one SQLite file (WAL): jobs, pods, events, metrics, tokens.

Plain data access, no HTTP and no processes, so it can be tested alone and survives restarts.
One connection guarded by a lock: every statement is short, and a single writer makes the
``clientToken`` idempotency check-and-insert atomic.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from job_chain.aihc.spec import PRIORITIES
from job_chain.local.schema import migrate

# Scheduled: given its place (capacity counts it), its pods being created (``--schedule-delay``)
PENDING, SCHEDULED, RUNNING, STOPPING = "Pending", "Scheduled", "Running", "Stopping"
SUCCEEDED, FAILED, STOPPED = "Succeeded", "Failed", "Stopped"
TERMINAL = frozenset({SUCCEEDED, FAILED, STOPPED})
ACTIVE = (SCHEDULED, RUNNING, STOPPING)  # jobs that hold their queue's and pool's capacity
PRIORITY_RANK = {p: rank for rank, p in enumerate(PRIORITIES)}  # high first


# What a listing shows (Backend.job_view); its orders come straight from the jobs_pool_* indexes.
LIST_COLUMNS = ("id, seq, pool, name, spec, status, priority, queue, created_at, scheduled_at, started_at, "
                "finished_at, restarts")
LIST_NAMES = tuple(name.strip() for name in LIST_COLUMNS.split(","))

METRIC_COLUMNS = {
    "CpuUsage": "cpu_percent",
    "MemoryUsage": "memory_percent",
    "CpuTime": "cpu_time",
    "MemoryAllocation": "memory_bytes",
    "DiskReadRate": "read_rate",
    "DiskWriteRate": "write_rate",
}


def _time_range(start: Optional[float], end: Optional[float], args: List[Any]) -> str:
    """SQL for an optional ``ts`` window; appends its parameters to ``args``."""
    clause = ""
    if start is not None:
        clause += " AND ts>=?"
        args.append(start)
    if end is not None:
        clause += " AND ts<=?"
        args.append(end)
    return clause



def new_job_id(api: str) -> str:
    """A job id of the form AIHC gives: v1's ``pytorchjob-<uuid>``, v2's ``job-`` and 12 lowercase
    letters and digits (the 2026 pages' examples, ``job-xf3iqxrm6pyk``), so nothing can depend on
    one form."""
    if api == "v2":
        import secrets
        import string

        alphabet = string.ascii_lowercase + string.digits
        return "job-" + "".join(secrets.choice(alphabet) for _ in range(12))
    return f"pytorchjob-{uuid.uuid4()}"

class Store:
    """All persistent state of one local server (``state_dir/state.db``)."""

    def __init__(self, path: str, read_only: bool = False) -> None:
        """Open (creating and migrating) the state at ``path``; ``read_only``: only look at an
        existing one, as a tool beside a running server does (sqlite3.Error if there is none)."""
        self.path = path
        self._lock = threading.RLock()
        if read_only:
            self._db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True,
                                       check_same_thread=False, isolation_level=None, timeout=30)
            self._db.row_factory = sqlite3.Row
            return
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        # SQLite gives -wal/-shm the database file's mode, so creating that 0600 covers all three
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.chmod(path + suffix, 0o600)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        migrate(self._db)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _rows(self, sql: str, args: Iterable[Any] = ()) -> List[Dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._db.execute(sql, tuple(args)).fetchall()]

    def _exec(self, sql: str, args: Iterable[Any] = ()) -> int:
        with self._lock:
            return self._db.execute(sql, tuple(args)).rowcount

    # -- jobs ------------------------------------------------------------------------------
    def create_job(
        self, pool: str, name: str, spec: Dict[str, Any], priority: str, queue: str,
        client_token: Optional[str], replicas: int, body_hash: Optional[str] = None, api: str = "v1",
    ) -> Tuple[Dict[str, Any], bool]:
        """Insert a Pending job and its pods; return (job, created). Same token → same job
        (the caller compares ``body_hash`` with the stored one to refuse a different body)."""
        with self._lock:
            if client_token:  # a token names one request across pools (the caller compares pools)
                found = self._db.execute("SELECT * FROM jobs WHERE client_token=?", (client_token,)).fetchone()
                if found:
                    return _job(dict(found)), False
            job_id = new_job_id(api)
            now = time.time()
            self._db.execute("BEGIN IMMEDIATE")
            try:
                seq = self._db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs").fetchone()[0]
                self._db.execute(
                    "INSERT INTO jobs (id, seq, pool, name, spec, status, priority, queue,"
                    " created_at, client_token, body_hash, api) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (job_id, seq, pool, name, json.dumps(spec), PENDING, priority, queue, now,
                     client_token or None, body_hash, api),
                )
                for rank in range(replicas):
                    kind = "master" if rank == 0 else "worker"
                    pod = f"{name}-master-0" if rank == 0 else f"{name}-worker-{rank - 1}"
                    self._db.execute(
                        "INSERT INTO pods (job_id, name, replica_type, rank, status)"
                        " VALUES (?,?,?,?,?)", (job_id, pod, kind, rank, PENDING),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            return self.get_job(job_id) or {}, True

    def get_job(self, job_id: str, pool: Optional[str] = None) -> Optional[Dict[str, Any]]:
        if pool is None:
            rows = self._rows("SELECT * FROM jobs WHERE id=?", (job_id,))
        else:
            rows = self._rows("SELECT * FROM jobs WHERE id=? AND pool=?", (job_id, pool))
        return _job(rows[0]) if rows else None

    def list_rows(
        self, pool: str, queue: Optional[str], order_by: str, descending: bool,
        offset: int, limit: int, status: Optional[str] = None, name: Optional[str] = None,
    ) -> Tuple[int, List[Tuple[Any, ...]]]:
        """One page of a pool's jobs in an index's order, never a sort of the pool (NULL finished_at
        sorts lowest, as the 0 it once counted as); ``name`` matches a part of the name (v2's keyword).

        Each row is the :data:`LIST_NAMES` values in that order, ``spec`` as stored (JSON text):
        what a listing's view is made from, whole, so a caller may keep a view per row."""
        column = "finished_at" if order_by == "finishedAt" else "created_at"
        where, args = "pool=?", [pool]
        if queue:
            where += " AND queue=?"
            args.append(queue)
        if status:
            where += " AND status=?"
            args.append(status)
        if name:
            where += " AND instr(name, ?) > 0"
            args.append(name)
        direction = "DESC" if descending else "ASC"
        with self._lock:  # the count and the page from one moment of this connection
            total = self._db.execute(f"SELECT COUNT(*) FROM jobs WHERE {where}", args).fetchone()[0]
            cursor = self._db.cursor()
            cursor.row_factory = None  # plain tuples: no sqlite3.Row, no dict per row
            rows = cursor.execute(
                f"SELECT {LIST_COLUMNS} FROM jobs WHERE {where} ORDER BY {column} {direction},"
                f" seq {direction} LIMIT ? OFFSET ?", args + [limit, offset],
            ).fetchall()
        return total, rows

    def version(self) -> Tuple[int, int]:
        """What differs after any change to the database: the rows this connection has changed
        (``total_changes``) and ``PRAGMA data_version`` (a commit by any other connection). Read it
        before what it dates."""
        with self._lock:
            return self._db.total_changes, self._db.execute("PRAGMA data_version").fetchone()[0]

    def jobs_with_status(self, statuses: Iterable[str]) -> List[Dict[str, Any]]:
        wanted = list(statuses)
        marks = ",".join("?" * len(wanted))
        return [_job(r) for r in self._rows(f"SELECT * FROM jobs WHERE status IN ({marks})", wanted)]

    def next_pending(self, full_pools: Iterable[str] = (),
                     full_queues: Iterable[Tuple[str, str]] = ()) -> Optional[Dict[str, Any]]:
        """The queued job to start next: priority (high first), then age; jobs of a full pool
        or queue wait (others behind them may start)."""
        ranks = " ".join(f"WHEN '{p}' THEN {rank}" for p, rank in PRIORITY_RANK.items())
        where, args = "status=?", [PENDING]
        pools = list(full_pools)
        if pools:
            where += f" AND pool NOT IN ({','.join('?' * len(pools))})"
            args += pools
        for pool, queue in full_queues:
            where += " AND NOT (pool=? AND queue=?)"
            args += [pool, queue]
        rows = self._rows(
            f"SELECT * FROM jobs WHERE {where} ORDER BY CASE priority {ranks} ELSE {len(PRIORITY_RANK)} END,"
            " seq LIMIT 1", args,
        )
        return _job(rows[0]) if rows else None

    # -- pools and queues ------------------------------------------------------------------
    def configure(self, pools: Iterable[Tuple[str, Optional[int]]],
                  queues: Iterable[Tuple[str, str, Optional[int]]]) -> None:
        """Replace the pools and queues with this server run's (none: any pool is accepted)."""
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("DELETE FROM queues")
                self._db.execute("DELETE FROM pools")
                self._db.executemany("INSERT INTO pools VALUES (?,?,?)",
                                     [(p, cap, now) for p, cap in pools])
                self._db.executemany("INSERT INTO queues VALUES (?,?,?,?)",
                                     [(p, q, cap, now) for p, q, cap in queues])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def pools(self) -> List[Dict[str, Any]]:
        return self._rows("SELECT * FROM pools ORDER BY id")

    def queues(self, pool: Optional[str] = None) -> List[Dict[str, Any]]:
        where = "" if pool is None else "WHERE pool=? "
        return self._rows(f"SELECT * FROM queues {where}ORDER BY pool, name", () if pool is None else (pool,))

    def queue_jobs(self, pool: Optional[str] = None) -> Dict[Tuple[str, str], List[Dict[str, Any]]]:
        """The queued and active jobs of every queue (or of ``pool``'s), grouped by (pool, queue),
        from one query: each job's ``status``, and the ``spec`` of an active one (what it holds);
        a Pending job's spec is None (it holds nothing)."""
        statuses = [PENDING, *ACTIVE]
        where, args = f"status IN ({','.join('?' * len(statuses))})", statuses
        if pool is not None:
            where += " AND pool=?"
            args.append(pool)
        groups: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
        for row in self._rows("SELECT pool, queue, status, CASE WHEN status=? THEN NULL ELSE spec END AS spec"
                              f" FROM jobs WHERE {where}", [PENDING, *args]):
            row["spec"] = None if row["spec"] is None else json.loads(row["spec"])
            groups.setdefault((row["pool"], row["queue"]), []).append(row)
        return groups

    def full(self, default_capacity: Optional[int]) -> Tuple[List[str], List[Tuple[str, str]]]:
        """Pools and queues with as many active jobs as their capacity (None: unlimited;
        a queue without one has ``default_capacity``)."""
        active: Dict[Tuple[str, str], int] = {}
        for row in self._rows("SELECT pool, queue, COUNT(*) AS n FROM jobs WHERE status IN (?,?,?)"
                              " GROUP BY pool, queue", ACTIVE):
            active[(row["pool"], row["queue"])] = row["n"]
        pools = [p["id"] for p in self.pools() if p["capacity"] is not None
                 and sum(n for (pool, _), n in active.items() if pool == p["id"]) >= p["capacity"]]
        queues = []
        for q in self.queues():
            capacity = q["capacity"] if q["capacity"] is not None else default_capacity
            if capacity is not None and active.get((q["pool"], q["name"]), 0) >= capacity:
                queues.append((q["pool"], q["name"]))
        return pools, queues

    def count_active(self) -> int:
        return self._rows("SELECT COUNT(*) AS n FROM jobs WHERE status IN (?,?,?)", ACTIVE)[0]["n"]

    def count_by_status(self) -> Dict[str, int]:
        return {r["status"]: r["n"] for r in self._rows("SELECT status, COUNT(*) AS n FROM jobs GROUP BY status")}

    def set_job(self, job_id: str, **fields: Any) -> None:
        cols = ", ".join(f"{k}=?" for k in fields)
        self._exec(f"UPDATE jobs SET {cols} WHERE id=?", list(fields.values()) + [job_id])

    def transition(self, job_id: str, from_states: Iterable[str], **fields: Any) -> bool:
        """Update a job only if its status is one of ``from_states`` (compare-and-set)."""
        states = list(from_states)
        cols = ", ".join(f"{k}=?" for k in fields)
        marks = ",".join("?" * len(states))
        return self._exec(
            f"UPDATE jobs SET {cols} WHERE id=? AND status IN ({marks})",
            list(fields.values()) + [job_id] + states,
        ) > 0

    def delete_job(self, job_id: str) -> None:
        with self._lock:
            for table, column in (("jobs", "id"), ("pods", "job_id"), ("events", "job_id"),
                                  ("metrics", "job_id"), ("log_index", "job_id"),
                                  ("tokens", "job_id")):
                self._db.execute(f"DELETE FROM {table} WHERE {column}=?", (job_id,))

    # -- pods ------------------------------------------------------------------------------
    def pods(self, job_id: str) -> List[Dict[str, Any]]:
        rows = self._rows("SELECT * FROM pods WHERE job_id=? ORDER BY rank", (job_id,))
        for row in rows:
            row["env"] = json.loads(row["env"])
        return rows

    def get_pod(self, job_id: str, name: str) -> Optional[Dict[str, Any]]:
        rows = [p for p in self.pods(job_id) if p["name"] == name]
        return rows[0] if rows else None

    def set_pod(self, job_id: str, name: str, **fields: Any) -> None:
        if "env" in fields:
            fields["env"] = json.dumps(fields["env"])
        cols = ", ".join(f"{k}=?" for k in fields)
        self._exec(f"UPDATE pods SET {cols} WHERE job_id=? AND name=?",
                   list(fields.values()) + [job_id, name])

    # -- events ----------------------------------------------------------------------------
    def add_event(self, job_id: str, reason: str, message: str, pod: Optional[str] = None,
                  kind: str = "Normal", ts: Optional[float] = None) -> None:
        self._exec("INSERT INTO events (job_id, pod, reason, message, type, ts) VALUES (?,?,?,?,?,?)",
                   (job_id, pod, reason, message, kind, time.time() if ts is None else ts))

    def events(self, job_id: str, pod: Optional[str], start: Optional[float],
               end: Optional[float]) -> List[Dict[str, Any]]:
        where, args = "job_id=?", [job_id]
        if pod is None:
            where += " AND pod IS NULL"
        else:
            where += " AND pod=?"
            args.append(pod)
        where += _time_range(start, end, args)
        return self._rows(f"SELECT * FROM events WHERE {where} ORDER BY ts DESC, id DESC", args)

    # -- metrics and the log-offset index ---------------------------------------------------
    def add_samples(self, samples: List[Tuple[Any, ...]], offsets: List[Tuple[Any, ...]]) -> None:
        """One sampler tick: metric rows (job, pod, ts, 6 values) and log offsets."""
        with self._lock:
            self._db.executemany("INSERT INTO metrics VALUES (?,?,?,?,?,?,?,?,?)", samples)
            self._db.executemany("INSERT INTO log_index VALUES (?,?,?,?)", offsets)

    def samples(self, job_id: str, pod: str, metric: str, start: Optional[float],
                end: Optional[float]) -> List[Tuple[float, float]]:
        column = METRIC_COLUMNS[metric]
        where, args = "job_id=? AND pod=?", [job_id, pod]
        where += _time_range(start, end, args)
        rows = self._rows(f"SELECT ts, {column} AS v FROM metrics WHERE {where} ORDER BY ts", args)
        return [(r["ts"], r["v"]) for r in rows if r["v"] is not None]

    def log_offset(self, job_id: str, pod: str, ts: float, after: bool = False) -> Optional[int]:
        """Log size at the latest index sample at or before ``ts`` (0 if none), or with ``after``
        at the first one at or after it (None if none: the log as it is now)."""
        compare, direction = (">=", "ASC") if after else ("<=", "DESC")
        rows = self._rows(f"SELECT pos FROM log_index WHERE job_id=? AND pod=? AND ts{compare}?"
                          f" ORDER BY ts {direction} LIMIT 1", (job_id, pod, ts))
        return int(rows[0]["pos"]) if rows else (None if after else 0)

    # -- webterminal tokens ----------------------------------------------------------------
    def add_token(self, job_id: str, pod: str, ttl: float) -> str:
        token = uuid.uuid4().hex + uuid.uuid4().hex
        self._exec("INSERT INTO tokens VALUES (?,?,?,?)", (token, job_id, pod, time.time() + ttl))
        return token

    def take_token(self, token: str) -> Optional[Tuple[str, str]]:
        """Consume a token: (job, pod) if it exists and has not expired; single use."""
        with self._lock:
            row = self._db.execute("SELECT * FROM tokens WHERE token=?", (token,)).fetchone()
            if row is None:
                return None
            self._db.execute("DELETE FROM tokens WHERE token=?", (token,))
        if row["expires"] < time.time():
            return None
        return row["job_id"], row["pod"]

    # -- temporary credentials (STS GetSessionToken) ---------------------------------------------
    def add_session(self, seconds: int) -> Dict[str, Any]:
        """New temporary credentials valid ``seconds`` from now: ``{ak, sk, token, created,
        expires}``. The token is kept only as its SHA-256 (the secret key must be kept: a request's
        signature is recomputed with it); ones expired a week ago are forgotten."""
        import hashlib
        import secrets

        now = time.time()
        ak, sk, token = secrets.token_hex(16), secrets.token_hex(16), secrets.token_urlsafe(96)
        with self._lock:
            self._db.execute("DELETE FROM sessions WHERE expires < ?", (now - 7 * 86400,))
            self._db.execute("INSERT INTO sessions VALUES (?,?,?,?,?)",
                             (ak, sk, hashlib.sha256(token.encode()).hexdigest(), now, now + seconds))
        return {"ak": ak, "sk": sk, "token": token, "created": now, "expires": now + seconds}

    def session(self, ak: str) -> Optional[Dict[str, Any]]:
        """The temporary credentials of access key ``ak`` (``sk``, ``token_hash``, ``expires``), if issued."""
        rows = self._rows("SELECT sk, token_hash, expires FROM sessions WHERE ak=?", (ak,))
        return rows[0] if rows else None


def listed_job(row: Tuple[Any, ...]) -> Dict[str, Any]:
    """A row of :meth:`Store.list_rows` as a job dict, its ``spec`` read."""
    job = dict(zip(LIST_NAMES, row))
    job["spec"] = json.loads(job["spec"])
    return job


def _job(row: Dict[str, Any]) -> Dict[str, Any]:
    row = dict(row)
    row["spec"] = json.loads(row["spec"])
    return row
