"""Text from outside (stored rows, job logs) made safe to send or to show on a terminal.

Two hazards, one place:

* A lone UTF-16 surrogate (JSON ``"\\udce9"``) is a valid JSON escape but no character: any
  attempt to encode it as UTF-8 raises, so a single one in a stored row would make every answer
  that carries it fail. :func:`without_surrogates` replaces each with U+FFFD.
* A job's log may hold terminal control sequences (``ESC ] 0; title BEL`` retitles a window,
  others move the cursor, rewrite the screen or answer back). :func:`visible` shows them as
  ``\\x1b]0;title\\x07`` instead, keeping colours (SGR ``ESC [ ... m``, as ``less -R`` does), line
  ends, tabs and carriage returns (progress bars).

Standard library only: the runtime bundle carries this module into training images.
"""

from __future__ import annotations

import re
from typing import IO, Any, Optional

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls but \t \n \r, DEL, the C1 controls (U+0080-U+009F: 8-bit CSI, OSC ... on some
# terminals) and lone surrogates. A colour (SGR) sequence is matched first and left alone.
_SGR = "\x1b\\[[0-9;:]*m"
_CONTROL = re.compile(f"({_SGR})|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def surrogate_at(text: str) -> int:
    """Index of the first lone surrogate in ``text``, or -1."""
    found = _SURROGATE.search(text)
    return found.start() if found else -1


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, so that it encodes as UTF-8."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _escape(match: Any) -> str:
    if match.group(1):
        return match.group(1)
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control character but colours, ``\\t``, ``\\n`` and ``\\r`` written as
    an escape (``\\x1b``, ``\\x07``, ``\\x9b``), so a terminal shows it instead of obeying it."""
    return _CONTROL.sub(_escape, text)


def for_stream(text: str, stream: Optional[IO[Any]] = None) -> str:
    """``text`` as it should be written to ``stream`` (default stdout): :func:`visible` on a
    terminal, unchanged into a pipe or file (whose reader asked for the bytes)."""
    import sys

    stream = sys.stdout if stream is None else stream
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        tty = False
    return visible(text) if tty else without_surrogates(text)
