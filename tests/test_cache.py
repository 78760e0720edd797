"""Steps cached across runs (jobChain.cache, docs/caching.md), in-process on the in-memory API: what a
later run creates (nothing for a cached step whose key matches), what its dependents get, and every
way the key must miss. The same on the real local server, through the CLI: tests/test_cache_run.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from memory_api import MemoryAPI

from job_chain import ChainSession, Outcome
from job_chain.hop.advance import advance

POOL = "pool-local"


def write(tmp_path: Path, jobs: List[Dict[str, Any]], mount: Optional[Path] = None, **top: Any) -> Path:
    """The chain file in ``tmp_path``, which every step mounts (``mount``, default ``tmp_path``: as on
    AIHC, its pods must see the run record beside the file)."""
    path = tmp_path / "chain_info.json"
    for job in jobs:
        job.setdefault("datasources", [{"type": "pfs", "name": "pfs", "mountPath": str(mount or tmp_path)}])
    path.write_text(json.dumps({"resourcePoolId": POOL, "jobs": jobs, **top}, indent=1))
    return path


def step(name: str, command: str, settings: Optional[Dict[str, Any]] = None, **spec: Any) -> Dict[str, Any]:
    job: Dict[str, Any] = {"name": name, "jobSpec": {"image": "local", "command": command, "replicas": 1, **spec}}
    if settings:
        job["jobChain"] = settings
    return job


class Driver:
    """Runs a session's runs on the memory API: each created job ends as the test says, and its tail
    (the advance) runs as the real job's would."""

    def __init__(self, chain: Path) -> None:
        self.api = MemoryAPI()
        self.chain = chain
        self.session = ChainSession.from_file(str(chain), client=self.api)

    def run(self, exits: Optional[Dict[str, int]] = None, outputs: Optional[Dict[str, Dict[str, str]]] = None,
            **start: Any) -> Any:
        exits, outputs = exits or {}, outputs or {}
        before = len(self.api.creates)
        run = self.session.start(**start)
        done = before
        while done < len(self.api.creates):
            create = self.api.creates[done]
            done += 1
            name, attempt = create.labels["job-chain/step"], int(create.labels["job-chain/attempt"])
            code = exits.get(name, 0)
            self.api.finish(create.job_id, code)
            advance(self.session.frozen(run), self.api, run_id=run.run_id, step=name, attempt=attempt,
                    exit_code=code, records=self.session.records, resume_hint="-",
                    outputs=(outputs.get(name, {}) if code == 0 else {}, None))
        return run

    def created(self, run: Any) -> List[str]:
        """The steps a run created jobs for, in order."""
        return [c.labels["job-chain/step"] for c in self.api.creates
                if c.labels["job-chain/run"] == run.run_id and c.created]

    def env(self, run: Any, name: str) -> Dict[str, str]:
        [body] = [c.body for c in self.api.creates if c.labels["job-chain/run"] == run.run_id
                  and c.labels["job-chain/step"] == name]
        return {e["name"]: e["value"] for e in body["jobSpec"]["envs"]}


@pytest.fixture
def line(tmp_path: Path) -> Driver:
    """convert (cached, declares the directory it makes) -> train (uses convert's output)."""
    made = tmp_path / "ckpt-${params.model}"
    chain = write(tmp_path, [
        step("convert", "convert --model ${params.model}", {"cache": {"version": "1", "paths": [str(made)]}}),
        step("train", "train", envs=[{"name": "CKPT", "value": "${steps.convert.outputs.ckpt}"}],
             settings={"dependsOn": ["convert"]}),
    ], params={"model": "llama"})
    return Driver(chain)


def converted(tmp_path: Path, model: str = "llama") -> Dict[str, Dict[str, str]]:
    (tmp_path / f"ckpt-{model}").mkdir(exist_ok=True)
    return {"convert": {"ckpt": str(tmp_path / f"ckpt-{model}")}}


def test_a_later_run_reuses_an_unchanged_cached_step_and_its_dependent_gets_the_output(
        tmp_path: Path, line: Driver) -> None:
    first = line.run(outputs=converted(tmp_path))
    assert line.created(first) == ["convert", "train"]
    second = line.run()
    assert line.created(second) == ["train"]  # no job for convert
    assert line.env(second, "train")["CKPT"] == str(tmp_path / "ckpt-llama")
    status = line.session.status(second.run_id)
    assert status.outcome is Outcome.SUCCEEDED
    convert = status.steps[0]
    assert convert.status == "Cached" and convert.job_id == ""
    origin = convert.attempts[0].cached
    assert origin is not None and (origin["run"], origin["step"], origin["attempt"]) == (first.run_id, "convert", 1)
    assert convert.outputs == {"ckpt": str(tmp_path / "ckpt-llama")}
    data = status.as_json()["steps"][0]
    assert data["status"] == "Cached" and data["attempts"][0]["cached"]["run"] == first.run_id


@pytest.mark.parametrize("change", ["param", "no-cache", "path-deleted", "script", "version"])
def test_a_cached_step_runs_again_when_what_it_computes_changed(tmp_path: Path, line: Driver, change: str) -> None:
    line.run(outputs=converted(tmp_path))
    start: Dict[str, Any] = {}
    if change == "param":
        start["params"] = {"model": "qwen"}
    elif change == "no-cache":
        start["cache"] = False
    elif change == "path-deleted":
        (tmp_path / "ckpt-llama").rmdir()
    else:
        data = json.loads(line.chain.read_text())
        if change == "script":
            data["jobs"][0]["jobSpec"]["command"] = "convert --model ${params.model} --fp16"
        else:
            data["jobs"][0]["jobChain"]["cache"]["version"] = "2"
        line.chain.write_text(json.dumps(data))
    model = "qwen" if change == "param" else "llama"
    again = line.run(outputs={"convert": {"ckpt": str(tmp_path / f"ckpt-{model}")}}, **start)
    assert line.created(again) == ["convert", "train"]


def test_explain_names_the_part_that_changed(tmp_path: Path, line: Driver) -> None:
    line.run(outputs=converted(tmp_path))
    same = line.session.cache_explain("convert")
    assert same.hit and same.differ == []
    data = json.loads(line.chain.read_text())
    data["jobs"][0]["jobSpec"]["command"] = "convert --model ${params.model} --fp16"
    data["jobs"][0]["jobSpec"]["envs"] = [{"name": "HF_HOME", "value": "/mnt/hf"}]
    line.chain.write_text(json.dumps(data))
    changed = line.session.cache_explain("convert")
    assert not changed.hit and changed.differ == ["jobSpec.command", "jobSpec.envs.HF_HOME"]
    other = line.session.cache_explain("convert", params={"model": "qwen"})
    assert "params.model" in other.differ and "paths" in other.differ


def test_a_failed_attempt_is_never_cached_and_a_retry_that_succeeds_is(tmp_path: Path) -> None:
    chain = write(tmp_path, [step("convert", "convert", {"cache": True})])
    driver = Driver(chain)
    driver.run(exits={"convert": 3})
    assert driver.session.cache_entries() == []
    second = driver.run()
    assert driver.created(second) == ["convert"]
    [entry] = driver.session.cache_entries()
    assert entry["from"]["run"] == second.run_id
    third = driver.run()
    assert driver.created(third) == [] and driver.session.status(third.run_id).outcome is Outcome.SUCCEEDED


def test_cached_points_of_a_matrix_and_a_join_after_two_cached_branches(tmp_path: Path) -> None:
    chain = write(tmp_path, [
        step("prep", "prep", {"cache": True}),
        step("tok", "tokenize ${matrix.seq}", {"cache": True, "matrix": {"seq": [2048, 4096]},
                                               "dependsOn": ["prep"]}),
        step("other", "other", {"cache": True, "dependsOn": ["prep"]}),
        step("join", "join", {"dependsOn": ["tok", "other"]}),
    ])
    driver = Driver(chain)
    first = driver.run()
    assert sorted(driver.created(first)) == ["join", "other", "prep", "tok-seq-2048", "tok-seq-4096"]
    second = driver.run()
    assert driver.created(second) == ["join"]  # exactly once, after every cached branch
    status = driver.session.status(second.run_id)
    assert [s.status for s in status.steps] == ["Cached", "Cached", "Cached", "Cached", "Succeeded"]
    data = json.loads(chain.read_text())
    data["jobs"][1]["jobChain"]["matrix"]["seq"] = [2048, 8192]  # one point new: it alone runs
    chain.write_text(json.dumps(data))
    third = driver.run()
    assert sorted(driver.created(third)) == ["join", "tok-seq-8192"]


def test_entries_are_kept_private_and_forget_removes_them(tmp_path: Path, line: Driver) -> None:
    line.run(outputs=converted(tmp_path))
    [entry] = line.session.cache_entries()
    folder = Path(str(line.chain) + ".runs") / ".cache"
    [kept] = list(folder.iterdir())
    assert kept.name == f"{entry['key']}.json" and kept.stat().st_mode & 0o077 == 0
    assert line.session.cache_forget("convert") == 1 and line.session.cache_entries() == []
    assert line.created(line.run(outputs=converted(tmp_path))) == ["convert", "train"]


def test_cache_dir_shares_entries_between_chain_files(tmp_path: Path) -> None:
    shared = tmp_path / "team-cache"
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    a = Driver(write(a_dir, [step("convert", "convert", {"cache": True})], tmp_path, cacheDir="../team-cache"))
    b = Driver(write(b_dir, [step("convert", "convert", {"cache": True}), step("sft", "sft")], tmp_path,
                     cacheDir=str(shared)))
    a.run()
    assert b.created(b.run()) == ["sft"]
    assert len(list(shared.iterdir())) == 1


@pytest.mark.parametrize("cache, problem", [
    ("yes", "jobs[0].jobChain.cache: must be true or an object"),
    ({"paths": ["relative/dir"]}, "jobs[0].jobChain.cache.paths[0]: must be an absolute path"),
    ({"version": 1.5}, "jobs[0].jobChain.cache.version: must be a text"),
    ({"verison": "2"}, "jobs[0].jobChain.cache.verison: unknown key"),
    ({"paths": ["/ckpt/${run.id}"]}, "jobs[0].jobChain.cache.paths[0]: ${run.id}: a cached step's paths are the same"),
    ({"paths": ["/ckpt/${params.modle}"]}, "jobs[0].jobChain.cache.paths[0]: ${params.modle}"),
])
def test_validate_refuses_a_bad_cache_setting_at_its_json_path(tmp_path: Path, cache: Any, problem: str) -> None:
    from job_chain.spec.loader import ChainFileError, load_chain

    chain = write(tmp_path, [step("convert", "convert", {"cache": cache})])
    with pytest.raises(ChainFileError) as caught:
        load_chain(str(chain), local=True)
    assert problem in str(caught.value)


def test_hours_saved_are_the_original_attempts_gpus_times_its_time(tmp_path: Path) -> None:
    from job_chain.cli.run_view import gpu_line
    from job_chain.status.types import Attempt, RunStatus, StepStatus
    from job_chain.submit.cache import saved_hours

    assert saved_hours({"gpus": 16.0, "seconds": 5400.0}) == 24.0
    assert saved_hours({"gpus": 16.0, "seconds": None}) is None
    status = RunStatus(run_id="r", chain_path="c", outcome=Outcome.SUCCEEDED, steps=[
        StepStatus(0, "convert", "Cached",
                   attempts=[Attempt("convert", 1, "", "Cached", cached={"savedGpuHours": 24.0})]),
        StepStatus(1, "train", "Succeeded", gpu_hours=2.5)])
    assert status.saved_gpu_hours == 24.0 and status.as_json()["savedGpuHours"] == 24.0
    assert gpu_line(status) == "GPU-hours: 2.50; 24.00 saved by cached steps"
