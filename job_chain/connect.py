"""Build an AIHC client from wherever the user's host and keys are, or for the local server.

One function for the CLI's ``--host/--ak/--sk/--credentials/--local`` and for the library's
``ChainSession.from_file(...)``, so both resolve credentials the same way. It sits above both the
client (:mod:`job_chain.aihc`) and the local server (:mod:`job_chain.local`), so neither reaches
into the other.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from job_chain.errors import UsageError


def resolve_api_version(
    api_version: Optional[str] = None,
    *,
    credentials_file: Optional[str] = None,
    api_config: Optional[Mapping[str, Any]] = None,
    api_config_origin: str = "chain file api_config",
    env: Optional[Mapping[str, str]] = None,
) -> str:
    """v1 or v2: --api-version, env AIHC_API_VERSION, the credentials file's
    ``api_config.version``, the chain file's ``api_config.version``; default v1 (seed 001)."""
    from job_chain.aihc.credentials import CREDENTIALS_ENV, load_credentials_file
    from job_chain.aihc.v2 import V1, VERSION_ENV, version_problem

    env = os.environ if env is None else env
    sources = [("--api-version", api_version), (f"env {VERSION_ENV}", env.get(VERSION_ENV) or None)]
    path = credentials_file or env.get(CREDENTIALS_ENV)
    if path:
        section = load_credentials_file(path).get("api_config")
        sources.append((f"credentials file {path} api_config.version",
                        section.get("version") if isinstance(section, dict) else None))
    sources.append((f"{api_config_origin}.version", (api_config or {}).get("version")))
    for origin, value in sources:
        if value is None:
            continue
        problem = version_problem(value)
        if problem:
            raise UsageError(f"{origin} {problem}")
        return str(value)
    return V1


def connect(
    *,
    host: Optional[str] = None,
    ak: Optional[str] = None,
    sk: Optional[str] = None,
    credentials_file: Optional[str] = None,
    local: bool = False,
    local_state_dir: Optional[str] = None,
    api_config: Optional[Mapping[str, Any]] = None,
    api_config_origin: str = "chain file api_config",
    api_version: Optional[str] = None,
    start_local: bool = True,
    **client_kwargs: Any,
) -> Any:
    """An :class:`AIHCClient` (or :class:`AIHCClientV2` for API version v2, see
    :func:`resolve_api_version`); ``local`` uses the background local server of ``local_state_dir``
    (default: env ``JOB_CHAIN_LOCAL_DIR``, else the user's data dir), started if needed unless
    ``start_local`` is false (a read-only command: then a stopped server is an error saying so)."""
    from job_chain.aihc.credentials import resolve_credentials

    version = resolve_api_version(api_version, credentials_file=credentials_file, api_config=api_config,
                                  api_config_origin=api_config_origin)
    if version == "v2":  # imported only when used: every command that signs a request starts here
        from job_chain.aihc.client_v2 import AIHCClientV2 as cls
    else:
        from job_chain.aihc.client import AIHCClient as cls

    if local:
        given = [flag for flag, value in (("--host", host), ("--ak", ak), ("--sk", sk),
                                          ("--credentials", credentials_file)) if value]
        if given:
            raise UsageError(f"--local uses the local server's own host and keys, so {'/'.join(given)} would "
                             f"be ignored: drop {'/'.join(given)}, or drop --local to use them")
        from job_chain.local.daemon import local_credentials_file

        creds = resolve_credentials(credentials_file=local_credentials_file(start=start_local,
                                                                                  state_dir=local_state_dir),
                                    env={})
    else:
        creds = resolve_credentials(
            host=host, ak=ak, sk=sk, credentials_file=credentials_file,
            api_config=api_config, api_config_origin=api_config_origin,
        )
    return cls(creds, **client_kwargs)
