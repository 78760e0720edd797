"""Issue 18, item 24: rooms that grew too big. Every module stays under 400 lines, the local server's
v1 and v2 routes do not import each other, and the client (``job_chain.aihc``) never reaches into
the local server (``job_chain.local``): what depends on both (``job_chain.aihc.connect``) sits above them.
In the local server, state knows neither HTTP nor execution, and execution not HTTP nor the API shapes."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import List, Set

PACKAGE = Path(__file__).resolve().parent.parent / "job_chain"
MAX_LINES = 400


def imports_of(path: Path) -> Set[str]:
    """Every module ``path`` imports, at its top or inside a function."""
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_module_is_over_400_lines() -> None:
    long: List[str] = [f"{p.relative_to(PACKAGE.parent)}: {n}" for p in sorted(PACKAGE.rglob("*.py"))
                       if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert long == [], "split these along their seams: " + ", ".join(long)


def test_the_v1_and_v2_routes_do_not_import_each_other() -> None:
    assert "job_chain.local.routes" not in imports_of(PACKAGE / "local" / "routes_v2.py")


def test_the_client_never_reaches_into_the_local_server() -> None:
    reaching = [str(p.relative_to(PACKAGE.parent)) for p in sorted((PACKAGE / "aihc").rglob("*.py"))
                if any(m == "job_chain.local" or m.startswith("job_chain.local.") for m in imports_of(p))]
    assert reaching == []


# The local server's layers (the guide: HTTP, state and execution apart; state never knows HTTP).
LOCAL = "job_chain.local."
HTTP = {"fastapi", "starlette", "uvicorn"} | {LOCAL + m for m in ("routes", "routes_v2", "wire", "auth", "faults")}
API = {LOCAL + m for m in ("backend", "backend_v2", "pool_views", "shapes")}
EXECUTION = {LOCAL + m for m in ("executor", "lifecycle", "adoption", "process", "pod_process")}


def _reaching(module: str, forbidden: Set[str]) -> Set[str]:
    return {m for m in imports_of(PACKAGE / "local" / f"{module}.py")
            if m in forbidden or m.split(".")[0] in forbidden}


def test_the_local_state_knows_neither_http_nor_the_api_nor_execution() -> None:
    for module in ("store", "schema"):
        assert _reaching(module, HTTP | API | EXECUTION) == set(), module


def test_the_local_execution_knows_neither_http_nor_the_api_shapes() -> None:
    for module in ("executor", "lifecycle", "adoption", "process", "pod_process"):
        assert _reaching(module, HTTP | API) == set(), module
