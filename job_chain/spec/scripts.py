"""How a chain's script files are found and read (only from the chain's directory), and whether
a load of the chain file now would read what an earlier load read (:func:`same_inputs`).

Kept apart from :mod:`job_chain.spec.loader` so that a command asking only whether the file changed
(``status``) does not import the loader's checks.
"""

from __future__ import annotations

import os
import stat
from typing import Dict, Optional, Tuple

from job_chain.aihc.spec import MAX_ARG_BYTES
from job_chain.errors import UsageError


def beside(chain_dir: str, name: str, home: Optional[str] = None) -> Optional[str]:
    """The path of script ``name`` when it is in the chain's directory (or below it), symbolic links
    followed; else None. Scripts are read from there only: a chain pasted into the web console
    must not ship an arbitrary file of the console's host into a job. ``home``: the directory's
    real path, when the caller asks about many scripts at once."""
    try:
        home = home or os.path.realpath(chain_dir)
        real = os.path.realpath(os.path.join(home, name))
        return real if os.path.commonpath([home, real]) == home and real != home else None
    except ValueError:  # a NUL byte or a lone surrogate: no such file (opening it says so)
        return os.path.join(chain_dir, name)


def script_bytes(chain_dir: str, name: str, home: Optional[str] = None) -> Tuple[Optional[bytes], Optional[str]]:
    """(the bytes of script file ``name``, at most :data:`MAX_ARG_BYTES` + 1 of them, None) or (None,
    why not; None if it cannot be opened). Only a regular file in the chain's directory, read
    without blocking (a FIFO is refused, never waited on). ``home``: as for :func:`beside`."""
    candidate = beside(chain_dir, name, home)
    if candidate is None:
        return None, (f" not in the chain's directory {chain_dir}: scripts are read from there only; "
                      "copy it there, or run it by its path in the image as a command")
    try:
        fd = os.open(candidate, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError):  # ValueError: a NUL byte or lone surrogate in the name
        return None, None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, " is not a regular file"
        try:
            return handle.read(MAX_ARG_BYTES + 1), None
        except OSError:
            return None, None


def script_digest(chain_dir: str, name: str, home: Optional[str] = None) -> Optional[str]:
    """What a load of the chain reads of script file ``name`` now, as a digest (None: no readable
    regular file there): a chain's :attr:`~job_chain.spec.model.Chain.inputs` are compared with it.
    ``home``: as for :func:`beside`."""
    return bytes_digest(script_bytes(chain_dir, name, home)[0])


def bytes_digest(raw: Optional[bytes]) -> Optional[str]:
    """The digest :attr:`~job_chain.spec.model.Chain.inputs` keeps of what was read (None: nothing was)."""
    if raw is None:
        return None
    import hashlib

    return hashlib.sha256(raw).hexdigest()


def text_digest(text: str) -> str:
    """The digest of a chain file's text, as :attr:`~job_chain.spec.model.Chain.inputs` keeps it."""
    return str(bytes_digest(text.encode("utf-8", "surrogatepass")))


def same_inputs(path: str, inputs: Dict[str, Optional[str]]) -> bool:
    """Whether a load of the chain file ``path`` now would read what ``inputs`` (a loaded chain's
    :attr:`~job_chain.spec.model.Chain.inputs`) says was read: the same file and script files,
    byte for byte. The loader is a function of these, so the chain it would give is the same: a
    command that only needs to know whether the file changed reads them, not validates them."""
    from job_chain.util.jsonfile import read_text

    if "" not in inputs:
        return False
    try:
        if text_digest(read_text(path, "chain file")) != inputs[""]:
            return False
    except UsageError:
        return False
    chain_dir = os.path.dirname(os.path.abspath(path))
    try:
        home = os.path.realpath(chain_dir)
    except ValueError:
        return False
    return all(script_digest(chain_dir, name, home) == digest for name, digest in inputs.items() if name)
