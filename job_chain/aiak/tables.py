"""The AIAK model and dataset tables: the shipped ``aiak_dict/*.csv`` plus the user's own.

They are data, not code, so teams add a dataset or a newer model without touching Python or
site-packages: a ``models.csv`` / ``datasets.csv`` in ``aiak-gen --dict DIR``, in ``$AIAK_DICT``
or in an ``aiak_dict/`` beside the chain file replaces shipped rows with the same key (model or
dataset name) and adds new ones. Precedence, highest first: ``--dict``, ``AIAK_DICT``, the
directory beside the chain file, the shipped tables. A user table is checked whole before
anything is used, and a fault is one error naming ``file:line``. A replacing model row that
leaves an AIAK column empty (launchers, converter config, chat template, SFT length, experts)
keeps the replaced row's value: mirroring the weights elsewhere does not change AIAK's image.

The shipped tables live once, in the repository's top-level ``aiak_dict/``; the package data
``job_chain/aiak/aiak_dict`` is a symlink to it in a checkout, and a copy in wheels and sdists.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from job_chain.errors import UsageError
from job_chain.util.jsonfile import describe
from job_chain.util.suggest import close_matches

SHIPPED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aiak_dict")
NO_DEFAULT = "#N/A"
MODELS_FILE, DATASETS_FILE = "models.csv", "datasets.csv"
ENV_VAR = "AIAK_DICT"
SHIPPED, DICT_OPTION, BESIDE_CHAIN = "shipped", "--dict", "beside the chain file"
MAX_TABLE_BYTES = 4 * 1024 * 1024
MAX_SPLIT = 2**31 - 1
# Header names a column may have (compared lower-cased, spaces collapsed): the shipped tables'
# own Chinese headers, and plain English ones for tables people write themselves.
MODEL_COLUMNS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("series", ("模型系列", "series")),
    ("model_name", ("模型名称", "model_name", "name")),
    ("hf_name", ("hf模型名称", "hf_name")),
    ("url", ("hf model 下载地址", "model_url", "url")),
    ("tp", ("tp",)),
    ("pp", ("pp",)),
)
# Optional model columns (aiak-gen's own, English only): what AIAK's image holds for the model.
# Launchers are paths relative to the AIAK root (or absolute), the converter config a name in
# tools/convert_checkpoint/config/ (or an absolute .json path). A row without them still loads;
# a chain that needs a missing one is refused at generation, naming the column to add.
# model_family is preprocess_pretrain_data.py's --model-family (Qwen-1 needs "qwen"), convert_args
# the converter flags AIAK's own convert script for the model adds, the batch columns the
# launchers' --global-batch-size / --micro-batch-size (Megatron needs the data-parallel size to
# divide global / micro), loongforge_* LoongForge's converter's --config_file / --convert_file.
MODEL_OPTIONAL_COLUMNS: Tuple[str, ...] = (
    "ep", "num_experts", "convert_config", "chat_template", "sft_seq_length", "pretrain_launcher",
    "sft_launcher", "model_family", "convert_args", "pretrain_global_batch", "pretrain_micro_batch",
    "sft_global_batch", "sft_micro_batch", "loongforge_config", "loongforge_convert")
BATCH_COLUMNS = ("pretrain_global_batch", "pretrain_micro_batch", "sft_global_batch", "sft_micro_batch")
TEXT_COLUMNS = ("convert_config", "chat_template", "pretrain_launcher", "sft_launcher", "model_family",
                "loongforge_config", "loongforge_convert")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_PATH_RE = re.compile(r"[A-Za-z0-9._/+-]+")
# converter flags: --name or --name=value, one space between them
_FLAG = r"--[A-Za-z][A-Za-z0-9_-]*(=[A-Za-z0-9,._/+-]+)?"
_ARGS_RE = re.compile(f"{_FLAG}( {_FLAG})*")
DATASET_COLUMNS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("dataset_name", ("名称", "dataset_name", "name")),
    ("url", ("原始格式", "dataset_url", "url")),
)


@dataclass(frozen=True)
class Origin:
    """Where a row came from: the layer (shipped, --dict, AIAK_DICT, beside the chain file)."""

    layer: str
    file: str
    line: int


@dataclass(frozen=True)
class Model:
    series: str
    name: str
    hf_name: str
    url: str
    tp: Optional[int]  # None: AIAK has no recommended split for this model
    pp: Optional[int]
    origin: Optional[Origin] = field(default=None, compare=False)
    ep: Optional[int] = None  # MoE: the expert-parallel size of AIAK's launchers
    num_experts: Optional[int] = None  # MoE: experts per layer (the converter's --num_experts)
    convert_config: str = ""  # tools/convert_checkpoint/config/<this>.json, or an absolute path
    chat_template: str = ""  # preprocess_sft_data.py --chat-template
    sft_seq_length: Optional[int] = None  # the SFT launcher's --seq-length
    pretrain_launcher: str = ""  # relative to the AIAK root, or absolute
    sft_launcher: str = ""
    model_family: str = ""  # preprocess_pretrain_data.py --model-family (Qwen-1: qwen)
    convert_args: str = ""  # more converter flags, e.g. --expert_tensor_parallel_size=1
    pretrain_global_batch: Optional[int] = None  # the pretrain launcher's --global-batch-size
    pretrain_micro_batch: Optional[int] = None
    sft_global_batch: Optional[int] = None
    sft_micro_batch: Optional[int] = None
    loongforge_config: str = ""  # LoongForge's converter: --config_file, relative to its root
    loongforge_convert: str = ""  # and --convert_file

    def batch(self, phase: str) -> Tuple[Optional[int], Optional[int]]:
        """(global, micro) batch size of this phase's AIAK launcher, None where unknown."""
        return getattr(self, f"{phase}_global_batch"), getattr(self, f"{phase}_micro_batch")


@dataclass(frozen=True)
class Dataset:
    name: str
    url: str
    origin: Optional[Origin] = field(default=None, compare=False)


@dataclass
class Tables:
    """The merged tables, by model name and dataset name (shipped order, then added rows)."""

    models: Dict[str, Model]
    datasets: Dict[str, Dataset]


class TableError(UsageError):
    """A user table that cannot be used, as ``file:line: what is wrong and how to fix it``."""


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _decode(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise TableError(f"{path}:{line}: not UTF-8 text (byte {data[exc.start]:#04x}): save the "
                         "table as UTF-8 CSV") from None


def _read(path: str) -> List[Tuple[int, List[str]]]:
    """The non-blank rows of a CSV file with their line numbers."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_TABLE_BYTES + 1)
    except OSError as exc:
        raise TableError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_TABLE_BYTES:
        raise TableError(f"{path}: larger than {MAX_TABLE_BYTES // (1024 * 1024)} MiB; is it the "
                         "right file?")
    reader = csv.reader(io.StringIO(_decode(path, data), newline=""))
    rows = []
    start = 1
    try:
        for row in reader:
            cells = [cell.strip() for cell in row]
            if any(cells):
                rows.append((start, cells))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise TableError(f"{path}:{reader.line_num}: not valid CSV ({exc})") from None
    return rows


def _split(path: str, line: int, column: str, value: str, none: str = "no default split") -> Optional[int]:
    if not value or value.upper() == NO_DEFAULT:
        return None
    if not value.isdigit() or len(value) > 10 or not 1 <= int(value) <= MAX_SPLIT:
        raise TableError(f"{path}:{line}: {column} must be a positive integer or {NO_DEFAULT} "
                         f"({none}), found {describe(value)}")
    return int(value)


def cell_problem(column: str, value: str) -> Optional[str]:
    """Why a launcher, converter config or chat template value cannot be used, or None."""
    if column == "convert_args":
        if _ARGS_RE.fullmatch(value) and len(value) <= 300:
            return None
        return ("must be converter flags such as --moe-grouped-gemm --expert_tensor_parallel_size=1 "
                f"(--name or --name=value, one space apart), found {describe(value)}")
    pattern = _NAME_RE if column in ("chat_template", "model_family") else _PATH_RE
    if pattern.fullmatch(value) and ".." not in value.split("/") and len(value) <= 300 and not (
            column == "convert_config" and "/" in value and not posixpath.isabs(value)):
        return None
    kind = ("a name such as qwen" if column in ("chat_template", "model_family") else
            "a config name such as llama2-7b, or an absolute path" if column == "convert_config" else
            "a path relative to the AIAK root, such as examples/llama2/pretrain/pretrain_llama2_7b.sh, "
            "or an absolute path")
    return f"must be {kind} (letters, digits, '._/+-', no '..'), found {describe(value)}"


def _text_cell(path: str, line: int, column: str, value: str) -> str:
    """A launcher, converter config or chat template cell: empty, or a name/path without tricks."""
    if not value or value.upper() == NO_DEFAULT:
        return ""
    problem = cell_problem(column, value)
    if problem:
        raise TableError(f"{path}:{line}: {column} {problem}")
    return value


def _extras(path: str, line: int, header: List[str], row: List[str]) -> Dict[str, str]:
    """The optional model columns a row has (by header name), checked one by one."""
    cells = {name: (row[i] if i < len(row) else "") for i, name in enumerate(header)}
    extras = {c: cells.get(c, "") for c in MODEL_OPTIONAL_COLUMNS}
    for column, value in extras.items():
        if not value.isprintable():
            raise TableError(f"{path}:{line}: {column} must be printable text, found {describe(value)}")
    return extras


def _columns(path: str, header: Tuple[int, List[str]],
             wanted: Sequence[Tuple[str, Tuple[str, ...]]]) -> List[int]:
    """The index of each wanted column in the header row, or a TableError naming the missing one."""
    line, cells = header
    names = [_norm(c) for c in cells]
    found = []
    for column, aliases in wanted:
        index = next((i for i, name in enumerate(names) if name in aliases), None)
        if index is None:
            expected = ",".join(aliases[0] for _, aliases in wanted)
            raise TableError(f"{path}:{line}: missing column {column!r}: the first line must be the "
                             f"header, e.g. {expected} (as in the shipped table) or "
                             f"{','.join(c for c, _ in wanted)}")
        found.append(index)
    return found


def _cells(path: str, line: int, row: List[str], indexes: List[int],
           wanted: Sequence[Tuple[str, Tuple[str, ...]]]) -> List[str]:
    if len(row) <= max(indexes):
        missing = [c for (c, _), i in zip(wanted, indexes) if i >= len(row)]
        raise TableError(f"{path}:{line}: missing column {missing[0]!r}: the row has {len(row)} "
                         f"values, the header names {max(indexes) + 1}")
    values = [row[i] for i in indexes]
    for (column, _), value in zip(wanted, values):
        if not value.isprintable():
            raise TableError(f"{path}:{line}: {column} must be printable text, found {describe(value)}")
    return values


def _check_key(path: str, line: int, kind: str, key: str, seen: Dict[str, int]) -> None:
    if not key:
        raise TableError(f"{path}:{line}: the {kind} name is empty")
    if key in seen:
        raise TableError(f"{path}:{line}: duplicate {kind} {describe(key)} (also on line "
                         f"{seen[key]}): keep one row per {kind}")
    seen[key] = line


def read_models(path: str, layer: str) -> List[Model]:
    """The rows of one models.csv, checked (header, columns, unique names, TP/PP)."""
    rows = _read(path)
    if not rows:
        raise TableError(f"{path}:1: empty table: the first line must be the header")
    indexes = _columns(path, rows[0], MODEL_COLUMNS)
    header = [_norm(c) for c in rows[0][1]]
    seen: Dict[str, int] = {}
    models = []
    for line, row in rows[1:]:
        series, name, hf_name, url, tp_text, pp_text = _cells(path, line, row, indexes, MODEL_COLUMNS)
        _check_key(path, line, "model", name, seen)  # an empty URL: the description gives MODEL_URL
        tp, pp = _split(path, line, "tp", tp_text), _split(path, line, "pp", pp_text)
        if (tp is None) != (pp is None):
            raise TableError(f"{path}:{line}: tp and pp must both be numbers or both {NO_DEFAULT}, "
                             f"found tp={describe(tp_text)} pp={describe(pp_text)}")
        extra = _extras(path, line, header, row)
        ep = _split(path, line, "ep", extra["ep"], "not a mixture-of-experts model")
        experts = _split(path, line, "num_experts", extra["num_experts"], "not a mixture-of-experts model")
        if ep is not None and (experts is None or experts % ep):
            raise TableError(f"{path}:{line}: ep {ep} needs num_experts, a multiple of it (the experts are "
                             f"split over ep ranks), found num_experts={describe(extra['num_experts'])}")
        seq = _split(path, line, "sft_seq_length", extra["sft_seq_length"], "unknown")
        cells: Dict[str, Any] = {c: _text_cell(path, line, c, extra[c]) for c in TEXT_COLUMNS + ("convert_args",)}
        cells.update((c, _split(path, line, c, extra[c], "unknown")) for c in BATCH_COLUMNS)
        models.append(Model(series or name, name, hf_name, url, tp, pp, Origin(layer, path, line),
                            ep=ep if experts else None, num_experts=experts, sft_seq_length=seq, **cells))
    return models


def read_datasets(path: str, layer: str) -> List[Dataset]:
    """The rows of one datasets.csv, checked (header, columns, unique names)."""
    rows = _read(path)
    if not rows:
        raise TableError(f"{path}:1: empty table: the first line must be the header")
    indexes = _columns(path, rows[0], DATASET_COLUMNS)
    seen: Dict[str, int] = {}
    datasets = []
    for line, row in rows[1:]:
        name, url = _cells(path, line, row, indexes, DATASET_COLUMNS)
        _check_key(path, line, "dataset", name, seen)
        if not url:
            raise TableError(f"{path}:{line}: the URL of dataset {describe(name)} is empty: give "
                             "the bos:/ path of its raw data")
        datasets.append(Dataset(name, url, Origin(layer, path, line)))
    return datasets


def user_dirs(dict_dir: Optional[str], chain_file: Optional[str],
              environ: Optional[Dict[str, str]] = None) -> List[Tuple[str, str]]:
    """``[(layer, directory)]`` of the user tables, highest precedence first."""
    environ = dict(os.environ) if environ is None else environ
    dirs: List[Tuple[str, str]] = []
    for layer, directory in ((DICT_OPTION, dict_dir), (ENV_VAR, environ.get(ENV_VAR) or None)):
        if directory is None:
            continue
        if not os.path.isdir(directory):
            raise TableError(f"{layer} {directory}: not a directory (it should hold your "
                             f"{MODELS_FILE} and/or {DATASETS_FILE})")
        if not any(os.path.isfile(os.path.join(directory, f)) for f in (MODELS_FILE, DATASETS_FILE)):
            raise TableError(f"{layer} {directory}: has neither {MODELS_FILE} nor {DATASETS_FILE}")
        dirs.append((layer, directory))
    if chain_file:
        beside = os.path.join(os.path.dirname(os.path.abspath(chain_file)), "aiak_dict")
        if os.path.isdir(beside):
            dirs.append((BESIDE_CHAIN, beside))
    return dirs


def _inherit(row: Model, replaced: Optional[Model]) -> Model:
    """A replacing row with the replaced row's AIAK columns where its own are empty."""
    if replaced is None:
        return row
    own = {c for c in BATCH_COLUMNS if getattr(row, c.split("_")[0] + "_launcher")}  # its own launcher's
    kept = {c: getattr(replaced, c) for c in MODEL_OPTIONAL_COLUMNS if not getattr(row, c) and c not in own}
    return dataclasses.replace(row, **kept)


def load(dict_dir: Optional[str] = None, chain_file: Optional[str] = None,
         environ: Optional[Dict[str, str]] = None) -> Tables:
    """The shipped tables with the user's layered over them (see the module docstring)."""
    models = {m.name: m for m in _shipped(MODELS_FILE, read_models)}
    datasets = {d.name: d for d in _shipped(DATASETS_FILE, read_datasets)}
    seen = {os.path.realpath(SHIPPED_DIR)}  # e.g. a chain file at the repository's root
    layers = []
    for layer, directory in user_dirs(dict_dir, chain_file, environ):  # one directory, one layer
        if os.path.realpath(directory) not in seen:
            seen.add(os.path.realpath(directory))
            layers.append((layer, directory))
    for layer, directory in reversed(layers):  # lowest precedence first, so higher ones win
        path = os.path.join(directory, MODELS_FILE)
        if os.path.isfile(path):
            models.update((m.name, _inherit(m, models.get(m.name))) for m in read_models(path, layer))
        path = os.path.join(directory, DATASETS_FILE)
        if os.path.isfile(path):
            datasets.update((d.name, d) for d in read_datasets(path, layer))
    return Tables(models, datasets)


_SHIPPED: Dict[Tuple[str, int, int], List[Any]] = {}


def _shipped(name: str, read: Callable[[str, str], List[Any]]) -> List[Any]:
    """The rows of a shipped table, read once per version of its file (a ``load`` per description
    re-read both CSVs: a tenth of generating a chain); its rows are frozen, so they are shared."""
    path = os.path.join(SHIPPED_DIR, name)
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _SHIPPED:
        _SHIPPED[key] = read(path, SHIPPED)
    return _SHIPPED[key]


def models() -> Dict[str, Model]:
    """The shipped models.csv by model name: series, HF name, BOS URL of the weights, TP/PP."""
    return load(environ={}).models


def datasets() -> Dict[str, Dataset]:
    """The shipped datasets.csv by dataset name: BOS URL of the raw data."""
    return load(environ={}).datasets


def suggest(name: str, known: List[str]) -> str:
    """``" (did you mean X?)"`` for a close match (up to three), else ``""``."""
    close = close_matches(name, known, n=3, cutoff=0.5)
    if close:
        return " (did you mean " + " or ".join(close) + "?)"
    return ""
