"""Domain errors of the local server and their BCE-shaped JSON answers.

Every error the server sends is ``{"requestId", "code", "message"}`` with exactly these keys,
because the official SDK's ``handler.parse_error`` accepts nothing else.
"""

from __future__ import annotations

from typing import Dict


class LocalAPIError(Exception):
    """Base of every error the API answers on purpose; subclasses set status and code."""

    status = 500
    code = "InternalError"

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code


INAPPROPRIATE = "InappropriateJSON"  # BCE: well-formed JSON with a missing or mistyped item


class BadRequest(LocalAPIError):
    """400; ``InvalidParameter`` (ours, for query parameters) unless a BCE code is given."""

    status = 400
    code = "InvalidParameter"


class NotFound(LocalAPIError):
    status = 404
    code = "NoSuchJob"


class Forbidden(LocalAPIError):
    """No Authorization at all, or an access key this server does not know (BCE: 403)."""

    status = 403
    code = "AccessDenied"


class BadAuth(LocalAPIError):
    """An Authorization header that is malformed, expired or does not match the request.

    BCE answers these 400 (InvalidHTTPAuthHeader, RequestExpired, SignatureDoesNotMatch), not
    401/403: see the error-code pages cited in docs/local-server.md.
    """

    status = 400
    code = "InvalidHTTPAuthHeader"


class IdempotencyMismatch(LocalAPIError):
    """A ``clientToken`` reused for another request (another body or pool): 403, as Baidu's
    error table has it (https://cloud.baidu.com/doc/qianfan/s/Pmh4sv5qa)."""

    status = 403
    code = "IdempotentParameterMismatch"


class MethodNotAllowed(LocalAPIError):
    """An action sent with another HTTP method than its page gives (ours: no page names a code)."""

    status = 405
    code = "MethodNotAllowed"


class NotSupported(LocalAPIError):
    """An AIHC API the local server does not emulate (datasets, models, services, ...)."""

    status = 501
    code = "NotImplemented"


def error_body(code: str, message: str, request_id: str) -> Dict[str, str]:
    """The one error shape: the SDK rejects bodies with other or missing keys."""
    return {"requestId": request_id, "code": code, "message": message}
