"""A step's whole process tree, found and ended: whatever a step started ends when the step does.

Signalling a process group is not enough: a child that calls ``setsid`` (or double-forks into
a daemon) leaves the group and is reparented away from its step, and a child that ignores
SIGTERM outlives a leader that obeyed it. So a tree's processes are found two ways:

* **by a mark in their environment**: :data:`MARK` holds one token per owner that started them
  (a local pod, a watchdog), space-separated; every descendant inherits it, wherever ``setsid``
  or reparenting puts it;
* **by parentage**: the descendants of the tree's root (and of every marked process), which
  also finds a child that cleared its environment but is still below its step.

:func:`end` sends SIGTERM to all of them, waits up to a grace period for the whole tree (not
just its leader), then SIGKILLs whatever is left, scanning again until nothing is (a process
forking as it dies adds members between a scan and a kill). A child that both clears its
environment and leaves the tree cannot be told from any other process of the user, and is not
touched.

Linux ``/proc``, standard library only: the watchdog runs this in training images. Elsewhere
nothing is found, and callers still signal the process group.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from typing import Dict, Iterable, List, Mapping, Optional, Set, Tuple, Union

MARK = "JOB_CHAIN_TREE"
_GONE = ("Z", "X", "x")  # zombie or dead: nothing left to signal


def new_token() -> str:
    return secrets.token_hex(8)


def marked(env: Mapping[str, str], token: str) -> Dict[str, str]:
    """``env`` with ``token`` added to :data:`MARK` (an enclosing owner's tokens are kept)."""
    tokens = (env.get(MARK) or "").split()
    return dict(env, **{MARK: " ".join(tokens + [token])})


def _stat(pid: Union[int, str]) -> Optional[Tuple[int, str]]:
    """(parent pid, state) from ``/proc/PID/stat``; None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()  # after "pid (comm) ": the name may hold anything
    return (int(fields[1]), fields[0].decode("ascii", "replace")) if len(fields) >= 2 else None


def _processes() -> Dict[int, Tuple[int, str]]:
    """pid -> (parent pid, state) of every process."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    found = {}
    for name in names:
        if name.isdigit():
            stat = _stat(name)
            if stat is not None:
                found[int(name)] = stat
    return found


def _tokens_of(pid: int) -> Set[str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:  # gone, or another user's
        return set()
    prefix = MARK.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return set(entry[len(prefix):].decode("ascii", "replace").split())
    return set()


def members(tokens: Iterable[str], roots: Iterable[int] = ()) -> List[int]:
    """Live processes carrying one of ``tokens``, or below one of ``roots`` or of a marked process."""
    wanted = set(tokens)
    procs = _processes()
    children: Dict[int, List[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    me = os.getpid()
    found: Set[int] = set()
    stack = [r for r in roots if r in procs]
    if wanted:
        stack += [pid for pid in procs if pid != me and wanted & _tokens_of(pid)]
    while stack:
        pid = stack.pop()
        if pid in found or pid == me:
            continue
        found.add(pid)
        stack.extend(children.get(pid, []))
    return sorted(pid for pid in found if procs[pid][1] not in _GONE)


def _send(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[1] not in _GONE


def signal_tree(tokens: Iterable[str], roots: Iterable[int], sig: int) -> List[int]:
    """Send ``sig`` to every member; the pids signalled."""
    found = members(tokens, roots)
    _send(found, sig)
    return found


def kill_tree(tokens: Iterable[str], roots: Iterable[int] = (), rounds: int = 50) -> Set[int]:
    """SIGKILL every member until none is left; the pids killed."""
    tokens, roots = list(tokens), list(roots)
    killed: Set[int] = set()
    for _ in range(rounds):
        found = members(tokens, roots)
        if not found:
            break
        _send(found, signal.SIGKILL)
        killed.update(found)
        time.sleep(0.005)
    return killed


def end(tokens: Iterable[str], roots: Iterable[int] = (), grace: float = 10.0, poll: float = 0.05) -> Set[int]:
    """SIGTERM the tree, wait up to ``grace`` seconds for all of it to go (not just its leader),
    then SIGKILL the rest; the pids found."""
    tokens, roots = list(tokens), list(roots)
    first = signal_tree(tokens, roots, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(_alive(pid) for pid in first) and time.monotonic() < deadline:
        time.sleep(poll)
    return set(first) | kill_tree(tokens, roots)
