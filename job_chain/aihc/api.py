"""What the run library needs from an AIHC client, as a protocol.

:class:`~job_chain.aihc.client.AIHCClient` (v1) and :class:`~job_chain.aihc.client_v2.AIHCClientV2`
(v2) satisfy it; so can a test double that keeps jobs in memory, without the library
depending on either.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, Optional, Protocol


class JobsAPI(Protocol):
    """The training-job calls a chain uses: create, list, read, stop, events, logs."""

    endpoint: str

    def create_job(self, pool: str, body: Dict[str, Any], client_token: Optional[str] = None) -> Dict[str, Any]:
        """Create a job; the same ``client_token`` never creates a second one."""

    def iter_jobs(self, pool: str, *, queue: Optional[str] = None, order_by: Optional[str] = None,
                  order: Optional[str] = None, page_size: int = 100) -> Iterator[Dict[str, Any]]:
        """Every job of the pool, page after page."""

    def list_jobs(self, pool: str, *, queue: Optional[str] = None, order_by: Optional[str] = None,
                  order: Optional[str] = None, page_no: Optional[int] = None,
                  page_size: Optional[int] = None) -> Dict[str, Any]:
        """One page of the pool's jobs: ``{"total", "jobs", "pageNo", "pageSize", ...}`` (v1's shape)."""

    def get_job(self, pool: str, job_id: str) -> Dict[str, Any]:
        """One job with its ``podList``."""

    def stop_job(self, pool: str, job_id: str) -> Dict[str, Any]:
        """Stop a job (idempotent)."""

    def job_events(self, pool: str, job_id: str, *, framework: str = "PyTorchJob",
                   start_time: Optional[str] = None, end_time: Optional[str] = None) -> Dict[str, Any]:
        """``{"events": [...]}`` of a job: where exit codes and failure reasons are told."""

    def pod_logs(self, pool: str, job_id: str, pod: str, *, start_time: Optional[int] = None,
                 max_lines: Optional[int] = None, chunk: Optional[int] = None, end_time: Optional[int] = None,
                 keywords: Optional[str] = None, marker: Optional[str] = None) -> Dict[str, Any]:
        """``{"logs": [...], "nextMarker": …}``: one page of one pod's log (see :mod:`logpages`)."""


class LazyClient:
    """An API client made on first use (credentials resolved, the SDK imported then): a hop that
    decides from the run record, or a look at a finished run whose jobs are cached, needs none."""

    def __init__(self, build: Callable[[], Any]) -> None:
        import threading

        self._build = build
        self._client: Any = None
        self._making = threading.Lock()  # pages asked for at once first use it from several threads

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            with self._making:
                if self._client is None:
                    self._client = self._build()
        return getattr(self._client, name)
