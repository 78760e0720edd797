"""Where host and access keys come from, in one documented order.

Order (first that has a value wins): CLI flags; env ``AIHC_HOST``/``AIHC_AK``/``AIHC_SK``,
then ``HOST``/``AK``/``SK`` as in Baidu's AIHC SDK docs; a credentials file (``--credentials``
or ``JOB_CHAIN_CREDENTIALS``); a chain file's ``api_config``. The key pair is taken whole from
one source, so an AK from one place is never paired with an SK from another; so is a BCE session
token (STS temporary credentials: ``--session-token``, env ``AIHC_SESSION_TOKEN`` beside
``AIHC_AK``/``AIHC_SK``, ``sessionToken`` in a credentials file or ``api_config``), which belongs
to the temporary key pair it was issued with.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

from job_chain.errors import CredentialsMissing, UsageError
from job_chain.util.files import read_json_dict

CREDENTIALS_ENV = "JOB_CHAIN_CREDENTIALS"
TOKEN_ENV = "AIHC_SESSION_TOKEN"
TOKEN_KEY = "sessionToken"  # in a credentials file, api_config and the run record (BCE STS's own name)
_PLACEHOLDERS = {"your ak", "your sk", "ak", "sk", "xxx", "<ak>", "<sk>"}


class Credentials:
    """An AIHC endpoint and key pair. ``repr`` never shows the secret key. (A plain class: every
    hop that creates a job builds one; a named tuple costs a fresh python ~0.3 ms to make, and
    ``dataclasses`` ~4 ms of imports.)"""

    __slots__ = ("host", "ak", "sk", "source", "host_source", "token")

    def __init__(self, host: str, ak: str, sk: str, source: str = "", host_source: str = "",
                 token: str = "") -> None:
        self.host, self.ak, self.sk = host, ak, sk
        self.source = source  # where the key pair came from (named in auth errors; never the secret)
        self.host_source = host_source  # where the host came from (named when it cannot be resolved)
        self.token = token  # a BCE session token (STS): sent as x-bce-security-token; as secret as sk

    def __repr__(self) -> str:
        return (f"Credentials(host={self.host!r}, ak={self.ak!r}, source={self.source!r}, "
                f"host_source={self.host_source!r})")


def load_credentials_file(path: str) -> Dict[str, Any]:
    """Read a credentials file (JSON with host, ak, sk) as strictly as a chain file
    (:mod:`job_chain.util.jsonfile`): every error names the file, and where it can the line:column,
    what is wrong and how to fix it."""
    from job_chain.util.jsonfile import json_type, parse_json, read_text

    data = parse_json(read_text(path, "credentials file"), path)
    if not isinstance(data, dict):
        raise UsageError(f"{path}:1:1: a credentials file must be a JSON object with host, ak and sk, "
                         f"found {json_type(data)}")
    return data


def file_api_config(path: str) -> Dict[str, Any]:
    """The chain file's ``api_config`` (its string values) if the file is there and is JSON; {}
    otherwise: never an error, the file may be broken or gone while its runs go on."""
    found = (read_json_dict(path) or {}).get("api_config")
    return {k: v for k, v in found.items() if isinstance(v, str)} if isinstance(found, dict) else {}


def _json_kind(value: Any) -> str:
    """What a JSON value is, without showing it (it may be a secret key)."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    return "a list" if isinstance(value, list) else "an object"


def _usable(value: Any) -> Optional[str]:
    if isinstance(value, str) and value.strip() and value.strip().lower() not in _PLACEHOLDERS:
        return value.strip()
    return None


def carried_credentials(carried: Mapping[str, Any], origin: str) -> Optional[Credentials]:
    """What a run's jobs connect with, from the credentials its run record carries (``origin``
    names the record's file): the local server's credentials file when it names one (read now: the
    server rewrites it when it starts), else the host and key pair ``run`` was given, however it
    was given. None when the record carries none (an inline run, a run recorded before runs carried
    them): then the job's environment and the chain's ``api_config`` are all there is."""
    path = carried.get("credentialsFile")
    if isinstance(path, str) and path:
        return resolve_credentials(credentials_file=path, env={})
    if carried.get("ak"):
        return resolve_credentials(api_config=carried, api_config_origin=origin, env={})
    return None


def resolve_credentials(
    *,
    host: Optional[str] = None,
    ak: Optional[str] = None,
    sk: Optional[str] = None,
    credentials_file: Optional[str] = None,
    api_config: Optional[Mapping[str, Any]] = None,
    api_config_origin: str = "chain file api_config",
    env: Optional[Mapping[str, str]] = None,
    session_token: Optional[str] = None,
) -> Credentials:
    """Resolve host and key pair by the documented order; raise a one-line error if missing."""
    env = os.environ if env is None else env
    sources: List[Tuple[str, Mapping[str, Any]]] = [
        ("command-line flags", {"host": host, "ak": ak, "sk": sk, TOKEN_KEY: session_token}),
        ("env AIHC_HOST/AIHC_AK/AIHC_SK",
         {"host": env.get("AIHC_HOST"), "ak": env.get("AIHC_AK"), "sk": env.get("AIHC_SK"),
          TOKEN_KEY: env.get(TOKEN_ENV)}),
        ("env HOST/AK/SK", {"host": None, "ak": env.get("AK"), "sk": env.get("SK")}),
    ]
    file_path = credentials_file or env.get(CREDENTIALS_ENV)
    if file_path:
        sources.append((f"credentials file {file_path}", load_credentials_file(file_path)))
    if api_config:
        sources.append((api_config_origin, api_config))

    for origin, source in sources:
        for name in ("host", "ak", "sk", TOKEN_KEY):
            value = source.get(name)
            if value is not None and not isinstance(value, str):
                raise UsageError(f"{origin}: {name} must be a string in quotes, not {_json_kind(value)}")

    # HOST alone is too generic a name to outrank a credentials file (shells set HOST), so it
    # is consulted only after every other source.
    host_origin, chosen_host = next(((o, _usable(s.get("host"))) for o, s in sources if _usable(s.get("host"))),
                                    ("env HOST", _usable(env.get("HOST"))))

    for origin, source in sources:
        key, secret, token = _usable(source.get("ak")), _usable(source.get("sk")), _usable(source.get(TOKEN_KEY))
        if key and secret:
            if not chosen_host:
                break
            return Credentials(host=chosen_host, ak=key, sk=secret, source=origin, host_source=host_origin,
                               token=token or "")
        if key or secret:
            missing = "sk" if key else "ak"
            raise UsageError(f"{origin} gives only half a key pair: {missing} is missing")
        if token:
            raise UsageError(f"{origin} gives a session token but no ak/sk: a session token belongs to the "
                             "temporary key pair it was issued with; give all three from the same place")
    if not chosen_host:
        raise CredentialsMissing(
            "no AIHC host: pass --host, set AIHC_HOST, use --credentials FILE, or set api_config.host"
        )
    raise CredentialsMissing(
        "no AIHC access key: pass --ak/--sk, set AIHC_AK/AIHC_SK, use --credentials FILE "
        f"(or {CREDENTIALS_ENV}), or set api_config.ak/sk in the chain file"
    )
