"""Read JSON files with errors that point at file:line:column.

Only what a JSON file can mean is accepted: ``NaN``/``Infinity`` (which Python's json module
allows), numbers too large to use and nesting deeper than :data:`MAX_DEPTH` are refused with the
line:column of the offending token, so no later step trips over them. So is a key given twice
in one object, which json would silently reduce to its last value.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable, Dict, Optional, Tuple

from job_chain.errors import UsageError

MAX_DEPTH = 100  # chain files need 6 levels; deeper input would only exhaust the stack later
MAX_INT_DIGITS = 4300  # Python's own int <-> text limit (3.11+), on every Python version
# strings (skipped, maybe unterminated), brackets, numbers and the non-JSON constants, in order
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[{]|[\]}]|-?(?:Infinity|[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)|NaN',
                     re.DOTALL)


def _line_column(text: str, offset: int) -> Tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def decode_utf8(raw: bytes) -> Tuple[Optional[str], Optional[str]]:
    """(text, None), or (None, ``line:column: why and how to fix``) for bytes that are not UTF-8:
    the one place a file's invalid byte is located (chain files, credentials, script files)."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        column = len(before[before.rfind(b"\n") + 1:].decode("utf-8", "replace")) + 1
        return None, (f"{line}:{column}: not UTF-8 text: invalid byte 0x{raw[exc.start]:02x} at byte offset "
                      f"{exc.start} (save the file as UTF-8)")


def read_text(path: str, what: str = "file") -> str:
    """The file's text (UTF-8, a leading byte-order mark dropped), or a one-line UsageError."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such {what}") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, expected a JSON {what}") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read this {what}: {exc.strerror or exc}") from None
    except ValueError:  # an embedded NUL byte in the path
        raise UsageError(f"{path!r}: not a valid file name") from None
    if raw.startswith(b"\xef\xbb\xbf"):  # a byte-order mark, as some Windows editors write
        raw = raw[3:]
    text, why = decode_utf8(raw)
    if text is None:
        raise UsageError(f"{path}:{why}")
    return text


class _Refused(ValueError):
    """Raised from a json hook: ``message`` about the first token for which ``test`` holds."""

    def __init__(self, message: str, test: Callable[[str], bool]) -> None:
        super().__init__(message)
        self.message = message
        self.test = test


def _too_many_digits(token: str) -> bool:
    digits = token.lstrip("-")
    return digits.isdigit() and len(digits) > MAX_INT_DIGITS


def _parse_int(token: str) -> int:
    if _too_many_digits(token):
        raise _Refused(f"number too large ({len(token.lstrip('-'))} digits)", _too_many_digits)
    return int(token)


def _is_inf(token: str) -> bool:
    return token[-1:].isdigit() and not _too_many_digits(token) and math.isinf(float(token))


def _parse_float(token: str) -> float:
    value = float(token)
    if math.isinf(value):
        shown = token if len(token) <= 20 else token[:17] + "..."
        raise _Refused(f"number too large ({shown})", _is_inf)
    return value


def _parse_constant(token: str) -> Any:
    raise _Refused(f"invalid JSON: {token} is not a JSON number (use null or a string)", lambda t: t == token)


class _DuplicateKey(ValueError):
    """Raised from the object hook: JSON would silently keep only the last of two equal keys."""


def _object(pairs: Any) -> Dict[str, Any]:
    result: Dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _duplicate_key_offset(text: str) -> int:
    """Offset of the first key that repeats a key of the same object (0 if none is found)."""
    objects: list = []  # per open bracket: the keys seen so far ({) or None ([)
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            objects.append(set() if token == "{" else None)
        elif token in ("]", "}"):
            if objects:
                objects.pop()
        elif token.startswith('"') and objects and objects[-1] is not None \
                and text[match.end():match.end() + 64].lstrip().startswith(":"):
            key = json.loads(token)
            if key in objects[-1]:
                return match.start()
            objects[-1].add(key)
    return 0


def _first_token(text: str, test: Callable[[str], bool], *, deeper_than: Optional[int] = None) -> int:
    """Offset of the first token outside strings passing ``test`` (or opening level ``deeper_than + 1``)."""
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if deeper_than is not None and depth > deeper_than:
                return match.start()
        elif token in ("]", "}"):
            depth -= 1
        elif not token.startswith('"') and test(token):
            return match.start()
    return 0


def _deeper_than(data: Any, limit: int) -> bool:
    """True when arrays/objects in ``data`` nest more than ``limit`` levels (no recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


_WORDS = {  # Python's JSON messages, in words a chain file's author acts on
    "Expecting ':' delimiter": "expected ':' between a key and its value",
    "Unterminated string starting at": "a string starts here but never ends (its closing \" is missing)",
    "Invalid control character at": "a string holds a raw line break or tab: write it as \\n or \\t",
    "Extra data": "more text after the JSON object ended (a file holds one object: was a bracket closed too early?)",
    "Invalid \\escape": "a backslash that starts no escape: write \\\\ for a backslash",
    "Invalid \\uXXXX escape": "a \\u escape needs four hex digits, e.g. \\u00e9",
}


def _explain(text: str, exc: json.JSONDecodeError) -> Tuple[int, str]:
    """(offset, what is wrong in words) for a JSON syntax error: a trailing comma is named and
    pointed at, not reported as a missing key at the bracket after it."""
    at, here = exc.pos, text[exc.pos:exc.pos + 1]
    before = text[:at].rstrip()
    if "trailing comma" in exc.msg or (here in "}]" and here and before.endswith(",")
                                       and exc.msg.startswith(("Expecting property name", "Expecting value"))):
        kind = "object" if here == "}" or "object" in exc.msg else "array"
        return len(before) - 1, f"a comma after the last entry of an {kind}: JSON allows none there, remove it"
    if exc.msg.startswith("Expecting property name"):
        if here == "'":
            return at, "keys are written in double quotes, not single ones"
        return at, "expected a key in double quotes (or the end of the object)"
    if exc.msg.startswith("Expecting value"):
        if not text.strip():
            return 0, "nothing to read: the text is empty (expected a JSON object, {...})"
        if not text[at:].strip():
            return at, "the text ends where a value was expected: is the end of the file missing?"
        word = re.match(r"[A-Za-z]+", text[at:])
        if word and word.group() in ("True", "False", "None", "TRUE", "FALSE", "NULL", "Null"):
            right = {"true": "true", "false": "false", "none": "null", "null": "null"}[word.group().lower()]
            return at, f"JSON spells {word.group()} as {right}"
        if here == "'":
            return at, "strings are written in double quotes, not single ones"
        return at, ("expected a value: a string in double quotes, a number, true, false, null, an object "
                    "or an array")
    if exc.msg.startswith("Expecting ',' delimiter"):
        if not text[at:].strip():
            return at, "the text ends before every bracket is closed"
        return at, "expected ',' or a closing bracket after the value before (a comma missing?)"
    for start, words in _WORDS.items():
        if exc.msg.startswith(start):
            return at, words
    return at, exc.msg


def parse_json(text: str, path: str) -> Any:
    """Parse ``text``; any problem is a one-line UsageError starting ``path:line:column:``."""
    too_deep = False
    try:
        data = json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant,
                          object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        offset, words = _explain(text, exc)
        line, column = _line_column(text, offset)
        raise UsageError(f"{path}:{line}:{column}: invalid JSON: {words}") from None
    except _Refused as exc:
        line, column = _line_column(text, _first_token(text, exc.test))
        raise UsageError(f"{path}:{line}:{column}: {exc.message}") from None
    except _DuplicateKey as exc:
        line, column = _line_column(text, _duplicate_key_offset(text))
        raise UsageError(f"{path}:{line}:{column}: duplicate key {describe(exc.args[0])} in one object "
                         "(JSON would keep only the last one: remove or rename one)") from None
    except RecursionError:
        too_deep = True
    if too_deep or _deeper_than(data, MAX_DEPTH):
        line, column = _line_column(text, _first_token(text, lambda t: False, deeper_than=MAX_DEPTH))
        raise UsageError(f"{path}:{line}:{column}: JSON nested deeper than {MAX_DEPTH} levels")
    return data


def json_type(value: Any) -> str:
    """The JSON name of a value's type (``object``, ``array``, ``string``, ...) for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


def describe(value: Any, limit: int = 80) -> str:
    """A value for a one-line message: its repr (newlines and control characters escaped), cut."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int too large to print, or absurd nesting
        return f"a {json_type(value)} too large to show"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shown(text: str, limit: int = 120) -> str:
    """User text inside a message: as is when plain and printable, else quoted with escapes."""
    plain = bool(text) and text.isprintable() and text.strip() == text and len(text) <= limit
    return text if plain else describe(text, limit)


def load_json_object(path: str, what: str = "file") -> Dict[str, Any]:
    """A file holding one JSON object (a chain, a description, credentials)."""
    data = parse_json(read_text(path, what), path)
    if not isinstance(data, dict):
        raise UsageError(f"{path}:1:1: expected a JSON object at the top level, found {json_type(data)}")
    return data


def load_json_with_text(path: str, what: str = "file") -> Tuple[Dict[str, Any], str]:
    """Like :func:`load_json_object`, also returning the file's text."""
    text = read_text(path, what)
    data = parse_json(text, path)
    if not isinstance(data, dict):
        raise UsageError(f"{path}:1:1: expected a JSON object at the top level, found {json_type(data)}")
    return data, text
