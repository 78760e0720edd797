"""BCE auth v1 verification, by recomputing the signature with the SDK's own signer.

Authorization: ``bce-auth-v1/{ak}/{timestamp}/{expiration}/{signedHeaders}/{signature}``.
An empty signed-headers field means the SDK default set (host, content-md5, content-length,
content-type and every ``x-bce-*`` header). The canonical URI is the raw path as sent.
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import time
from typing import Any, Callable, Iterable, List, Mapping, Optional, Tuple

from job_chain.local.errors import BadAuth, Forbidden

MAX_CLOCK_SKEW = 15 * 60  # seconds a timestamp may lie in the future
# The longest validity a signature may claim. BCE's SDKs default to 1800 s; a day covers any
# sensible client while a leaked signature cannot be replayed for ever.
MAX_EXPIRATION = 24 * 3600
CONTENT_SHA256 = b"x-bce-content-sha256"
SECURITY_TOKEN = b"x-bce-security-token"  # STS: the session token of temporary keys (signed, as every x-bce-*)
Sessions = Callable[[str], Optional[Mapping[str, Any]]]  # access key -> {sk, token_hash, expires} if issued


def _secret_key(ak: str, token: Optional[bytes], keys: Mapping[str, str], sessions: Optional[Sessions],
                now: float) -> str:
    """The secret key that signs ``ak``'s requests: the server's own pair (no session token may come
    with it), else temporary credentials it issued, whose session token must come and not have
    expired. Refused as BCE refuses: 403 with a code, never which part of a secret was wrong."""
    if ak in keys:
        if token is not None:
            raise Forbidden("x-bce-security-token is sent with a permanent access key: a session token belongs "
                            "to the temporary key pair it was issued with", code="InvalidSessionToken")
        return keys[ak]
    found = sessions(ak) if sessions is not None else None
    if found is None:
        raise Forbidden(f"unknown access key id {ak!r}", code="InvalidAccessKeyId")
    if token is None:
        raise Forbidden(f"access key {ak!r} is temporary: its session token must be sent (x-bce-security-token)",
                        code="InvalidSessionToken")
    if not hmac.compare_digest(hashlib.sha256(token.strip()).hexdigest(), str(found["token_hash"])):
        raise Forbidden(f"the session token is not the one issued with access key {ak!r}",
                        code="InvalidSessionToken")
    if float(found["expires"]) <= now:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(found["expires"])))
        raise Forbidden(f"the temporary credentials of access key {ak!r} expired at {when}: get new ones "
                        "(job-chain local sts) and resume with them", code="InvalidSessionToken")
    return str(found["sk"])


def _parse_timestamp(text: str) -> int:
    try:
        return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        raise BadAuth(f"malformed timestamp in Authorization: {text!r}") from None


def verify(
    method: str,
    raw_path: bytes,
    query: Iterable[Tuple[str, str]],
    headers: Iterable[Tuple[bytes, bytes]],
    keys: Mapping[str, str],
    now: Optional[float] = None,
    sessions: Optional[Sessions] = None,
) -> str:
    """Check one request's signature; return its access key or raise BadAuth/Forbidden. ``keys``
    are the permanent pairs; ``sessions`` looks up temporary ones (STS), whose requests must carry
    their unexpired session token."""
    from baidubce.auth import bce_v1_signer
    from baidubce.auth.bce_credentials import BceCredentials

    header_list: List[Tuple[bytes, bytes]] = list(headers)
    authorization = next((v for k, v in header_list if k.lower() == b"authorization"), None)
    if not authorization:
        raise Forbidden("missing Authorization header")
    try:
        text = authorization.decode("ascii").strip()
    except UnicodeDecodeError:
        raise BadAuth("malformed Authorization header") from None
    parts = text.split("/")
    if len(parts) != 6 or parts[0] != "bce-auth-v1":
        raise BadAuth("malformed Authorization header: expected bce-auth-v1/ak/ts/exp/headers/sig")
    _, ak, stamp, expiration_text, signed, signature = parts
    if not expiration_text.isdigit() or not signature:
        raise BadAuth("malformed Authorization header: bad expiration or signature")
    if len(expiration_text) > 9 or int(expiration_text) > MAX_EXPIRATION:  # digits first: int() of
        # thousands of digits is slow and, past Python's limit, an error
        shown = expiration_text if len(expiration_text) <= 12 else f"a {len(expiration_text)}-digit number"
        raise BadAuth(f"the expiration period in Authorization must be at most {MAX_EXPIRATION} "
                         f"seconds, got {shown}", code="InvalidHTTPAuthHeader")
    timestamp = _parse_timestamp(stamp)
    expiration = int(expiration_text)
    now = time.time() if now is None else now
    sk = _secret_key(ak, next((v for k, v in header_list if k.lower() == SECURITY_TOKEN), None), keys, sessions, now)
    if timestamp + expiration < now:
        raise BadAuth("the request signature has expired", code="RequestExpired")
    if timestamp > now + MAX_CLOCK_SKEW:
        raise BadAuth("the request timestamp is too far in the future", code="RequestExpired")

    names = [n.strip().lower().encode("ascii") for n in signed.split(";") if n.strip()]
    if names and b"host" not in names:
        raise BadAuth("the signed headers must include host", code="SignatureDoesNotMatch")
    if names and SECURITY_TOKEN not in names and any(k.lower() == SECURITY_TOKEN for k, _ in header_list):
        raise BadAuth("x-bce-security-token is sent but not among the signed headers", code="SignatureDoesNotMatch")
    if names and CONTENT_SHA256 not in names and any(k.lower() == CONTENT_SHA256 for k, _ in header_list):
        raise BadAuth("x-bce-content-sha256 is sent but not among the signed headers",
                      code="SignatureDoesNotMatch")
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
        raise BadAuth("the request signature does not match", code="SignatureDoesNotMatch")
    return ak


def check_body_hash(headers: Iterable[Tuple[bytes, bytes]], body: bytes) -> None:
    """A signed ``x-bce-content-sha256`` must be the body's: else one signature fits any body."""
    sent = next((v for k, v in headers if k.lower() == CONTENT_SHA256), None)
    if sent is None:
        return
    if not hmac.compare_digest(sent.strip().lower(), hashlib.sha256(body).hexdigest().encode("ascii")):
        raise BadAuth("x-bce-content-sha256 does not match the request body", code="SignatureDoesNotMatch")


def wants_body_hash(headers: Iterable[Tuple[bytes, bytes]]) -> bool:
    return any(k.lower() == CONTENT_SHA256 for k, _ in headers)
