"""What the logs APIs answer: one page of a pod's log, and the marker of the next.

Semantics of Baidu's DescribeJobLogs page (https://cloud.baidu.com/doc/AIHC/s/Hmayvkw26,
2026-01) and of the v1 logs endpoint (seed 001; the Go SDK's ``GetPodLogsRequest`` adds
``marker``/``endTime`` and ``PodLogResult.nextMarker``), for both API versions:

- ``startTime``/``endTime`` (unix seconds) bound the log by time, through the time → offset
  index the sampler writes (its resolution is the sample interval);
- ``maxLines``: the last N lines of that range (with ``keywords``: the last N that match);
- ``keywords``: only lines holding the text;
- ``chunkSize`` (v2; default 1) / ``chunk`` (v1; default 0 = everything): lines per record;
- ``marker``/``nextMarker``: one answer carries at most :data:`MAX_LOG_ANSWER` bytes of log; when
  more remains its ``nextMarker`` is non-empty and, sent back as ``marker`` with the same
  parameters, answers the next page. A line longer than a page comes in pieces over several
  pages (a record then ends without ``\\n``), so nothing is ever cut.

Memory is bounded by the page size whatever the log's: the file is read from where the page
starts (``maxLines`` without ``keywords`` finds its start reading backwards from the end).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections import deque
from dataclasses import dataclass
from typing import BinaryIO, Deque, Iterator, List, Optional, Tuple

from job_chain.local.errors import BadRequest

MAX_LOG_ANSWER = 4 << 20  # bytes of log text in one answer; more comes with a nextMarker
MAX_SCAN = 64 << 20  # bytes a keywords answer reads before handing back a marker anyway
PIECE = 1 << 20  # a long line is read (and matched) in pieces of this size
_BLOCK = 1 << 16


class InvalidMarker(BadRequest):
    """BCE's code for a marker the service did not hand out (Baidu's error table, e.g.
    https://cloud.baidu.com/doc/qianfan/s/Pmh4sv5qa: ``InvalidMarker`` 400)."""

    code = "InvalidMarker"


@dataclass
class Page:
    """Where an answer starts: a byte offset, lines still wanted, and whether it continues a
    line already being answered (a matched line longer than a page)."""

    offset: int
    remaining: Optional[int]
    inside: bool = False


def _tag(job_id: str, pod: str) -> str:
    return hashlib.sha256(f"{job_id}/{pod}".encode()).hexdigest()[:8]


def make_marker(job_id: str, pod: str, page: Page) -> str:
    remaining = "-" if page.remaining is None else str(page.remaining)
    text = f"{_tag(job_id, pod)}:{page.offset}:{remaining}:{int(page.inside)}"
    return base64.urlsafe_b64encode(text.encode("ascii")).decode("ascii").rstrip("=")


def read_marker(job_id: str, pod: str, marker: str, size: int) -> Page:
    """The page a ``marker`` names; 400 InvalidMarker for anything this server did not hand out."""
    try:
        text = base64.urlsafe_b64decode(marker + "=" * (-len(marker) % 4)).decode("ascii")
        tag, offset, remaining, inside = text.split(":")
        page = Page(int(offset), None if remaining == "-" else int(remaining), inside == "1")
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidMarker("marker is not one this server handed out (send back a nextMarker "
                            "unchanged, with the same other parameters)") from None
    if tag != _tag(job_id, pod) or not 0 <= page.offset <= size or (page.remaining or 0) < 0:
        raise InvalidMarker("marker belongs to another pod's log or to a log that was replaced; "
                            "start again without marker")
    return page


def _pieces(handle: BinaryIO, start: int, end: int) -> Iterator[Tuple[int, bytes]]:
    """(offset, bytes) of the log in [start, end) line by line; a line longer than
    :data:`PIECE` comes in several pieces (only the last ends with ``\\n``)."""
    handle.seek(start)
    pos = start
    while pos < end:
        piece = handle.readline(min(PIECE, end - pos))
        if not piece:
            return
        yield pos, piece
        pos += len(piece)


def _line_matches(handle: BinaryIO, start: int, end: int, keyword: bytes) -> Tuple[bool, int]:
    """(whether the line at ``start`` holds ``keyword``, where it ends), reading it in pieces."""
    carry, matched = b"", False
    for pos, piece in _pieces(handle, start, end):
        matched = matched or keyword in carry + piece
        if piece.endswith(b"\n"):
            return matched, pos + len(piece)
        carry = piece[-(len(keyword) - 1):] if len(keyword) > 1 else b""
    return matched, end


def _tail_start(handle: BinaryIO, base: int, end: int, lines: int, keyword: Optional[bytes]) -> int:
    """Where the last ``lines`` lines (holding ``keyword``, if given) of [base, end) begin."""
    if lines <= 0:
        return end
    if keyword is None:  # count newlines backwards from the end: reads only the tail
        pos, seen = end, 0
        if end > base:
            handle.seek(end - 1)
            if handle.read(1) == b"\n":
                pos -= 1  # the last line's own newline
        while pos > base:
            step = min(_BLOCK, pos - base)
            handle.seek(pos - step)
            block = handle.read(step)
            at = len(block)
            while True:
                at = block.rfind(b"\n", 0, at)
                if at < 0:
                    break
                seen += 1
                if seen == lines:
                    return pos - step + at + 1
            pos -= step
        return base
    starts: Deque[int] = deque(maxlen=lines)  # a forward scan: keywords need each line's text
    pos = base
    while pos < end:
        matched, after = _line_matches(handle, pos, end, keyword)
        if matched:
            starts.append(pos)
        pos = after
    return starts[0] if starts else end


def _cut(data: bytes, limit: int) -> bytes:
    """At most ``limit`` bytes of ``data``, not splitting a UTF-8 character."""
    if len(data) <= limit:
        return data
    cut = limit
    while cut > limit - 4 and cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return data[:cut or limit]


def _block(handle: BinaryIO, pos: int, stop: int, room: int, remaining: Optional[int]) -> Tuple[bytes, bool]:
    """The whole lines (at most ``remaining``) of [pos, stop) that fit in ``room`` bytes, read in one
    go; if not even one line fits, the first ``room`` bytes of it (then the bool is True)."""
    handle.seek(pos)
    block = handle.read(min(room, stop - pos))
    if remaining is not None and block.count(b"\n") > remaining:
        at = -1
        for _ in range(remaining):
            at = block.find(b"\n", at + 1)
        block = block[:at + 1]
    elif pos + len(block) < stop:  # more follows: end at a line's end
        cut = block.rfind(b"\n") + 1
        if cut == 0:
            return _cut(block, room), True
        block = block[:cut]
    return block, False


def read_page(path: str, page: Page, end: Optional[int], keyword: Optional[bytes],
              limit: int = MAX_LOG_ANSWER) -> Tuple[List[bytes], Optional[Page]]:
    """(the lines of one answer, the page after it or None at the end). A line may be a piece
    of a long line (then it does not end with ``\\n``)."""
    out: List[bytes] = []
    size = 0
    with open(path, "rb") as handle:
        stop = handle.seek(0, os.SEEK_END) if end is None else min(end, handle.seek(0, os.SEEK_END))
        pos, remaining, inside = page.offset, page.remaining, page.inside
        if keyword is None and pos < stop and remaining != 0:  # one read, split in C
            block, inside = _block(handle, pos, stop, limit, remaining)
            parts = block.split(b"\n")  # not splitlines: a progress bar's \r is no line end
            out = [part + b"\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
            size, pos = len(block), pos + len(block)
            if remaining is not None:
                remaining -= block.count(b"\n")
        scanned = 0
        while keyword is not None and pos < stop and size < limit and remaining != 0 and scanned < MAX_SCAN:
            piece = next(_pieces(handle, pos, stop), (pos, b""))[1]
            if not piece:
                break
            if not inside:
                matched, after = _line_matches(handle, pos, stop, keyword)
                if not matched:
                    scanned += after - pos
                    pos = after
                    continue
            if size + len(piece) > limit or not piece.endswith(b"\n") and pos + len(piece) < stop:
                if out and size + len(piece) > limit:
                    break  # the next page starts with this line
                piece = _cut(piece, limit - size)  # a line longer than what a page holds
                out.append(piece)
                size += len(piece)
                pos += len(piece)
                inside = True
                continue
            out.append(piece)
            size += len(piece)
            scanned += len(piece)
            pos += len(piece)
            inside = False
            if remaining is not None and piece.endswith(b"\n"):
                remaining -= 1
        more = pos < stop and remaining != 0
    return out, Page(pos, remaining, inside) if more else None


def records(lines: List[bytes], chunk: int) -> List[str]:
    """Lines grouped ``chunk`` per record (0: all in one), decoded as UTF-8 (bad bytes as U+FFFD)."""
    if not lines:
        return []
    if chunk <= 0:
        return [b"".join(lines).decode("utf-8", "replace")]
    return [b"".join(lines[i:i + chunk]).decode("utf-8", "replace") for i in range(0, len(lines), chunk)]


def first_page(path: str, base: int, end: Optional[int], max_lines: Optional[int],
               keyword: Optional[bytes]) -> Page:
    """Where an answer without marker starts: ``base`` (startTime's offset), or the start of the
    last ``max_lines`` lines before ``end``."""
    if max_lines is None:
        return Page(base, None)
    with open(path, "rb") as handle:
        stop = handle.seek(0, os.SEEK_END) if end is None else min(end, handle.seek(0, os.SEEK_END))
        return Page(_tail_start(handle, min(base, stop), stop, max_lines, keyword), max_lines)
