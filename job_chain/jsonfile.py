"""Read JSON files with errors that point at file:line:column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Tuple

from job_chain.errors import UsageError


def read_text(path: str, what: str = "file") -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such {what}") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, expected a JSON {what}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None


def parse_json(text: str, path: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise UsageError(f"{path}: JSON nested too deeply") from None


def load_json_object(path: str, what: str = "file") -> Dict[str, Any]:
    data = parse_json(read_text(path, what), path)
    if not isinstance(data, dict):
        raise UsageError(f"{path}:1:1: expected a JSON object at the top level, found {type(data).__name__}")
    return data


def load_json_with_text(path: str, what: str = "file") -> Tuple[Dict[str, Any], str]:
    text = read_text(path, what)
    data = parse_json(text, path)
    if not isinstance(data, dict):
        raise UsageError(f"{path}:1:1: expected a JSON object at the top level, found {type(data).__name__}")
    return data, text
