"""A typed client for the AIHC training-job OpenAPI (v1), signed by the BCE SDK."""

from job_chain.aihc.client import AIHCClient
from job_chain.aihc.credentials import Credentials
from job_chain.aihc.errors import AIHCError

__all__ = ["AIHCClient", "AIHCError", "Credentials"]
