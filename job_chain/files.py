"""Files that must never be half-written or readable by others: atomic, mode 0600."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Union

PathLike = Union[str, "os.PathLike[str]"]


def write_private(path: PathLike, data: Union[str, bytes]) -> None:
    """Write ``data`` to ``path`` atomically (temp file + rename) with mode 0600."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=str(target.parent))
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
