"""In-process rules of the console: curves from logs, problems at their JSON path, chain discovery,
redaction, the loader's jobChain.metrics and the local server's backwards tail read."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from job_chain.spec.loader import ChainFileError, check_chain_data
from job_chain.ui.catalog import find_chain_files
from job_chain.ui.curves import parse_curves
from job_chain.ui.views import annotate, json_lines, split_problem
from job_chain.util.redaction import REDACTED, redact

MEGATRON = (" [2026-11-23 08:00:00] iteration       20/    1000 | consumed samples: 640 | elapsed time per "
            "iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 187.3 | learning rate: 2.500000E-05 | "
            "global batch size: 32 | lm loss: 2.345678E+00 | loss scale: 1.0 |")


def test_megatron_lines_give_loss_lr_and_throughput_by_iteration() -> None:
    curves, problem = parse_curves([MEGATRON, "noise",
                                    MEGATRON.replace("20/", "30/").replace("2.345678E+00", "2.1E+00")])
    assert problem == ""
    assert curves["loss"] == {"x": [20.0, 30.0], "y": [2.345678, 2.1]}
    assert curves["learning rate"]["y"] == [2.5e-05, 2.5e-05]
    assert curves["throughput"]["y"] == [187.3, 187.3]


def test_step_patterns_add_curves_and_lines_without_iteration_count_up() -> None:
    curves, _ = parse_curves(["acc=0.5", "my loss 3.0", "lm loss: 9.0E+00", "acc=0.75"],
                             {"acc": r"acc=([0-9.]+)", "loss": r"my loss ([0-9.]+)"})
    assert curves["acc"] == {"x": [1.0, 3.0], "y": [0.5, 0.75]}
    assert curves["loss"]["y"] == [3.0]  # the step's pattern replaced the default one


def test_a_catastrophic_metrics_pattern_is_stopped_and_the_built_in_curves_still_drawn(monkeypatch) -> None:
    from job_chain.util import user_regex

    monkeypatch.setattr(user_regex, "SECONDS", 1.0)
    started = time.monotonic()
    curves, problem = parse_curves([MEGATRON, "a" * 40 + "!"], {"acc": r"^(a+)+$"})
    assert time.monotonic() - started < 4  # without the bound: hours, holding the interpreter
    assert "were not applied" in problem and "(a+)+" in problem
    assert curves["loss"]["y"] == [2.345678]


def test_the_loader_checks_jobchain_metrics(tmp_path: Path) -> None:
    (tmp_path / "a.sh").write_text("echo\n")

    def chain(metrics: object) -> dict:
        spec = {"command": "a.sh", "image": "i", "replicas": 1}
        return {"resourcePoolId": "p", "jobs": [{"name": "a", "jobSpec": spec, "jobChain": {"metrics": metrics}}]}

    ok = check_chain_data(chain({"loss": "lm loss: ([0-9.E+-]+)"}), str(tmp_path / "c.json"), local=True)
    assert ok.steps[0].metrics == {"loss": "lm loss: ([0-9.E+-]+)"}
    assert "jobChain" not in ok.steps[0].body
    with pytest.raises(ChainFileError) as bad:
        check_chain_data(chain({"loss": "lm loss: (", "lr": "no group", "x": 3}), str(tmp_path / "c.json"), local=True)
    assert any(p.startswith("jobs[0].jobChain.metrics.loss: is not a valid regex") for p in bad.value.problems)
    assert any(p.startswith("jobs[0].jobChain.metrics.lr: needs a group") for p in bad.value.problems)
    assert any(p.startswith("jobs[0].jobChain.metrics.x: must be a regex string") for p in bad.value.problems)


def test_problems_sit_on_their_path_or_the_nearest_parent() -> None:
    data = {"resourcePoolId": "p", "jobs": [{"name": "a", "jobSpec": {"replicas": "two"}}]}
    lines = json_lines(data)
    assert json.loads("".join(line.text for line in lines)) == data
    loose = annotate(lines, ["jobs[0].jobSpec.replicas: must be a positive integer",
                             "jobs[0].jobSpec.image: required", "odd: thing"])
    by_path = {line.path: line.problems for line in lines if line.problems}
    assert by_path["jobs[0].jobSpec.replicas"] == ["jobs[0].jobSpec.replicas: must be a positive integer"]
    assert by_path["jobs[0].jobSpec"] == ["jobs[0].jobSpec.image: required"]
    assert loose == [] and by_path[""] == ["odd: thing"]
    assert split_problem("jobs[0]['a: b'].c: bad: really") == ("jobs[0]['a: b'].c", "bad: really")


def test_redaction_hides_secret_keys_and_known_values() -> None:
    shown = redact({"api_config": {"ak": "A", "sk": "S3CRET"}, "cmd": "x S3CRET y", "token": "", "n": [1],
                    "clientToken": "run-1-0-1", "authToken": "t", "SecretAccessKey": "k"}, ["S3CRET"])
    assert shown == {"api_config": {"ak": "A", "sk": REDACTED}, "cmd": f"x {REDACTED} y", "token": "", "n": [1],
                     "clientToken": "run-1-0-1", "authToken": REDACTED, "SecretAccessKey": REDACTED}


def test_chain_discovery_is_bounded(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "c" / "d" / "e" / "f"
    for folder in (tmp_path, tmp_path / "a", deep, tmp_path / ".hidden"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "chain.json").write_text("{}")
        (folder / "chain.json.runs").mkdir()
    (tmp_path / "a" / "plain.json").write_text("{}")  # no runs: not a chain with runs
    found = find_chain_files([str(tmp_path)])
    assert found == [str(tmp_path / "a" / "chain.json"), str(tmp_path / "chain.json")]
    assert len(find_chain_files([str(tmp_path)], limit=1)) == 1
    assert find_chain_files([str(tmp_path / "a" / "plain.json")]) == [str(tmp_path / "a" / "plain.json")]


@pytest.mark.parametrize("lines", [0, 1, 3, 9, 5000])
def test_tail_bytes_reads_the_last_lines(lines: int, tmp_path: Path) -> None:
    text = "".join(f"line {n} " + "x" * (n % 300) + "\n" for n in range(3000)) + "partial"
    (tmp_path / "pod.log").write_text(text)
    from job_chain.local.logs import first_page, read_page

    path = str(tmp_path / "pod.log")
    got = b"".join(read_page(path, first_page(path, 0, None, lines, None), None, None, 1 << 30)[0]).decode()
    if lines == 0:
        assert got == ""
    else:
        assert got.splitlines(True)[-lines:] == text.splitlines(True)[-lines:]


def test_every_asset_a_page_loads_is_in_the_package() -> None:
    import fnmatch
    import re

    import job_chain.ui

    tomllib = pytest.importorskip("tomllib")
    root = Path(job_chain.ui.__file__).parent
    data = tomllib.loads((root.parent.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]

    def shipped(relative: str) -> bool:  # each data directory is a package of its own
        package = ".".join(["job_chain", "ui", *Path(relative).parent.parts])
        return any(fnmatch.fnmatch(Path(relative).name, p) for p in data.get(package, []) + data.get("*", []))

    base = (root / "templates" / "base.html").read_text()
    assets = re.findall(r'(?:src|href)="/(static/[^"]+)"', base)
    assert len(assets) == 5 and not re.search(r'(?:src|href)="(?:https?:)?//', base)  # nothing from a CDN
    for asset in assets:
        assert (root / asset).is_file(), asset
        assert shipped(asset), f"{asset} is not package data"
    for template in root.glob("templates/*.html"):
        assert shipped(f"templates/{template.name}")
    licences = {p.name for p in (root / "static" / "vendor").glob("*.LICENSE")}
    assert licences == {"htmx.LICENSE", "uPlot.LICENSE"}


def test_console_job_ids_read_from_records_are_checked(tmp_path: Path) -> None:
    """A run record is a file anyone with write access can plant things in: a job id that is
    markup (or any non-id) is ignored, in the attempts cache and in submission files alike."""
    from job_chain.record.records import RunRecords
    from job_chain.status.look import cached_attempts, save_attempts
    from job_chain.status.types import Attempt

    records = RunRecords(str(tmp_path / "chain.json"))
    records.create_run("20260101-000000-abcd")
    good = Attempt("s0", 1, "pytorchjob-1f2e", "Succeeded", None, None, 0)
    evil = '<img src=x onerror="alert(1)">'
    save_attempts(records, "20260101-000000-abcd", {good.job_id: good}, {good.job_id},
                  [{"step": "s0", "attempt": 1, "jobId": good.job_id}])
    cache_file = tmp_path / "chain.json.runs" / "20260101-000000-abcd" / "attempts.json"
    cache = json.loads(cache_file.read_text())
    cache[evil] = dict(cache[good.job_id], jobId=evil)
    cache["job-other"] = dict(cache[good.job_id], jobId=evil)  # a key that disagrees with its entry
    cache[good.job_id]["submission"] = dict(cache[good.job_id]["submission"], step="s1")
    cache["pytorchjob-2e3f"] = dict(cache[good.job_id], jobId="pytorchjob-2e3f",
                                    submission={"step": "s2", "attempt": 1, "jobId": evil})  # not its job's
    cache_file.write_text(json.dumps(cache))
    known, final, submitted = cached_attempts(records, "20260101-000000-abcd")
    assert list(known) == [good.job_id, "pytorchjob-2e3f"] and final == {good.job_id, "pytorchjob-2e3f"}
    assert list(submitted) == [("s1", 1)]
    records.record_submission("20260101-000000-abcd", 0, 1, "pytorchjob-1f2e", "a")
    records.record_submission("20260101-000000-abcd", 1, 1, evil, "b")
    assert records.submission("20260101-000000-abcd", 1, 1) is None
    assert [e["jobId"] for e in records.submissions("20260101-000000-abcd")] == ["pytorchjob-1f2e"]
