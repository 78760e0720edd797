"""Fuzz drill: the chain-file loader and aiak-gen never show a traceback.

Whatever the input — arbitrary bytes, broken or hostile JSON, a valid chain with a few things
changed, an AIAK description with any JSON values — the result is either valid (and the chain
passes the loader's validation) or a clear error: a JobChainError, exit code non-zero, each
problem on one line (a JSON path for schema problems, line:column for broken JSON), and aiak-gen
writes no file. Seeds are fixed (``derandomize``), so CI runs the same cases every time.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import re
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple
from unittest import mock

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from job_chain.aiak import tables
from job_chain.aiak.description import EVAL_KEYS, PRETRAIN_SFT_KEYS
from job_chain.aiak.generator import (
    EVAL_SCRIPT_NAMES,
    OPTIONAL,
    REQUIRED,
    SCRIPT_NAMES,
    generate_chain,
    parse_spec,
    step_scripts,
)
from job_chain.aihc.names import JOB_NAME, MAX_JOB_NAME, job_name_problem
from job_chain.cli import cli
from job_chain.cli.aiak import aiak_gen
from job_chain.errors import JobChainError, UsageError
from job_chain.spec.loader import ChainFileError, check_chain_data, load_chain

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
BASE_CHAINS = [json.loads((EXAMPLES / d / "chain_info.json").read_text()) for d in ("job_info", "hello")]
EXAMPLE_SCRIPTS = {p.name: p.read_text() for d in ("job_info", "hello") for p in (EXAMPLES / d).glob("*.sh")}


def fuzz(examples: int) -> Callable[[Any], Any]:
    """Hypothesis settings of this drill: fixed seed, no deadline, no example database."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much])


# -- strategies ---------------------------------------------------------------------------------

# as exponents: hypothesis cannot even repr an int over 4300 digits (Python >= 3.11)
HUGE_INTS = st.sampled_from([(2, 31), (2, 63), (10, 30), (-10, 31), (10, 400), (10, 4299), (10, 5000), (-10, 6001)]
                            ).map(lambda be: be[0] ** be[1])
ODD_STRINGS = ["", " ", "\n", "a\nb", "\t", "名称", "模型", "é", "\ud800", "x\udcffy", "\x00", "a\x00b.sh", "\x1b[31m",
               "\u2028", "\x85", "\ufeff", "missing.sh", "nope/missing.sh", "/abs/missing.sh", "job1.sh", "train.sh",
               "../job1.sh", "/", "/root/pfs", "rel/path", "Bad_Name", "a" * 300, "high", "PyTorchJob", "x.sh\n",
               "echo hi", "-", "9" * 5000, "1", "0", "-1", "true", "null", "NaN", "1e999", "SECRET-KEY-1234567"]
ODD_KEYS = ["", "a\nb", "名称", "\ud800", "\x00", "a.b", "a[0]", "x: y", "jobs", "name", "jobSpec", "command",
            "scriptFile", "image", "replicas", "envs", "value", "datasources", "mountPath", "labels", "key",
            "jobChain", "retries", "generatedBy", "priority", "queue", "api_config", "sk", "resourcePoolId"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(-(2**80), 2**80), HUGE_INTS,
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.sampled_from(ODD_STRINGS))
keys = st.one_of(st.text(max_size=8), st.sampled_from(ODD_KEYS))
json_values = st.recursive(scalars, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                           st.dictionaries(keys, kids, max_size=4)),
                           max_leaves=8)


@contextmanager
def unlimited_int_digits() -> Iterator[None]:
    """Let json.dumps write the huge ints the fuzzer makes (Python >= 3.11 limits int -> str)."""
    getter, setter = getattr(sys, "get_int_max_str_digits", None), getattr(sys, "set_int_max_str_digits", None)
    old = getter() if getter else None
    if setter:
        setter(0)
    try:
        yield
    finally:
        if setter:
            setter(old)


def dump(value: Any, ascii_only: bool = True) -> bytes:
    """Any value as a file's bytes: NaN/Infinity as Python writes them, lone surrogates as-is."""
    with unlimited_int_digits():
        text = json.dumps(value, indent=2, ensure_ascii=ascii_only)
    return text.encode("utf-8", "surrogatepass")


INSERTS = ["{", "}", "[", "]", ",", ":", '"', "\\", "NaN", "-Infinity", "Infinity", "1e999", "-1e400",
           "9" * 5000, "-" + "1" * 4400, "0.5", "\ud800", "\x00", "\ufeff", "/*", "'", "\n", "名", '"a": 1,',
           '"jobs": 7,', '"resourcePoolId": "p",', "true", "null", "nul", "[" * 2000, "{\"a\":" * 1500]


@st.composite
def chain_file_bytes(draw: st.DrawFn) -> bytes:
    """Arbitrary bytes and text, and JSON texts broken in the ways people (and disks) break them."""
    kind = draw(st.integers(0, 7))
    if kind == 0:
        return draw(st.binary(max_size=300))
    if kind == 1:
        return draw(st.text(max_size=200)).encode("utf-8", "surrogatepass")
    if kind == 2:  # any JSON value (top level not always an object), NaN and huge numbers included
        return dump(draw(json_values), draw(st.booleans()))
    if kind == 3:  # deep nesting around a valid chain or a value
        depth = draw(st.sampled_from([50, 99, 100, 101, 500, 990, 1000, 5000, 100000]))
        inner = json.dumps(draw(st.sampled_from(BASE_CHAINS))) if draw(st.booleans()) else "1"
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        closed = draw(st.booleans())
        return (opener * depth + inner + (closer * depth if closed else "")).encode()
    if kind == 4:  # duplicate keys
        base = json.dumps(draw(st.sampled_from(BASE_CHAINS)))
        dup = draw(st.sampled_from(['"jobs": 5, ', '"resourcePoolId": 1, ', '"jobs": [], ', '"x": 1, "x": 2, ']))
        return ("{" + dup + base[1:]).encode() if draw(st.booleans()) else (base[:-1] + ", " + dup[:-2] + "}").encode()
    text = json.dumps(draw(st.sampled_from(BASE_CHAINS)), indent=draw(st.sampled_from([None, 2, 4])),
                      ensure_ascii=draw(st.booleans()))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        edit = draw(st.integers(0, 2))
        if edit == 0:  # truncate
            text = text[:at]
        elif edit == 1:  # delete a slice
            text = text[:at] + text[at + draw(st.integers(1, 20)):]
        else:
            text = text[:at] + draw(st.sampled_from(INSERTS)) + text[at:]
    raw = text.encode("utf-8", "surrogatepass")
    if kind == 7:  # a stray invalid byte somewhere
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"])) + raw[at:]
    return raw


Path_ = Tuple[Any, ...]


def all_paths(doc: Any, prefix: Path_ = ()) -> List[Path_]:
    """Every JSON path in ``doc`` (the root excluded), parents before children."""
    paths: List[Path_] = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for key, value in items:
        paths.append(prefix + (key,))
        paths.extend(all_paths(value, prefix + (key,)))
    return paths


def containers(doc: Any, prefix: Path_ = ()) -> List[Path_]:
    """Paths of every object in ``doc``, the root included."""
    found = [prefix] if isinstance(doc, dict) else []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for key, value in items:
        found.extend(containers(value, prefix + (key,)))
    return found


def get(doc: Any, path: Path_) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def render(path: Path_) -> str:
    """A path as the loader writes it: ``jobs[1].jobSpec.image``."""
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else key)
    return out


WRONG_TYPES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3),
                        st.sampled_from([2**31, 2**63, 10**30, -(10**30)]),
                        st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(ODD_STRINGS),
                        st.builds(list), st.builds(dict), st.lists(scalars, max_size=2),  # fresh, never shared
                        st.dictionaries(keys, scalars, max_size=2))
SCRIPT_NAMES_FUZZ = st.one_of(st.sampled_from(sorted(EXAMPLE_SCRIPTS) + ["latin1.sh"]), st.sampled_from(ODD_STRINGS),
                              st.text(min_size=1, max_size=10).map(lambda s: s + ".sh"))


@st.composite
def mutated_chain(draw: st.DrawFn) -> Tuple[Any, List[Tuple[str, Path_, Any]]]:
    """A valid example chain with 0-3 mutations; returns the document and what was done."""
    doc = copy.deepcopy(draw(st.sampled_from(BASE_CHAINS)))
    done: List[Tuple[str, Path_, Any]] = []
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["set", "set", "wrong", "delete", "add", "empty", "script", "dup", "unicode"]))
        paths = all_paths(doc)
        if op in ("set", "wrong", "delete", "unicode") and paths:
            path = draw(st.sampled_from(paths))
            parent = get(doc, path[:-1])
            if op == "delete":
                del parent[path[-1]]
                done.append((op, path, None))
            else:
                value = draw({"set": json_values, "wrong": WRONG_TYPES,
                              "unicode": st.text(min_size=1, max_size=10)}[op])
                parent[path[-1]] = value
                done.append(("set", path, value))
        elif op == "add":
            where = draw(st.sampled_from(containers(doc)))
            key, value = draw(keys), draw(WRONG_TYPES | json_values)
            get(doc, where)[key] = value
            done.append(("set", where + (key,), value))
        elif op == "empty":
            choices = [p for p in all_paths(doc) if isinstance(get(doc, p), (list, dict))]
            if choices:
                path = draw(st.sampled_from(choices))
                value = draw(st.sampled_from([[], {}]).map(copy.deepcopy))  # never one shared object
                get(doc, path[:-1])[path[-1]] = value
                done.append(("set", path, value))
        elif op == "script" and isinstance(doc.get("jobs"), list) and doc["jobs"]:
            index = draw(st.integers(0, len(doc["jobs"]) - 1))
            job = doc["jobs"][index]
            if isinstance(job, dict) and isinstance(job.get("jobSpec"), dict):
                key = draw(st.sampled_from(["command", "scriptFile"]))
                job["jobSpec"][key] = draw(SCRIPT_NAMES_FUZZ)
                done.append(("set", ("jobs", index, "jobSpec", key), job["jobSpec"][key]))
        elif op == "dup" and isinstance(doc.get("jobs"), list) and doc["jobs"]:
            doc["jobs"].append(copy.deepcopy(draw(st.sampled_from(doc["jobs"]))))
            done.append(("dup", ("jobs",), None))
    return doc, done


# -- what the loader must say about a value it checks -------------------------------------------

def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _env_ok(v: Any) -> bool:
    return (isinstance(v, dict) and isinstance(v.get("name"), str)
            and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", v["name"]) is not None
            and (v.get("value") is None or isinstance(v["value"], str)))


def _mount_ok(v: Any) -> bool:
    return isinstance(v, dict) and isinstance(v.get("mountPath"), str) and v["mountPath"].startswith("/")


def _script_ok(v: Any, chain_dir: str) -> bool:
    """A script file the loader can read: present and UTF-8."""
    if not isinstance(v, str) or not v.strip() or not os.path.isfile(os.path.join(chain_dir, v)):
        return False
    try:
        Path(chain_dir, v).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _command_ok(v: Any, chain_dir: str) -> bool:
    if not isinstance(v, str) or not v.strip():
        return False
    return not re.match(r"^\S+\.sh$", v.strip()) or _script_ok(v.strip(), chain_dir)


# (path pattern, is the value acceptable?) for the values the loader checks: setting one of them
# to an unacceptable value must produce a problem at that path (or below it).
CHECKED: List[Tuple[str, Callable[[Any, str], bool]]] = [
    (r"resourcePoolId", lambda v, d: isinstance(v, str) and bool(v.strip()) and v.isprintable() and " " not in v),
    (r"api_config", lambda v, d: v is None or isinstance(v, dict)),
    (r"api_config\.(host|ak|sk)", lambda v, d: v is None or isinstance(v, str)),
    (r"scrips_path|config_path", lambda v, d: v is None or isinstance(v, str)),
    (r"jobs", lambda v, d: False),
    (r"jobs\[\d+\]", lambda v, d: False),
    (r"jobs\[\d+\]\.name", lambda v, d: job_name_problem(v) is None),
    (r"jobs\[\d+\]\.priority", lambda v, d: v is None or v in ("high", "normal", "low")),
    (r"jobs\[\d+\]\.queue", lambda v, d: v is None or isinstance(v, str)),
    (r"jobs\[\d+\]\.jobFramework", lambda v, d: v is None or v == "PyTorchJob"),
    (r"jobs\[\d+\]\.jobSpec", lambda v, d: False),
    (r"jobs\[\d+\]\.jobSpec\.image", lambda v, d: isinstance(v, str) and bool(v.strip())),
    (r"jobs\[\d+\]\.jobSpec\.replicas", lambda v, d: _positive_int(v)),
    (r"jobs\[\d+\]\.jobSpec\.envs", lambda v, d: v is None or isinstance(v, list) and all(_env_ok(e) for e in v)),
    (r"jobs\[\d+\]\.jobSpec\.envs\[\d+\]", lambda v, d: _env_ok(v)),
    (r"jobs\[\d+\]\.jobSpec\.envs\[\d+\]\.name", lambda v, d: _env_ok({"name": v})),
    # an env's value is optional as AIHC's other optional strings are: absent or null gives it no value
    (r"jobs\[\d+\]\.jobSpec\.envs\[\d+\]\.value", lambda v, d: v is None or isinstance(v, str)),
    (r"jobs\[\d+\]\.jobSpec\.command", _command_ok),
    (r"jobs\[\d+\]\.jobSpec\.scriptFile", lambda v, d: v is None or _script_ok(v, d)),
    (r"jobs\[\d+\]\.datasources", lambda v, d: v is None or isinstance(v, list) and all(_mount_ok(m) for m in v)),
    (r"jobs\[\d+\]\.datasources\[\d+\]", lambda v, d: _mount_ok(v)),
    (r"jobs\[\d+\]\.datasources\[\d+\]\.mountPath", lambda v, d: _mount_ok({"mountPath": v})),
    (r"jobs\[\d+\]\.labels", lambda v, d: v is None or isinstance(v, list) and all(
        isinstance(x, dict) and isinstance(x.get("key"), str) for x in v)),
    (r"jobs\[\d+\]\.jobChain", lambda v, d: isinstance(v, dict) and set(v) <= {"retries", "generatedBy"} and (
        "retries" not in v or (_positive_int(v["retries"]) or v["retries"] == 0))),
    (r"jobs\[\d+\]\.jobChain\.retries", lambda v, d: _positive_int(v) or (v == 0 and not isinstance(v, bool))),
]
PROBLEM_LINE = re.compile(r"^  ([A-Za-z_][A-Za-z0-9_]*|jobs\[\d+\]|\[(?P<top>['\"]).*(?P=top)\])"  # JSON path,
                          r"(\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\]|\[(?P<q>['\"]).*(?P=q)\])*: \S")  # then the problem
CHAIN_PROBLEM_COUNT = re.compile(r": \d+ problems?, nothing submitted:$")


def expected_problem(done: List[Tuple[str, Path_, Any]], chain_dir: str) -> Optional[str]:
    """The path the loader must name when the only mutation set a checked value to a bad one."""
    if len(done) != 1 or done[0][0] != "set" or not all(
            isinstance(k, int) or re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k) for k in done[0][1]):
        return None
    where = render(done[0][1])
    for pattern, acceptable in CHECKED:
        if re.fullmatch(pattern, where) and not acceptable(done[0][2], chain_dir):
            return where
    return None


# -- what every outcome must look like ----------------------------------------------------------

def safe_repr(value: Any) -> str:
    try:
        return repr(value)[:200]
    except ValueError:  # an int too large to print
        return "<huge>"


def one_line(text: str) -> bool:
    return bool(text.strip()) and len(text.splitlines()) == 1 and text.isprintable()


def check_loader_error(error: UsageError, path: str) -> None:
    """A chain-file error: problems with JSON paths, or one line with file:line:column."""
    message = str(error)
    assert message.startswith(path), message
    if isinstance(error, ChainFileError):
        lines = message.split("\n")
        assert CHAIN_PROBLEM_COUNT.search(lines[0]), message
        assert len(lines) == len(error.problems) + 1 >= 2
        for line in lines[1:]:
            assert one_line(line) and PROBLEM_LINE.match(line), line
    else:
        assert one_line(message), message
        assert re.match(re.escape(path) + r"(:\d+:\d+)?: \S", message), message
        if "JSON" in message or "UTF-8" in message:
            assert re.match(re.escape(path) + r":\d+:\d+: ", message), message


def check_valid_chain(chain: Any, expected_steps: int) -> None:
    assert len(chain.steps) == expected_steps
    for step in chain.steps:
        assert re.match(JOB_NAME, step.name) and len(step.name) <= MAX_JOB_NAME
        json.dumps(step.body, allow_nan=False)  # submittable: no NaN, no int too large to write
        assert isinstance(step.script, str) and step.script
    for warning in chain.warnings:
        assert one_line(warning), warning


def check_cli_error(result: Result, prog: str, chain_problems: bool = False) -> List[str]:
    """Non-zero exit, no traceback, a ``prog: error: ...`` first line on stderr."""
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.split("\n")
    if lines[-1] == "":
        lines.pop()
    assert lines and lines[0].startswith(f"{prog}: error: ") and one_line(lines[0][len(prog) + 9:]), result.stderr
    if chain_problems and len(lines) > 1:
        assert CHAIN_PROBLEM_COUNT.search(lines[0]), result.stderr
        for line in lines[1:]:
            assert one_line(line) and PROBLEM_LINE.match(line), line
    else:
        assert len(lines) == 1, result.stderr
    return lines


def run_loader(path: str, expected_steps: Optional[int]) -> Optional[UsageError]:
    """load_chain (cluster and local) and ``job-chain validate``: consistent, clear outcomes."""
    outcomes = []
    for local in (False, True):
        try:
            chain = load_chain(path, local=local)
        except UsageError as exc:
            check_loader_error(exc, path)
            outcomes.append(exc)
        else:
            if expected_steps is not None:
                check_valid_chain(chain, expected_steps)
            outcomes.append(None)
    assert (outcomes[0] is None) == (outcomes[1] is None)
    result = CliRunner().invoke(cli, ["validate", path], catch_exceptions=False)
    if outcomes[0] is None:
        assert result.exit_code == 0, result.output
        assert "OK" in result.stdout and one_line(result.stdout.strip())
        for line in result.stderr.splitlines():
            assert line.startswith("warning: ") and one_line(line), line
    else:
        check_cli_error(result, "job-chain", chain_problems=isinstance(outcomes[0], ChainFileError))
        assert result.exit_code == 2
    return outcomes[0]


@pytest.fixture(scope="module")
def chain_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the example scripts, where fuzzed chain files are written."""
    directory = tmp_path_factory.mktemp("fuzz-chains")
    for name, text in EXAMPLE_SCRIPTS.items():
        (directory / name).write_text(text)
    (directory / "latin1.sh").write_bytes(b"echo \xe9\n")  # exists, but is not UTF-8
    return directory


# -- chain-file loader --------------------------------------------------------------------------

CASES = itertools.count()


@contextmanager
def case_file(chain_dir: Path, raw: bytes) -> Iterator[str]:
    """``raw`` as a chain file of its own beside the scripts, removed after the case. A new file
    each case: overwriting one makes ext4 flush it at close (auto_da_alloc); on a busy machine
    1,500 overwrites waited 1.5-6 s on the disk, 1,500 new files 0.15 s."""
    path = chain_dir / f"chain-{next(CASES)}.json"
    path.write_bytes(raw)
    try:
        yield str(path)
    finally:
        path.unlink()


@fuzz(1500)
@given(raw=chain_file_bytes())
def test_loader_survives_any_bytes(chain_dir: Path, raw: bytes) -> None:
    with case_file(chain_dir, raw) as path:
        run_loader(path, None)


@fuzz(1500)
@given(case=mutated_chain())
def test_loader_on_mutated_chains(chain_dir: Path, case: Tuple[Any, List[Tuple[str, Path_, Any]]]) -> None:
    doc, done = case
    with case_file(chain_dir, dump(doc, ascii_only=len(done) % 2 == 0)) as path:
        jobs = doc.get("jobs")
        error = run_loader(path, len(jobs) if isinstance(jobs, list) else None)
    if not done:
        assert error is None, str(error)
    where = expected_problem(done, str(chain_dir))
    if where is not None:
        assert error is not None, f"{where} = {safe_repr(done[0][2])} accepted"
        if not isinstance(error, ChainFileError):  # a number too large, NaN: refused as JSON
            assert re.match(re.escape(path) + r":\d+:\d+: ", str(error)), str(error)
            return
        assert any(p == where or p.startswith((where + ":", where + ".", where + "["))
                   for p in error.problems), (where, error.problems)


# -- aiak-gen -----------------------------------------------------------------------------------

# rows a chain can run from (AIAK launchers, a BOS copy), and two the generator must refuse
MODELS = sorted(name for name, row in tables.models().items() if row.url and row.sft_launcher) + [
    "llama-13b", "qwen3-8b"]
DATASETS = sorted(tables.datasets())
GOOD: Dict[str, List[Any]] = {  # good values, from the real tables
    "MODEL_NAME": MODELS,
    "REPLICAS": ["1", 1, "2", 8, " 4 "],
    "VERSION": ["v1", "luyc-v4", "A.b_c-1", "9", "x" * 60, "v.1"],
    "TRAINING_PHASE": ["pretrain", "sft", "SFT", " pretrain ", "pretrain+sft"],
    "TP": ["", "1", 2, "8"],
    "PP": ["", "1", 1, "4"],
    "DATASET_NAME": DATASETS + ["my_corpus"],
    "JSON_KEYS": ["text", "", "text,title", "a b"],
    "IMAGE": ["registry.baidubce.com/aihc-aiak/aiak-training-llm:tag", "img"],
    "MOUNT_PATH": ["/root/pfs", "/root/pfs/team/", "/mnt/x", "/", ""],
    "MODEL_URL": ["bos:/bk/m", ""],
    "DATASET_URL": ["bos:/bk/d.jsonl", "bos:/", "bos:/bk/", "bos:/bk/名称.json"],
    "GPU_RESOURCE": ["baidu.com/a800_80g_cgpu", "baidu.com/h800_80g_cgpu"],
    "GPUS_PER_REPLICA": [8, "4", 1],
    "ENABLE_RDMA": [True, False, "false", "yes", 1],
    "QUEUE": ["default", "q1", None],
    "PRIORITY": ["high", "normal", "low", None],
    "TRAIN_SCRIPT": ["/workspace/x.sh", None],
    "CHAT_TEMPLATE": ["qwen", "llama3.1"],
    "SEQ_LENGTH": [2048, "4096", 1048576],
    "EP": ["", 1, "2"],
    "CONVERT_CONFIG": ["llama2-7b", "/root/pfs/c.json", ""],
    "BOS_ENDPOINT": ["bj.bcebos.com", "http://127.0.0.1:9000"],
    "RESOURCES": [{"convert": [{"name": "cpu", "quantity": 8}]}, {}],
    "AIAK_TRAINING_PATH": ["/workspace/LoongForge", "", None],
    "MEGATRON_PATH": ["/workspace/Loong-Megatron", None],
}
assert set(GOOD) == set(REQUIRED) | set(OPTIONAL)
EXTRA: Dict[str, List[Any]] = {  # keys of pretrain+sft or of EVAL only (good values; wild ones come from json_values)
    "SFT_DATASET_NAME": DATASETS[:3],
    "SFT_TRAIN_SCRIPT": ["/workspace/sft.sh"],
    "EVAL": [["ceval"], ["ceval", "MMLU", "gsm8k"], [f"b{i}" for i in range(16)]],
    "EVAL_COMMAND": ["python eval.py --task $EVAL_BENCHMARK"],
    "EVAL_PARALLEL": [1, "2", 16],
}
assert set(EXTRA) == set(PRETRAIN_SFT_KEYS) | {"EVAL"} | set(EVAL_KEYS)


@st.composite
def aiak_specs(draw: st.DrawFn) -> Dict[str, Any]:
    """Descriptions from the real tables, some keys missing, some with any JSON value."""
    rnd = draw(st.randoms(use_true_random=True))  # seeded by hypothesis; for rates (its draws favour edges)
    bad_rate = rnd.choice([0.0, 0.0, 0.0, 0.0, 0.05, 0.15, 0.6])  # share of keys given a wild value
    spec: Dict[str, Any] = {}
    optional = [key for key in sorted(OPTIONAL) if rnd.random() < 0.3]
    for key in list(REQUIRED) + optional:
        if key in REQUIRED and rnd.random() < bad_rate / 5:
            continue  # missing
        spec[key] = draw(json_values) if rnd.random() < bad_rate else rnd.choice(GOOD[key])
    if bad_rate == 0:  # TP and PP both given or both left to the table, your own data has a URL
        spec["TP"], spec["PP"] = rnd.choice([("", ""), ("1", "1"), (2, "4"), ("8", 1)])
        if spec["DATASET_NAME"] == "my_corpus" and rnd.random() < 0.7:
            spec["DATASET_URL"] = rnd.choice(GOOD["DATASET_URL"])
    extra = []
    if rnd.random() < 0.3:  # EVAL, now and then with its own keys
        extra += ["EVAL"] + [key for key in sorted(EVAL_KEYS) if rnd.random() < 0.4]
    if spec.get("TRAINING_PHASE") == "pretrain+sft" and rnd.random() < 0.8:
        extra += ["SFT_DATASET_NAME"] + (["SFT_TRAIN_SCRIPT"] if rnd.random() < 0.3 else [])
    if bad_rate and rnd.random() < 0.2:  # a key of another phase, or EVAL's without EVAL
        extra.append(rnd.choice(sorted(EXTRA)))
    for key in extra:
        spec[key] = draw(json_values) if rnd.random() < bad_rate else rnd.choice(EXTRA[key])
    if bad_rate and rnd.random() < 0.1:
        spec[draw(keys)] = draw(json_values)
    return spec


@st.composite
def templates(draw: st.DrawFn) -> Optional[Any]:
    """No template, a fuzzed example chain, or a chain aiak-gen wrote."""
    kind = draw(st.sampled_from([0, 1, 2, 3, 3]))
    if kind <= 1:
        return None
    doc, _ = draw(mutated_chain())
    if kind == 3 and isinstance(doc.get("jobs"), list):
        for job in doc["jobs"]:
            if isinstance(job, dict):
                job["jobChain"] = {"generatedBy": "aiak-gen"}
    return doc


STORAGE_OPTIONS = st.sampled_from([
    {"pool": "cce-pool", "pfs": "pfs-abc"}, {"pool": "cce-pool", "pfs": "pfs-abc", "mount_path": "/mnt/data"},
    {"pool": "cce-pool", "pfs": "pfs-abc"}, {"pool": "cce-pool", "pfs": "pfs-abc", "mount_path": "/root/pfs"},
    {}, {"pool": "p"}, {"pfs": "f"}, {"pool": "p", "pfs": "f", "mount_path": "relative"},
    {"pool": "p", "pfs": "f", "mount_path": "/root/pfs/"}])


def check_aiak_error(error: UsageError) -> None:
    message = str(error)
    assert one_line(message), message
    assert "Traceback" not in message


TRAINING = [SCRIPT_NAMES["convert"], SCRIPT_NAMES["preprocess"], SCRIPT_NAMES["train"]]
WITH_SFT = TRAINING + [SCRIPT_NAMES["preprocess"], SCRIPT_NAMES["train"]]
EVALUATION = [EVAL_SCRIPT_NAMES["eval"], EVAL_SCRIPT_NAMES["report"]]


def check_generated(chain: Dict[str, Any], validation_dir: Path) -> List[str]:
    """Jobs with valid, distinct names in one of the shapes aiak-gen writes (pretrain or sft,
    pretrain+sft, each with or without EVAL's matrix and report), and the chain passes the
    loader's validation; the script files its jobs name."""
    names = [job["name"] for job in chain["jobs"]]
    for name in names:
        assert re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", name) and re.match(JOB_NAME, name), name
        assert len(name) <= MAX_JOB_NAME
    assert len(set(names)) == len(names)
    commands = [job["jobSpec"]["command"] for job in chain["jobs"]]
    assert commands in (TRAINING, WITH_SFT, TRAINING + EVALUATION, WITH_SFT + EVALUATION), commands
    json.dumps(chain, allow_nan=False)
    loaded = check_chain_data(copy.deepcopy(chain), str(validation_dir / "chain_info.json"), local=True)
    points = len(chain["jobs"][-2]["jobChain"]["matrix"]["benchmark"]) if commands[-1] == EVALUATION[-1] else 1
    assert len(loaded.steps) == len(commands) - 1 + points
    return sorted(set(commands))


@pytest.fixture(scope="module")
def validation_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The step scripts, so a generated chain can be validated as if written beside them."""
    directory = tmp_path_factory.mktemp("fuzz-aiak-validate")
    for name, text in step_scripts(with_eval=True).items():
        (directory / name).write_text(text)
    return directory


@fuzz(1500)
@given(spec=aiak_specs(), template=templates(), storage=STORAGE_OPTIONS)
def test_aiak_library(validation_dir: Path, spec: Dict[str, Any], template: Any, storage: Dict[str, str]) -> None:
    try:
        parsed = parse_spec(spec, "aiak_job_info.json")
    except UsageError as exc:
        check_aiak_error(exc)
        assert str(exc).startswith("aiak_job_info.json")
        return
    try:
        chain, scripts = generate_chain(parsed, template if isinstance(template, dict) else None, **storage)
    except UsageError as exc:
        check_aiak_error(exc)
        return
    assert sorted(scripts) == check_generated(chain, validation_dir)


def snapshot(directory: Path) -> Dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir()}


@fuzz(900)
@given(spec=st.one_of(aiak_specs(), aiak_specs(), aiak_specs(), json_values, chain_file_bytes()), template=templates(),
       storage=STORAGE_OPTIONS, flags=st.sampled_from([[], [], ["--force"], ["--dry-run"], ["--force", "--dry-run"]]))
def test_aiak_gen_cli(tmp_path_factory: pytest.TempPathFactory, validation_dir: Path, spec: Any, template: Any,
                      storage: Dict[str, str], flags: List[str]) -> None:
    work = Path(tempfile.mkdtemp(dir=str(tmp_path_factory.getbasetemp())))
    try:
        info, chain_file = work / "aiak_job_info.json", work / "chain_info.json"
        info.write_bytes(spec if isinstance(spec, bytes) else dump(spec))
        if template is not None:
            chain_file.write_bytes(dump(template))
        args = [str(chain_file), str(info), *flags]
        for option, value in storage.items():
            args += ["--" + option.replace("_", "-"), value]
        before = snapshot(work)
        with mock.patch("job_chain.util.files.os.fsync"):  # durability is not under test; fsync costs seconds
            result = CliRunner().invoke(aiak_gen, args, catch_exceptions=False)
        if result.exit_code != 0:
            check_cli_error(result, "aiak-gen")
            assert result.stdout == ""
            assert snapshot(work) == before, "aiak-gen changed files although it failed"
            return
        if "--dry-run" in flags:
            assert snapshot(work) == before
            check_generated(json.loads(result.stdout), validation_dir)
            return
        written = check_generated(json.loads(chain_file.read_text()), validation_dir)
        assert set(snapshot(work)) == set(before) | {"chain_info.json", *written}
        load_chain(str(chain_file), local=True)  # the scripts were written beside it
    finally:
        shutil.rmtree(work)


def test_fuzz_inputs_include_valid_and_invalid_cases(chain_dir: Path, validation_dir: Path) -> None:
    """The drill means something only if a good share of its cases are valid (and some are not)."""
    outcomes: Dict[str, List[bool]] = {"chain": [], "aiak": []}

    @settings(max_examples=150, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(case=mutated_chain(), spec=aiak_specs())
    def sample(case: Tuple[Any, List[Any]], spec: Dict[str, Any]) -> None:
        path = chain_dir / "share.json"
        path.write_bytes(dump(case[0]))
        try:
            load_chain(str(path), local=True)
            outcomes["chain"].append(True)
        except JobChainError:
            outcomes["chain"].append(False)
        try:
            generate_chain(spec, pool="p", pfs="f")
            outcomes["aiak"].append(True)
        except JobChainError:
            outcomes["aiak"].append(False)

    sample()
    for kind, seen in outcomes.items():
        share = sum(seen) / len(seen)
        assert 0.15 < share < 0.9, (kind, share)
