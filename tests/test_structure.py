"""The shape of the code, checked: packages in layers (each imports only those below it), no import
cycle between modules (imports inside functions included), no mixins, packages a reader can scan.
The local server's own layers: HTTP, state and execution apart. See docs/architecture.md."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path
from typing import Dict, List, Set

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "job_chain"
LONG_MODULE = 600  # lines: a warning, never a reason to split one class across files

# Bottom to top: a package may import only the packages before it (and itself). ``errors`` is below all.
LAYERS = ["errors", "util", "engine", "aihc", "slurm", "failures", "spec", "rules", "record", "status", "submit", "hop",
          "session", "aiak", "ui", "cli", "__main__"]
# The local server stands beside the chain's packages: it may use only these, and they never use it
# (the session starts it; the CLI drives it).
LOCAL_MAY_IMPORT = {"errors", "util", "engine", "aihc", "failures", "local"}
MAX_MODULES = 16  # side by side in one package (local/ excepted: moto's models/responses/urls pattern)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: Dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path) -> Set[str]:
    """Every module ``path`` imports, at its top or inside a function (``from pkg import mod`` is ``pkg.mod``)."""
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def edges(path: Path) -> Set[str]:
    """The job_chain modules ``path`` depends on (a package named only for a submodule does not count)."""
    names = imports_of(path)
    return {m for m in names if m in MODULES and m != "job_chain"
            and not any(other.startswith(m + ".") for other in names)}


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def upward(layers: List[str], local_may: Set[str]) -> List[str]:
    wrong = []
    for module, path in MODULES.items():
        mine = package_of(module)
        for other in edges(path):
            theirs = package_of(other)
            if theirs == mine or not theirs:
                continue
            if mine == "local":
                wrong += [f"{module} -> {other}"] if theirs not in local_may else []
            elif theirs == "local":
                wrong += [f"{module} -> {other}"] if mine not in ("session", "cli", "ui") else []
            elif mine in layers and theirs in layers and layers.index(theirs) > layers.index(mine):
                wrong.append(f"{module} -> {other}")
    return sorted(wrong)


def cycles() -> List[List[str]]:
    """Strongly connected groups of more than one module (Tarjan), each a cycle of imports."""
    graph = {m: sorted(edges(p)) for m, p in MODULES.items()}
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_every_package_imports_only_the_layers_below_it() -> None:
    assert set(LAYERS) | {"local", ""} >= {package_of(m) for m in MODULES}, "place the new package in LAYERS"
    assert upward(LAYERS, LOCAL_MAY_IMPORT) == []


def test_no_import_cycle_between_modules() -> None:
    assert cycles() == []


def test_the_layer_and_cycle_checks_fail_when_they_should(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks above are not vacuous: an upward import and a cycle are found."""
    assert upward(list(reversed(LAYERS)), LOCAL_MAY_IMPORT) != []  # the real tree, read upside down
    assert upward(LAYERS, {"errors"}) != []  # local/ does use util/ and aihc/
    fake = {"job_chain.x.a": tmp_path / "a.py", "job_chain.x.b": tmp_path / "b.py"}
    fake["job_chain.x.a"].write_text("def f():\n    from job_chain.x import b\n")
    fake["job_chain.x.b"].write_text("import job_chain.x.a\n")
    monkeypatch.setattr(__import__(__name__), "MODULES", {**MODULES, **fake}, raising=True)
    assert ["job_chain.x.a", "job_chain.x.b"] in cycles()


def test_no_mixins() -> None:
    """Classes are built by composition: a class that needs another's behaviour holds one."""
    mixins = [f"{m}.{node.name}" for m, p in MODULES.items() for node in ast.walk(ast.parse(p.read_text()))
              if isinstance(node, ast.ClassDef) and node.name.endswith("Mixin")]
    assert mixins == []


def test_packages_stay_small_enough_to_scan() -> None:
    crowded = {}
    for directory in sorted({p.parent for p in MODULES.values()}):
        if directory.name == "local":
            continue
        count = len([p for p in directory.glob("*.py") if p.name != "__init__.py"])
        if count > MAX_MODULES:
            crowded[str(directory.relative_to(PACKAGE.parent))] = count
    assert crowded == {}


def test_long_modules_are_a_warning_only() -> None:
    """Over LONG_MODULE lines a module is worth a look, not a split for its own sake."""
    long = [f"{p.relative_to(PACKAGE.parent)}: {n}" for p in MODULES.values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > LONG_MODULE]
    if long:
        warnings.warn("long modules: " + ", ".join(long), stacklevel=1)
    assert all(int(entry.rsplit(": ", 1)[1]) > LONG_MODULE for entry in long)


# A run record's file names (job_chain/record/layout.py has them all), as they would appear in code
RECORD_NAMES = re.compile(r"-attempt-|attempts\.json|\brun\.json|stopped\.json|start-failed|revision-|notified-|"
                          r"^(slot|free|claim)\.|\.runs\b|\blean-")


def into_run_records(source: str) -> List[str]:
    """What in ``source`` reaches into FILE.runs/RUN/ past RunRecords: a file name of the record in a
    string (docstrings and comments aside) or a call of ``.directory(run_id)``."""
    tree = ast.parse(source)
    prose = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}  # docstrings
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose \
                and RECORD_NAMES.search(node.value):
            found.append(f"{node.lineno}: {node.value[:60]!r}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "directory":
            found.append(f"{node.lineno}: .directory()")
    return found


def test_only_the_record_package_knows_a_runs_files() -> None:
    """RunRecords (and job_chain/record/) is the one way into a run's directory: the rest asks for facts."""
    reaching = {module: found for module, path in MODULES.items() if package_of(module) != "record"
                for found in [into_run_records(path.read_text(encoding="utf-8"))] if found}
    assert reaching == {}
    assert into_run_records('name = f"exit-{step}-attempt-{n}.json"\n') != []  # the check can fail
    assert into_run_records("path = records.directory(run_id)\n") != []
    assert into_run_records('"""Reads ``exit-S-attempt-K.json``."""\n') == []


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
