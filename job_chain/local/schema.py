"""The local server's SQLite schema, and how an older ``state.db`` is brought up to it on open
(idempotent: tables, indexes and columns are created only where missing)."""

from __future__ import annotations

import sqlite3

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    pool TEXT NOT NULL,
    name TEXT NOT NULL,
    spec TEXT NOT NULL,
    status TEXT NOT NULL,
    priority TEXT NOT NULL,
    queue TEXT NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    client_token TEXT,
    master_port INTEGER,
    UNIQUE (pool, client_token)
);
DROP INDEX IF EXISTS jobs_pool;
CREATE INDEX IF NOT EXISTS jobs_pool_created ON jobs (pool, created_at, seq);
CREATE INDEX IF NOT EXISTS jobs_pool_queue_created ON jobs (pool, queue, created_at, seq);
CREATE INDEX IF NOT EXISTS jobs_pool_finished ON jobs (pool, finished_at, seq);
CREATE INDEX IF NOT EXISTS jobs_seq ON jobs (seq);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status);
CREATE INDEX IF NOT EXISTS jobs_token ON jobs (client_token);  -- a create's token is looked up in every pool
CREATE TABLE IF NOT EXISTS pods (
    job_id TEXT NOT NULL,
    name TEXT NOT NULL,
    replica_type TEXT NOT NULL,
    rank INTEGER NOT NULL,
    status TEXT NOT NULL,
    pid INTEGER,
    create_time REAL,
    exit_code INTEGER,
    started_at REAL,
    finished_at REAL,
    env TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (job_id, name)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    pod TEXT,
    reason TEXT NOT NULL,
    message TEXT NOT NULL,
    type TEXT NOT NULL,
    ts REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS events_job ON events (job_id, pod);
CREATE TABLE IF NOT EXISTS metrics (
    job_id TEXT NOT NULL,
    pod TEXT NOT NULL,
    ts REAL NOT NULL,
    cpu_percent REAL, memory_percent REAL, cpu_time REAL, memory_bytes REAL,
    read_rate REAL, write_rate REAL
);
CREATE INDEX IF NOT EXISTS metrics_job ON metrics (job_id, pod, ts);
CREATE TABLE IF NOT EXISTS log_index (
    job_id TEXT NOT NULL, pod TEXT NOT NULL, ts REAL NOT NULL, pos INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS log_index_pod ON log_index (job_id, pod, ts);
CREATE TABLE IF NOT EXISTS tokens (
    token TEXT PRIMARY KEY, job_id TEXT NOT NULL, pod TEXT NOT NULL, expires REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    ak TEXT PRIMARY KEY, sk TEXT NOT NULL, token_hash TEXT NOT NULL, created REAL NOT NULL, expires REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS pools (
    id TEXT PRIMARY KEY, capacity INTEGER, created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS queues (
    pool TEXT NOT NULL, name TEXT NOT NULL, capacity INTEGER, created_at REAL NOT NULL,
    PRIMARY KEY (pool, name)
);
"""

# columns added since the first release: the body's hash (idempotency), the API version that
# created the job, when it was scheduled, fault-tolerance restarts (job and pods)
ADDED_COLUMNS = (("jobs", "body_hash", "TEXT"), ("jobs", "api", "TEXT"), ("jobs", "scheduled_at", "REAL"),
                 ("jobs", "restarts", "INTEGER"), ("pods", "restart_count", "INTEGER"))


def migrate(db: sqlite3.Connection) -> None:
    """Create what is missing: the tables and indexes of :data:`SCHEMA`, the :data:`ADDED_COLUMNS`."""
    db.executescript(SCHEMA)
    for table, column, kind in ADDED_COLUMNS:
        if column not in {r[1] for r in db.execute(f"PRAGMA table_info({table})").fetchall()}:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
