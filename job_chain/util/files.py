"""Files that must never be half-written or readable by others: atomic, mode 0600."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Union

from job_chain.util import jsonio  # (the json module only, until a look decodes with orjson)

if TYPE_CHECKING:  # for annotations only: made at run time, its forward reference is compiled on every hop
    PathLike = Union[str, "os.PathLike[str]"]


def _private_temp(directory: str, name: str) -> Tuple[str, int]:
    """A new temporary file beside ``name`` (random name, created exclusively, mode 0600)."""
    tmp = os.path.join(directory, f".{name}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.fchmod(fd, 0o600)  # whatever the umask
    return tmp, fd


def create_private(path: PathLike, data: Union[str, bytes]) -> bool:
    """Create ``path`` with ``data`` unless it exists: True for exactly one of any number of callers.
    Written to a temporary file first and linked into place, so nobody ever reads it half-written."""
    target = os.fspath(path)
    directory, name = os.path.split(os.path.abspath(target))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    tmp, fd = _private_temp(directory, name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.link(tmp, target)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def write_private(path: PathLike, data: Union[str, bytes], *, sync: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (temp file + rename) with mode 0600.

    The temporary name is random (jobs on many machines write into one run record), created
    exclusively with mode 0600; no ``tempfile``, which a job advancing a chain would import.
    ``sync=False`` for a cache that is worked out again when lost (no fsync: a list of 2,000 runs
    must not wait for 2,000 disk flushes).
    """
    target = os.fspath(path)
    directory, name = os.path.split(os.path.abspath(target))
    os.makedirs(directory, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp, fd = _private_temp(directory, name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _read_bytes(path: PathLike) -> bytes:
    """The whole file, by the system calls themselves: a look at a long run reads thousands of small
    files, and a file object's buffering and decoding cost more than the reading (~40%)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        chunks: List[bytes] = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def read_json_dict(path: PathLike, *, fast: bool = False) -> Optional[Dict[str, Any]]:
    """The JSON object in ``path``; None when it is missing, unreadable or not an object (a run
    record's files may be absent, or written by a newer version). ``fast``: decoded by
    :func:`job_chain.util.jsonio.loads` (what a look reads of a long run: its attempts cache, its
    thousands of submissions; never a hop, which orjson's import would cost more than it saves)."""
    try:
        raw = _read_bytes(path)
        data = jsonio.loads(raw) if fast else json.loads(raw.decode("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json_private(path: PathLike, obj: Any) -> None:
    """Atomically write ``obj`` as indented JSON, mode 0600.

    A lone surrogate (from an API answer, or a file name that is not UTF-8) cannot be written as
    UTF-8: then the whole file is written with JSON's ``\\u`` escapes, which read back unchanged.
    """
    try:
        raw = (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        raw = (json.dumps(obj, indent=2) + "\n").encode("ascii")
    write_private(path, raw)


def write_public(path: PathLike, data: str) -> None:
    """Atomically write a non-secret file (generated chains, scripts), keeping mode 0644."""
    write_private(path, data)
    os.chmod(path, 0o644)
