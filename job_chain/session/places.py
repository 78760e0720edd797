"""Where a run runs: the local server, or an endpoint, and the client that speaks to it.

A run remembers its place, so steering it needs no ``--local`` or ``--host``; explicit options
that contradict a run's place are refused rather than silently sending it elsewhere.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from job_chain.aihc.api import JobsAPI
from job_chain.errors import UsageError
from job_chain.record.records import RunRecords
from job_chain.session.chainfile import ChainFile
from job_chain.session.runs import Run


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
                                    ("--session-token", "session_token"),
                                    ("--credentials", "credentials_file")) if kwargs.get(key)]
    if given:
        raise UsageError(f"--local uses the local server's own host and keys, so {'/'.join(given)} would "
                         f"be ignored: drop {'/'.join(given)}, or drop --local to use them")
    from job_chain.local.daemon import local_credentials_file

    return connect(only_credentials_file=local_credentials_file(start=start_local, state_dir=local_state_dir),
                   **kwargs)


class Places:
    """Where the session's runs run, and one client per place, made when first asked.

    ``client`` (anything satisfying :class:`~job_chain.aihc.api.JobsAPI`) is used for every run when
    given. Otherwise a run's client comes from the explicit ``local``/``host``/``ak``/``sk``/
    ``credentials`` when any is given (refused when it contradicts where the run runs), else from
    where the run was recorded to run; a new run's from the explicit options, else the usual
    credential sources. ``api_config`` is the file's for a new run and rule 8's for a recorded one
    (:meth:`~job_chain.record.records.RunRecords.api_config`), as the run's own jobs have it.
    """

    def __init__(self, file: ChainFile, records: RunRecords, *, client: Optional[JobsAPI] = None,
                 local: bool = False, explicit: Optional[Dict[str, Optional[str]]] = None,
                 api_version: Optional[str] = None, start_local: bool = True) -> None:
        self.file = file
        self.records = records
        self.client = client
        self.local = local
        self.explicit: Dict[str, Optional[str]] = dict(explicit or {})  # host, ak, sk, session_token, credentials_file
        self.api_version_option = api_version
        self.start_local = start_local  # False: a stopped local server is reported, never started
        self._clients: Dict[Tuple[Any, ...], JobsAPI] = {}

    @property
    def explicit_place(self) -> bool:
        """The caller said where (``--local``, ``--host``, keys or a credentials file)."""
        return self.local or any(self.explicit.values())

    @property
    def api_version(self) -> str:
        """v1 or v2, as a new client would speak (see :func:`~job_chain.aihc.connect.resolve_api_version`)."""
        if self.client is not None:
            return str(getattr(self.client, "api_version", "v1"))
        from job_chain.aihc.connect import resolve_api_version

        return resolve_api_version(self.api_version_option, credentials_file=self.explicit.get("credentials_file"),
                                   api_config=self.file.chain.api_config,
                                   api_config_origin=f"{self.file.path} api_config")

    def engine_of(self, run: Optional[Run] = None) -> str:
        """Where ``run`` (None: a new run) runs its jobs: its frozen chain's ``engine``, else the file's."""
        if run is None:
            return self.file.chain.engine
        return self.records.run_placed(run.run_id, lambda: self.file.chain)[0]

    def client_for(self, run: Optional[Run] = None) -> JobsAPI:
        """The client for ``run`` (None: for a new run)."""
        if self.client is not None:
            return self.client
        if self.engine_of(run) == "slurm":
            if self.explicit_place:
                raise UsageError("this chain runs on Slurm (\"engine\": \"slurm\"): --local, --host, keys and "
                                 "--credentials do not apply; drop them")
            if ("slurm",) not in self._clients:
                from job_chain.slurm.engine import SlurmEngine

                self._clients[("slurm",)] = SlurmEngine(self.records.slurm_dir())  # type: ignore[assignment]
            return self._clients[("slurm",)]
        if run is not None and self.explicit_place:
            if self.local and not run.local and run.endpoint:
                raise UsageError(f"run {run.run_id} runs on {run.endpoint}, not on the local server: drop --local")
            if run.local and not self.local:
                raise UsageError(f"run {run.run_id} runs on the local server: drop --host/--ak/--sk/--credentials")
        kwargs: Dict[str, Any]
        if self.explicit_place or run is None:
            key: Tuple[Any, ...] = ("explicit", self.local, *sorted(self.explicit.items()))
            kwargs = dict(self.explicit, local=self.local)
        elif run.local:
            key, kwargs = ("local", run.local_state_dir), {"local": True, "local_state_dir": run.local_state_dir}
        else:
            key, kwargs = ("endpoint", run.endpoint), {"host": run.endpoint or None}
        if key not in self._clients:
            api_config = self._api_config_for(run)
            # local runs take only the version from api_config (host and keys are the server's)
            kwargs.update(api_config=api_config if not kwargs.get("local") else {"version": api_config.get("version")},
                          api_config_origin=f"{self.file.path} api_config", api_version=self.api_version_option,
                          start_local=self.start_local)
            self._clients[key] = connect_to(**kwargs)
        return self._clients[key]

    def carried(self, run: Optional[Run] = None) -> Dict[str, str]:
        """What a run's record carries to its jobs (``RunRecords.save_credentials``), so that they
        reach the API with nothing from their environment, however ``run`` was given its host and
        keys: a local run's local server credentials file (which the server rewrites when it
        starts), else the host and key pair of the run's client (and its session token, if any);
        {} for a client that has none to give (one made by the caller without them)."""
        client = self.client_for(run)
        if self.client is None and (run.local if run is not None else self.local):
            from job_chain.local.daemon import local_credentials_file

            return {"credentialsFile": local_credentials_file(
                start=False, state_dir=run.local_state_dir if run is not None else None)}
        creds = getattr(client, "credentials", None)
        if creds is None:
            return {}
        from job_chain.aihc.credentials import TOKEN_KEY

        return {"host": creds.host, "ak": creds.ak, "sk": creds.sk, **({TOKEN_KEY: creds.token} if creds.token else {})}

    def _api_config_for(self, run: Optional[Run]) -> Dict[str, Any]:
        """Credentials and version for a client: a new run's are the file's; a recorded run's are
        decided by rule 8 with the version of the chain it runs (rule 7), as its jobs decide them."""
        if run is None:
            return self.file.api_config()
        version = self.records.run_placed(run.run_id, lambda: self.file.chain)[1]
        # a local run takes only the version (host and keys are the server's): the file is not read for it
        return self.records.api_config(run.run_id, version,
                                       (lambda: {}) if run.local else self.file.api_config)
