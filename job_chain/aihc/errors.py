"""One error type for every way an AIHC call can fail."""

from __future__ import annotations

from job_chain.engine.errors import EngineError

HOST_NOT_FOUND = "HostNotFound"  # DNS cannot resolve the host: a typo, not a hiccup
# BCE's answers about the keys or the signature (400 or 403): never retried, the keys are named
AUTH_CODES = frozenset({"AccessDenied", "InvalidAccessKeyId", "InvalidHTTPAuthHeader", "InvalidSessionToken",
                        "RequestExpired", "SignatureDoesNotMatch"})


class AIHCError(EngineError):
    """An AIHC call failed: HTTP status, BCE error code, message and request id when known.

    ``status`` is None when no HTTP answer arrived (connection refused, timeout, TLS).
    """

    engine = "AIHC"

    @property
    def retryable(self) -> bool:
        """Whether trying the same call again may succeed (cloud hiccups, not our mistakes).

        BCE's 400s (InvalidHTTPAuthHeader, RequestExpired, SignatureDoesNotMatch, MalformedJSON),
        403s and 409 IdempotentParameterMismatch are not: the same request fails the same way.
        """
        if self.status is None:
            return self.code != HOST_NOT_FOUND
        return self.status == 429 or self.status >= 500

