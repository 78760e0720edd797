"""Where a run runs: the local server, or an endpoint, and the client that speaks to it.

A run remembers its place, so steering it needs no ``--local`` or ``--host``; explicit options
that contradict a run's place are refused rather than silently sending it elsewhere.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from job_chain.aihc.api import JobsAPI
from job_chain.errors import UsageError
from job_chain.session.runs import Run
from job_chain.spec.model import Chain


def connect_to(*, local: bool = False, local_state_dir: Optional[str] = None, start_local: bool = True,
               **kwargs: Any) -> Any:
    """:func:`~job_chain.aihc.connect.connect`, or with ``local`` the background local server of
    ``local_state_dir`` (default: env ``JOB_CHAIN_LOCAL_DIR``, else the user's data dir) with its
    own host and keys, started if needed unless ``start_local`` is false (a read-only command: then
    a stopped server is an error saying so)."""
    from job_chain.aihc.connect import connect

    if not local:
        return connect(**kwargs)
    given = [flag for flag, key in (("--host", "host"), ("--ak", "ak"), ("--sk", "sk"),
                                    ("--credentials", "credentials_file")) if kwargs.get(key)]
    if given:
        raise UsageError(f"--local uses the local server's own host and keys, so {'/'.join(given)} would "
                         f"be ignored: drop {'/'.join(given)}, or drop --local to use them")
    from job_chain.local.daemon import local_credentials_file

    return connect(only_credentials_file=local_credentials_file(start=start_local, state_dir=local_state_dir),
                   **kwargs)


class PlacesMixin:
    """The clients part of :class:`~job_chain.session.ChainSession`."""

    @property
    def api_version(self) -> str:
        """v1 or v2, as a new client would speak (see :func:`~job_chain.aihc.connect.resolve_api_version`)."""
        if self._client is not None:
            return str(getattr(self._client, "api_version", "v1"))
        from job_chain.aihc.connect import resolve_api_version

        return resolve_api_version(self._api_version, credentials_file=self._explicit.get("credentials_file"),
                                   api_config=self.chain.api_config, api_config_origin=f"{self.path} api_config")

    @property
    def _explicit_place(self) -> bool:
        return self._local or any(self._explicit.values())

    def chain_for(self, local: bool) -> Chain:
        """The chain file as a new run would see it: local pods read this installation."""
        if not local:
            return self.chain
        from dataclasses import replace

        return replace(self.chain, config_path=None, scrips_path=None)

    @property
    def planned_host(self) -> str:
        """Where a new run would be submitted, for showing a plan without connecting anywhere."""
        if self._local:
            return "<local server>"
        return self._explicit.get("host") or self.chain.api_config.get("host") or "<AIHC host>"

    def client_for(self, run: Optional[Run] = None) -> JobsAPI:
        """The client for ``run`` (None: for a new run)."""
        if self._client is not None:
            return self._client
        if run is not None and self._explicit_place:
            if self._local and not run.local and run.endpoint:
                raise UsageError(f"run {run.run_id} runs on {run.endpoint}, not on the local server: drop --local")
            if run.local and not self._local:
                raise UsageError(f"run {run.run_id} runs on the local server: drop --host/--ak/--sk/--credentials")
        if self._explicit_place or run is None:
            key: Tuple[Any, ...] = ("explicit", self._local, *sorted(self._explicit.items()))
            kwargs: Dict[str, Any] = dict(self._explicit, local=self._local)
        elif run.local:
            key, kwargs = ("local", run.local_state_dir), {"local": True, "local_state_dir": run.local_state_dir}
        else:
            key, kwargs = ("endpoint", run.endpoint), {"host": run.endpoint or None}
        if key not in self._clients:
            api_config = self._api_config_for(run)
            # local runs take only the version from api_config (host and keys are the server's)
            kwargs.update(api_config=api_config if not kwargs.get("local") else {"version": api_config.get("version")},
                          api_config_origin=f"{self.path} api_config", api_version=self._api_version,
                          start_local=self._start_local)
            self._clients[key] = connect_to(**kwargs)
        return self._clients[key]

    def _api_config_for(self, run: Optional[Run]) -> Dict[str, Any]:
        """Credentials and version for a client: a new run's from the file; a recorded run's by rule 8
        (:meth:`~job_chain.record.records.RunRecords.api_config`), as its jobs decide it."""
        if run is None:
            return dict(self._chain.api_config) if self._chain is not None else {}
        return self.records.api_config(run.run_id, self.frozen(run).api_config.get("version"),
                                       self._file_api_config)

    def _file_api_config(self) -> Dict[str, Any]:
        """The file's api_config as the session knows it: its chain's, else read tolerantly (broken file)."""
        if self._chain is not None:
            return dict(self._chain.api_config)
        from job_chain.aihc.credentials import file_api_config

        return file_api_config(self.path)
