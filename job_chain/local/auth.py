"""BCE auth v1 verification, by recomputing the signature with the SDK's own signer.

Authorization: ``bce-auth-v1/{ak}/{timestamp}/{expiration}/{signedHeaders}/{signature}``.
An empty signed-headers field means the SDK default set (host, content-md5, content-length,
content-type and every ``x-bce-*`` header). The canonical URI is the raw path as sent.
"""

from __future__ import annotations

import calendar
import hmac
import time
from typing import Iterable, List, Mapping, Optional, Tuple

from job_chain.local.errors import Forbidden, Unauthorized

MAX_CLOCK_SKEW = 15 * 60  # seconds a timestamp may lie in the future


def _parse_timestamp(text: str) -> int:
    try:
        return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        raise Unauthorized(f"malformed timestamp in Authorization: {text!r}") from None


def verify(
    method: str,
    raw_path: bytes,
    query: Iterable[Tuple[str, str]],
    headers: Iterable[Tuple[bytes, bytes]],
    keys: Mapping[str, str],
    now: Optional[float] = None,
) -> str:
    """Check one request's signature; return its access key or raise Unauthorized/Forbidden."""
    from baidubce.auth import bce_v1_signer
    from baidubce.auth.bce_credentials import BceCredentials

    header_list: List[Tuple[bytes, bytes]] = list(headers)
    authorization = next((v for k, v in header_list if k.lower() == b"authorization"), None)
    if not authorization:
        raise Unauthorized("missing Authorization header")
    try:
        text = authorization.decode("ascii").strip()
    except UnicodeDecodeError:
        raise Unauthorized("malformed Authorization header") from None
    parts = text.split("/")
    if len(parts) != 6 or parts[0] != "bce-auth-v1":
        raise Unauthorized("malformed Authorization header: expected bce-auth-v1/ak/ts/exp/headers/sig")
    _, ak, stamp, expiration_text, signed, signature = parts
    if not expiration_text.isdigit() or not signature:
        raise Unauthorized("malformed Authorization header: bad expiration or signature")
    timestamp = _parse_timestamp(stamp)
    expiration = int(expiration_text)
    sk = keys.get(ak)
    if sk is None:
        raise Forbidden(f"unknown access key id {ak!r}", code="InvalidAccessKeyId")
    now = time.time() if now is None else now
    if timestamp + expiration < now:
        raise Forbidden("the request signature has expired", code="RequestExpired")
    if timestamp > now + MAX_CLOCK_SKEW:
        raise Forbidden("the request timestamp is too far in the future", code="RequestExpired")

    names = [n.strip().lower().encode("ascii") for n in signed.split(";") if n.strip()]
    if names:
        wanted = set(names)
        sign_headers = {k.lower(): v.strip() for k, v in header_list if k.lower() in wanted}
    else:
        sign_headers = {k.lower(): v.strip() for k, v in header_list}
    params = {}
    for key, value in query:
        params[key] = value  # the SDK never repeats a key
    expected = bce_v1_signer.sign(
        BceCredentials(ak, sk), method.upper().encode("ascii"), raw_path, sign_headers, params,
        timestamp=timestamp, expiration_in_seconds=expiration, headers_to_sign=names or None,
    )
    expected_sig = expected.rsplit(b"/", 1)[-1]
    if not hmac.compare_digest(expected_sig, signature.encode("ascii")):
        raise Forbidden("the request signature does not match", code="SignatureDoesNotMatch")
    return ak
