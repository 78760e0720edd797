"""Build an AIHC client from wherever the user's host and keys are.

One function for the CLI's ``--host/--ak/--sk/--session-token/--credentials``, the library's
``ChainSession.from_file(...)`` and the in-job advance, so all resolve credentials the same way.
``--local`` (the local server's own keys) is resolved above, in :mod:`job_chain.session.places`:
the client never reaches into the local server.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Optional

from job_chain.errors import UsageError

if TYPE_CHECKING:
    from job_chain.aihc.client import AIHCClient


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
    session_token: Optional[str] = None,
    credentials_file: Optional[str] = None,
    api_config: Optional[Mapping[str, Any]] = None,
    api_config_origin: str = "chain file api_config",
    api_version: Optional[str] = None,
    only_credentials_file: Optional[str] = None,
    carried: Optional[Mapping[str, Any]] = None,
    carried_origin: str = "the run record",
    **client_kwargs: Any,
) -> AIHCClient:
    """An :class:`AIHCClient` (or :class:`AIHCClientV2` for API version v2, see
    :func:`resolve_api_version`). ``only_credentials_file`` takes the host and keys from that file
    alone, whatever the environment says (the local server's own file: see
    :func:`job_chain.session.places.connect_to`). ``carried``: a run record's credentials, which a
    run's jobs take before anything else (:func:`~job_chain.aihc.credentials.carried_credentials`)."""
    from job_chain.aihc.credentials import carried_credentials, resolve_credentials

    version = resolve_api_version(api_version, credentials_file=credentials_file, api_config=api_config,
                                  api_config_origin=api_config_origin)
    found = carried_credentials(carried, carried_origin) if carried else None
    if found is not None:
        creds = found
    elif only_credentials_file is not None:
        creds = resolve_credentials(credentials_file=only_credentials_file, env={})
    else:
        creds = resolve_credentials(
            host=host, ak=ak, sk=sk, session_token=session_token, credentials_file=credentials_file,
            api_config=api_config, api_config_origin=api_config_origin,
        )
    # the client's module is imported only when used: every command that signs a request starts here
    if version == "v2":
        from job_chain.aihc.client_v2 import AIHCClientV2

        return AIHCClientV2(creds, **client_kwargs)
    from job_chain.aihc.client import AIHCClient as V1

    return V1(creds, **client_kwargs)
