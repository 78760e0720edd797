"""Fetch a ``bos:/bucket/key`` URL onto the job's storage with the BCE SDK's own BOS client.

Run in a job as ``python3 -m job_chain.aiak.bos_fetch SOURCE DEST`` by the aiak-gen step
scripts when the image has no ``bcecmd`` (Baidu's own scripts download bcecmd at run time,
which needs internet in the cluster; this needs only job-chain's runtime, which carries the SDK).
SOURCE naming one object is written to the file DEST; otherwise every object under
``SOURCE/`` is written below the directory DEST (``bcecmd bos sync``), skipping files already
there with the right size, so an interrupted download resumes.

Credentials are the run's, found as job-chain finds them in a job: env ``AIHC_AK``/``AIHC_SK``,
the credentials file ``JOB_CHAIN_CREDENTIALS``, then the chain file ``JOB_CHAIN_CONFIG``'s
``api_config`` as the run saved it at start (``JOB_CHAIN_RUN_ID``; the file itself only for keys
the run did not save, and a broken or missing file is no error). No key is ever passed on the
command line or printed. The endpoint is ``BOS_ENDPOINT``, else ``<region>.bcebos.com`` for an
AIHC host ``aihc.<region>.baidubce.com`` (Baidu's BOS region/endpoint table: https://cloud.baidu.com/doc/BOS/s/akrqd2wcx).
"""

from __future__ import annotations

import os
import posixpath
import re
import sys
from typing import Any, List, Mapping, Optional, Tuple

from baidubce.auth.bce_credentials import BceCredentials
from baidubce.bce_client_configuration import BceClientConfiguration
from baidubce.exception import BceError, BceHttpClientError, BceServerError
from baidubce.services.bos.bos_client import BosClient

from job_chain.aihc.credentials import Credentials, file_api_config, resolve_credentials
from job_chain.aihc.endpoint import normalize_endpoint
from job_chain.errors import JobChainError, UsageError

PROG = "aiak bos fetch"
_URL_RE = re.compile(r"bos:/+([a-z0-9][a-z0-9-]{1,62})(?:/(.*))?")
_AIHC_HOST_RE = re.compile(r"aihc\.([a-z0-9-]+)\.baidubce\.com")


class FetchError(JobChainError):
    """A download that cannot be done, said in one line."""


def parse_url(url: str) -> Tuple[str, str]:
    """``bos:/bucket/some/key`` -> ``("bucket", "some/key")`` (bcecmd's spelling; ``bos://`` too)."""
    match = _URL_RE.fullmatch(url.strip())
    if not match:
        raise FetchError(f"{url!r} is not a BOS URL such as bos:/bucket/path")
    return match.group(1), (match.group(2) or "").rstrip("/")


def bos_endpoint(explicit: Optional[str], aihc_host: Optional[str]) -> str:
    """BOS_ENDPOINT as given, else the BOS endpoint of the AIHC host's region."""
    if explicit:
        return normalize_endpoint(explicit)
    host = re.sub(r"^[a-z]+://", "", (aihc_host or "").strip()).split("/")[0].split(":")[0]
    match = _AIHC_HOST_RE.fullmatch(host)
    if not match:
        raise FetchError(f"no BOS endpoint: the AIHC host {aihc_host or '(none)'} names no region; set "
                         "BOS_ENDPOINT (e.g. bj.bcebos.com) in the description and regenerate")
    return f"https://{match.group(1)}.bcebos.com"


def run_credentials(environ: Mapping[str, str]) -> Tuple[Credentials, str]:
    """The run's key pair and the BOS endpoint, by job-chain's order (see the module docstring)."""
    from job_chain.record.records import RunRecords

    chain = environ.get("JOB_CHAIN_CONFIG")
    run_id = environ.get("JOB_CHAIN_RUN_ID")
    explicit = environ.get("BOS_ENDPOINT") or None
    try:  # the run's copy of the file's api_config (saved at start), as the run's own hops find it
        api_config = (RunRecords(chain).api_config(run_id) if run_id else file_api_config(chain)) if chain else {}
        found = resolve_credentials(host=explicit, api_config=api_config or None,
                                    api_config_origin=f"{chain} api_config", env=environ)
    except UsageError as exc:
        raise FetchError(f"{exc}; a job finds keys through JOB_CHAIN_CREDENTIALS or the chain file "
                         "(JOB_CHAIN_CONFIG)") from None
    return found, bos_endpoint(explicit, None if explicit else found.host)


def _describe(error: BaseException) -> str:
    if isinstance(error, BceHttpClientError) and error.last_error is not None:
        error = error.last_error
    if isinstance(error, BceServerError):
        code = error.code.decode() if isinstance(error.code, bytes) else error.code
        return f"{error.status_code} {code or ''} {error}".replace("  ", " ").strip()
    return str(error) or type(error).__name__


def _status(error: BaseException) -> Optional[int]:
    if isinstance(error, BceHttpClientError):
        error = error.last_error or error
    return getattr(error, "status_code", None)


def _download(client: BosClient, bucket: str, key: str, path: str) -> None:
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    partial = path + ".partial"
    client.get_object_to_file(bucket, key, partial)
    os.replace(partial, path)


def _relative(key: str, prefix: str) -> Optional[str]:
    """The object's path below the prefix, or None for folder markers and unsafe names."""
    rel = key[len(prefix):]
    parts = rel.split("/")
    if not rel or rel.endswith("/") or posixpath.isabs(rel) or any(p in ("", ".", "..") for p in parts):
        return None
    return rel


def fetch(client: BosClient, url: str, dest: str, say: Any = print) -> List[str]:
    """Download ``url`` to ``dest``; return the keys written (objects already there are skipped)."""
    bucket, key = parse_url(url)
    if key and not url.endswith("/"):
        try:
            client.get_object_meta_data(bucket, key)
        except BceError as exc:
            if _status(exc) != 404:
                raise
        else:
            _download(client, bucket, key, dest)
            say(f"fetched {url} -> {dest}")
            return [key]
    prefix = f"{key}/" if key else ""
    written: List[str] = []
    seen = 0
    for item in client.list_all_objects(bucket, prefix=prefix):
        seen += 1
        rel = _relative(item.key, prefix)
        if rel is None:
            continue
        path = os.path.join(dest, *rel.split("/"))
        if os.path.isfile(path) and os.path.getsize(path) == int(item.size):
            continue  # fetched by an earlier, interrupted run
        _download(client, bucket, item.key, path)
        say(f"fetched bos:/{bucket}/{item.key} ({int(item.size)} bytes)")
        written.append(item.key)
    if not seen:
        raise FetchError(f"nothing at {url}: no such object and no objects under it")
    return written


def client_for(credentials: Credentials, endpoint: str) -> BosClient:
    return BosClient(BceClientConfiguration(credentials=BceCredentials(credentials.ak, credentials.sk),
                                            security_token=credentials.token or None,
                                            endpoint=endpoint))


def main(argv: Optional[List[str]] = None, environ: Optional[Mapping[str, str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python3 -m job_chain.aiak.bos_fetch bos:/BUCKET/PATH DEST", file=sys.stderr)
        return 2
    url, dest = args
    endpoint, source = "BOS", ""
    try:
        credentials, endpoint = run_credentials(os.environ if environ is None else environ)
        source = credentials.source
        fetch(client_for(credentials, endpoint), url, dest)
    except JobChainError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except (BceError, OSError, ValueError) as exc:
        hint = f" (keys from {source})" if _status(exc) in (400, 401, 403) else ""
        print(f"{PROG}: error: cannot fetch {url} from {endpoint}: {_describe(exc)}{hint}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
