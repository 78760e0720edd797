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


class BadRequest(LocalAPIError):
    status = 400
    code = "InvalidParameter"


class NotFound(LocalAPIError):
    status = 404
    code = "NoSuchJob"


class Unauthorized(LocalAPIError):
    """No usable Authorization header at all."""

    status = 401
    code = "AccessDenied"


class Forbidden(LocalAPIError):
    """A signature that was readable but does not authenticate the request."""

    status = 403
    code = "AccessDenied"


class Conflict(LocalAPIError):
    status = 409
    code = "Conflict"


def error_body(code: str, message: str, request_id: str) -> Dict[str, str]:
    """The one error shape: the SDK rejects bodies with other or missing keys."""
    return {"requestId": request_id, "code": code, "message": message}
