"""Temporary credentials (a BCE session token) from the local server, as BCE STS gives them.

``job-chain local sts`` asks the running server, with its own keys, through the BCE SDK's
``StsClient`` (``POST /v1/sessionToken?durationSeconds=N``), and keeps the answer in a
credentials file of mode 0600 (``host``, ``ak``, ``sk``, ``sessionToken``, ``expiration``), which
``--credentials`` and ``JOB_CHAIN_CREDENTIALS`` take like any other: the secret key and the token
are never printed. The server checks each request's token and expiry (``local/auth.py``).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, Optional

from job_chain.errors import UsageError


def session_seconds(text: str) -> int:
    """How long the credentials asked for with ``--duration TEXT`` last: whole seconds from 1 to
    :data:`~job_chain.local.params.STS_MAX_SECONDS` (the bound the server holds them to), read as
    every duration is (:func:`job_chain.util.durations.seconds_of`). UsageError otherwise."""
    from job_chain.local.params import STS_MAX_SECONDS as MAX_SECONDS
    from job_chain.util.durations import seconds_of

    seconds = seconds_of(text)
    if seconds is None or seconds != int(seconds) or not 1 <= seconds <= MAX_SECONDS:
        raise UsageError(f"--duration {text!r}: give whole seconds up to {MAX_SECONDS // 3600}h, like 1h, 30m or 90s")
    return int(seconds)


def mint(seconds: int, out: Optional[str] = None, state_dir: Optional[str] = None) -> Dict[str, Any]:
    """Ask the running local server of ``state_dir`` for credentials valid ``seconds``; write them to
    ``out`` (default: ``STATE_DIR/sts/credentials-<time>.json``). What may be shown: ``{"path",
    "host", "ak", "expiration"}``."""
    from baidubce.auth.bce_credentials import BceCredentials
    from baidubce.bce_client_configuration import BceClientConfiguration
    from baidubce.exception import BceHttpClientError, BceServerError
    from baidubce.services.sts.sts_client import StsClient

    from job_chain.aihc.credentials import TOKEN_KEY, resolve_credentials
    from job_chain.local.daemon import local_credentials_file
    from job_chain.local.server import default_state_dir
    from job_chain.util.files import write_json_private

    state_dir = default_state_dir(state_dir)
    own = resolve_credentials(credentials_file=local_credentials_file(start=False, state_dir=state_dir), env={})
    client = StsClient(BceClientConfiguration(credentials=BceCredentials(own.ak, own.sk), endpoint=own.host))
    try:
        answer = json.loads(client.get_session_token(acl=None, duration_seconds=seconds).raw_data)
    except (BceHttpClientError, BceServerError) as exc:
        error = getattr(exc, "last_error", None) or exc
        raise UsageError(f"the local server refused temporary credentials: {error}") from None
    path = out or os.path.join(state_dir, "sts", time.strftime("credentials-%Y%m%dT%H%M%SZ.json", time.gmtime()))
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
    write_json_private(path, {"host": own.host, "ak": answer["accessKeyId"], "sk": answer["secretAccessKey"],
                              TOKEN_KEY: answer["sessionToken"], "expiration": answer["expiration"]})
    return {"path": path, "host": own.host, "ak": answer["accessKeyId"], "expiration": answer["expiration"]}
