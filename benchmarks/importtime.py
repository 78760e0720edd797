"""What a fresh interpreter imports, and what each import costs (``python -X importtime``).

A helper for benchmarks and for import-budget tests: run a command with ``-X importtime``, parse
its report into :class:`Import` rows, and ask which modules were imported, what they cost beyond
a bare interpreter (``python -c pass``), and *who pulled a module in* (the report lists children
before their parent, indented one level deeper, so each row's importer is the next row one
level up). Standard library only, so a test can load it by path without the harness::

    import importlib.util, sys
    spec = importlib.util.spec_from_file_location("importtime", "benchmarks/importtime.py")
    importtime = importlib.util.module_from_spec(spec)
    sys.modules["importtime"] = importtime   # dataclasses look their module up there
    spec.loader.exec_module(importtime)
    found = importtime.measure(["-m", "job_chain", "advance", "--help"])
    assert not importtime.present(found, ["click", "rich"]), importtime.explain(found, ["click", "rich"])

From the shell: ``python benchmarks/importtime.py [--top 15] [--forbid click,rich] -- -c "import x"``.
Times vary with the machine's load and with the bytecode cache (a first run compiles); the module
*set* does not, which is what a test should assert on, with time as a loose budget.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

HEADER = "import time:"


@dataclass(frozen=True)
class Import:
    """One row of ``-X importtime``: a module, how deep it was imported, its own and total cost."""

    module: str
    depth: int  # 0: imported by the program itself (or by the interpreter's start-up)
    self_us: int
    cumulative_us: int
    importer: Optional[str]  # the module whose import pulled this one in (None at depth 0)


def parse(report: str) -> List[Import]:
    """The rows of a ``-X importtime`` report (other stderr lines are ignored), in report order."""
    raw = []
    for line in report.splitlines():
        if not line.startswith(HEADER):
            continue
        parts = line[len(HEADER):].split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue  # the column header
        name = parts[2].rstrip()
        indent = len(name) - len(name.lstrip(" "))
        raw.append((name.strip(), max(0, (indent - 1) // 2), int(parts[0]), int(parts[1])))
    out: List[Import] = []
    for index, (module, depth, own, total) in enumerate(raw):
        importer = next((m for m, d, _, _ in raw[index + 1:] if d == depth - 1), None) if depth else None
        out.append(Import(module, depth, own, total, importer))
    return out


def measure(args: Sequence[str], env: Optional[Mapping[str, str]] = None, python: str = sys.executable,
            timeout: float = 120, check: bool = True) -> List[Import]:
    """Run ``python -X importtime ARGS`` (e.g. ``["-c", "import x"]``) and parse what it imported."""
    done = subprocess.run([python, "-X", "importtime", *args], env=dict(env) if env is not None else None,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        tail = "\n".join(line for line in done.stderr.splitlines() if not line.startswith(HEADER))[-1000:]
        raise RuntimeError(f"{python} {' '.join(args)} exited {done.returncode}: {tail}")
    return parse(done.stderr)


def baseline(env: Optional[Mapping[str, str]] = None, python: str = sys.executable) -> List[Import]:
    """What a bare interpreter imports (``python -c pass``): site, encodings, the .pth hooks."""
    return measure(["-c", "pass"], env=env, python=python)


def modules(imports: Iterable[Import]) -> List[str]:
    return [i.module for i in imports]


def added(imports: Sequence[Import], bare: Sequence[Import]) -> List[Import]:
    """The rows of ``imports`` whose module a bare interpreter (``bare``) does not import."""
    known = set(modules(bare))
    return [i for i in imports if i.module not in known]


def total_ms(imports: Iterable[Import]) -> float:
    """The summed own time of ``imports`` (so nested rows are not counted twice), in ms."""
    return sum(i.self_us for i in imports) / 1000.0


def top(imports: Iterable[Import], count: int = 10, depth: Optional[int] = 0) -> List[Import]:
    """The ``count`` costliest imports by cumulative time (at ``depth``; None: any depth)."""
    rows = [i for i in imports if depth is None or i.depth == depth]
    return sorted(rows, key=lambda i: -i.cumulative_us)[:count]


def _matches(module: str, names: Iterable[str]) -> bool:
    return any(module == n or module.startswith(n + ".") for n in names)


def present(imports: Iterable[Import], names: Iterable[str]) -> List[str]:
    """Which of ``names`` (a package covers its submodules) were imported, in report order."""
    wanted = list(names)
    return [i.module for i in imports if _matches(i.module, wanted)]


def chain(imports: Sequence[Import], module: str) -> List[str]:
    """Who imported ``module``: [module, its importer, that one's importer, ..., a depth-0 import]."""
    by_position = {i.module: i for i in imports}
    out = [module]
    current = by_position.get(module)
    while current is not None and current.importer is not None and len(out) < 64:
        out.append(current.importer)
        current = by_position.get(current.importer)
    return out


def explain(imports: Sequence[Import], names: Iterable[str]) -> str:
    """One line per forbidden module found (outermost only), with the import chain that pulled it in."""
    wanted = list(names)
    lines = []
    for item in imports:
        if _matches(item.module, wanted) and not (item.importer and _matches(item.importer, wanted)):
            lines.append(f"{item.module} ({item.cumulative_us / 1000:.1f} ms) imported via "
                         + " <- ".join(chain(imports, item.module)[1:] or ["the program itself"]))
    return "\n".join(lines) or "none of " + ", ".join(wanted) + " was imported"


def summary(imports: Sequence[Import], bare: Sequence[Import], count: int = 10) -> Dict[str, object]:
    """The figures a report wants: modules and ms beyond a bare interpreter, and the costliest."""
    extra = added(imports, bare)
    return {"modules": len(extra), "own_ms": round(total_ms(extra), 1),
            "top": [{"module": i.module, "cumulative_ms": round(i.cumulative_us / 1000, 1)}
                    for i in top(extra, count)]}


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                usage="%(prog)s [--top N] [--forbid a,b] [--json] -- PYTHON_ARGS...")
    p.add_argument("--top", type=int, default=15, help="how many of the costliest imports to show")
    p.add_argument("--forbid", default="", help="comma-separated modules that must not be imported (exit 1)")
    p.add_argument("--json", action="store_true", help="print every row as JSON")
    p.add_argument("args", nargs=argparse.REMAINDER, help="what python runs, e.g. -- -c 'import json'")
    options = p.parse_args(argv)
    args = options.args[1:] if options.args[:1] == ["--"] else options.args
    if not args:
        p.error("give what python should run after --, e.g. -- -m job_chain --help")
    env = dict(os.environ)
    found = measure(args, env=env, check=False)
    bare = baseline(env=env)
    extra = added(found, bare)
    forbidden = [n for n in options.forbid.split(",") if n.strip()]
    if options.json:
        print(json.dumps({"summary": summary(found, bare, options.top), "rows": [asdict(i) for i in found]}, indent=1))
    else:
        print(f"{len(extra)} modules beyond `python -c pass`, {total_ms(extra):.1f} ms of own import time")
        for item in top(extra, options.top):
            print(f"{item.cumulative_us / 1000:9.1f} ms  {item.module}")
    if forbidden:
        hits = present(found, forbidden)
        print(explain(found, forbidden), file=sys.stderr)
        return 1 if hits else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
