"""Parameters, references, matrices and outputs, in-process: validation paths, expansion, requests."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List

import pytest

from job_chain.errors import UsageError
from job_chain.record.outputs import MAX_BYTES, MAX_KEYS, parse, read_file
from job_chain.rules.revise import revise
from job_chain.spec.frozen import freeze, thaw
from job_chain.spec.loader import ChainFileError, check_chain_data
from job_chain.spec.matrix import point_name
from job_chain.spec.model import display_group
from job_chain.spec.params import MissingOutput, parse_param_args, resolve_params
from job_chain.status.logged_outputs import from_log
from job_chain.submit.request import build_request
from job_chain.submit.snapshot import decode_snapshot, encode_snapshot


def job(name: str, command: str = "", **settings: Any) -> Dict[str, Any]:
    body: Dict[str, Any] = {"name": name, "jobSpec": {"image": "img", "command": command or f"echo {name}"}}
    if settings:
        body["jobChain"] = settings
    return body


def load(jobs: List[Dict[str, Any]], path: str = "/tmp/params/chain_info.json", **top: Any):
    return check_chain_data({"resourcePoolId": "pool", "jobs": jobs, **top}, path, local=True)


def problems(jobs: List[Dict[str, Any]], **top: Any) -> List[str]:
    with pytest.raises(ChainFileError) as error:
        load(jobs, **top)
    return error.value.problems


def env(body: Dict[str, Any]) -> Dict[str, str]:
    return {e["name"]: e["value"] for e in body["jobSpec"]["envs"]}


PIPELINE = [
    job("convert", "echo ckpt=/pfs/ckpt-${params.tag} >> $JOB_CHAIN_OUTPUTS"),
    dict(job("train", "train --lr ${params.lr} --seed ${matrix.seed} --from ${steps.convert.outputs.ckpt}",
             dependsOn=["convert"], matrix={"lr": ["1e-4", "3e-4"], "seed": [1, 2, 3]}, maxParallel=2),
         labels=[{"key": "sweep", "value": "${params.tag}"}],
         datasources=[{"type": "pfs", "name": "pfs", "mountPath": "/pfs/${params.tag}"}]),
    job("report", "report ${steps.convert.outputs.ckpt}", dependsOn=["train"]),
]


def test_a_matrix_expands_into_named_points_that_its_dependents_all_wait_for() -> None:
    chain = load(PIPELINE, params={"lr": "1e-4", "tag": "base"})
    assert [s.display for s in chain.steps] == ["convert"] + [f"train[lr={lr},seed={seed}]" for lr in ("1e-4", "3e-4")
                                                              for seed in (1, 2, 3)] + ["report"]
    assert [s.name for s in chain.steps[1:3]] == ["train-lr-1e-4-seed-1", "train-lr-1e-4-seed-2"]
    assert all(s.depends_on == (0,) and s.max_parallel == 2 and s.group == "train" for s in chain.steps[1:7])
    assert chain.steps[7].depends_on == (1, 2, 3, 4, 5, 6)
    assert chain.graph and chain.find("train") is chain.steps[1] and chain.find("train[lr=3e-4,seed=3]").index == 6
    assert chain.find("7") is chain.find(7) is chain.named("report") and chain.find("8") is None
    assert [display_group(s.display) for s in chain.steps[:3]] == ["convert", "train", "train"]
    assert "matrix" not in chain.steps[1].settings_raw


def test_a_line_with_a_matrix_waits_for_every_point() -> None:
    chain = load([job("a"), job("b", matrix={"x": ["p", "q"]}), job("c")])
    assert [s.depends_on for s in chain.steps] == [(), (0,), (0,), (1, 2)]


def test_a_frozen_root_matrix_stays_a_set_of_independent_points() -> None:
    chain = load([job("sweep", matrix={"i": [0, 1, 2]}, maxParallel=2)])
    assert [s.depends_on for s in thaw(freeze(chain), chain.path).steps] == [(), (), ()]


def test_point_names_are_valid_job_names_unique_and_stable() -> None:
    assert point_name("train", {"lr": "1e-4", "seed": "1"}) == "train-lr-1e-4-seed-1"
    odd = [point_name("train", {"lr": v}) for v in ("0.1", "0-1", "A")]
    assert len(set(odd)) == 3 and odd[1] == "train-lr-0-1" and odd[0].startswith("train-lr-0-1-")
    long = point_name("evaluate-the-model", {"benchmark": "x" * 80, "shots": "5"})
    assert len(long) <= 50 and long == point_name("evaluate-the-model", {"benchmark": "x" * 80, "shots": "5"})
    # a value added to the matrix never renames the points that were there
    before = load([job("t", matrix={"v": ["0-1"]})]).steps[0].name
    after = load([job("t", matrix={"v": ["0.1", "0-1"]})]).steps[1].name
    assert before == after


@pytest.mark.parametrize(("jobs", "top", "expected"), [
    ([job("a", "echo ${params.lrr}")], {"params": {"lr": "1"}},
     'jobs[0].jobSpec.command: ${params.lrr}: no parameter \'lrr\' (did you mean \'lr\'?) (params: lr)'),
    ([dict(job("a"), labels=[{"key": "k", "value": "${matrix.seed}"}])], {},
     "jobs[0].labels[0].value: ${matrix.seed}: this job has no jobChain.matrix"),
    ([job("a", "x ${matrix.sed}", matrix={"seed": [1]})], {},
     "jobs[0].jobSpec.command: ${matrix.sed}: no 'sed' in this job's matrix (did you mean 'seed'?)"),
    ([job("a"), job("b", "x ${steps.c.outputs.k}"), job("c")], {},
     "jobs[1].jobSpec.command: ${steps.c.outputs.k}: c is not a job this one waits for"),
    ([job("a", "x ${steps.nope.outputs.k}")], {}, "${steps.nope.outputs.k}: no job 'nope' in this chain"),
    ([job("a", matrix={"x": [1, 2]}), job("b", "${steps.a.outputs.k}")], {}, "a is a matrix of 2 points"),
    ([job("a", "echo ${param.lr}")], {}, "${param.lr} is not a reference (did you mean 'params'?)"),
    ([job("a", maxParallel=2)], {}, "jobs[0].jobChain.maxParallel: caps the points of a matrix"),
    ([job("a", matrix={"lr": [1e-4]})], {}, "jobs[0].jobChain.matrix.lr[0]: must be a string or a whole number"),
    ([job("a", matrix={"lr": []})], {}, "jobs[0].jobChain.matrix.lr: must be a non-empty list"),
    ([job("a", matrix={"x": list(range(40)), "y": list(range(40))})], {}, "1600 points; at most 1024"),
    ([job("a", matrix={"x": [1]}, maxParallel=0)], {}, "jobs[0].jobChain.maxParallel: must be a whole number"),
    ([job("a")], {"params": {"lr": 0.1}}, "params.lr: must be a string"),
    ([job("a")], {"params": {"lr": "1", "LR": "2"}}, "params.LR: 'LR' and 'lr' would both be JOB_CHAIN_PARAM_LR"),
    ([job("a")], {"maxRunning": "2"}, "maxRunning: must be a whole number"),
    ([job("a"), job("h", runOn="failure", matrix={"x": [1]})], {}, "an exit handler (runOn) runs once"),
    # issue 29 item 1: a reference in jobChain is replaced (checkpoint) or refused, never kept as written
    ([job("a", checkpoint={"dir": "/pfs/${params.tga}/ckpt"})], {"params": {"tag": "x"}},
     "jobs[0].jobChain.checkpoint.dir: ${params.tga}: no parameter 'tga' (did you mean 'tag'?)"),
    ([job("a", checkpoint={"dir": "/pfs/${matrix.lr}"})], {}, "jobs[0].jobChain.checkpoint.dir: ${matrix.lr}: "
                                                             "this job has no jobChain.matrix"),
    ([job("a", checkpoint={"dir": "/pfs/$JOB_CHAIN_RUN_ID"})], {},
     "jobs[0].jobChain.checkpoint.dir: $JOB_CHAIN_RUN_ID is a shell variable, and no shell reads this path: "
     "write ${run.id}"),
    ([job("a", checkpoint={"dir": "/pfs/${HOME}/c"})], {}, "checkpoint.dir: ${HOME} is a shell variable"),
    ([job("a"), job("b", checkpoint={"dir": "/pfs/${steps.a.outputs.k}"})], {},
     "jobs[1].jobChain.checkpoint.dir: ${steps.a.outputs.k}: a step's outputs are not known"),
    ([job("a", checkpoint={"dir": "${params.root}/ckpt"})], {"params": {"root": "pfs"}},
     "jobs[0].jobChain.checkpoint: a: dir becomes 'pfs/ckpt', not an absolute path"),
    ([job("a", failureRules=[{"match": "x", "class": "nan", "explanation": "see /pfs/${params.tag}"}])],
     {"params": {"tag": "x"}}, "jobs[0].jobChain.failureRules[0].explanation: ${params.tag}: references are "
                               "replaced only in the job's create body, jobChain.checkpoint and jobChain.cache.paths"),
    ([job("a", matrix={"data": ["/pfs/${params.tag}"]})], {"params": {"tag": "x"}},
     "jobs[0].jobChain.matrix.data[0]: ${params.tag}: references are replaced only"),
    ([job("a", metrics={"loss": "${run.id} ([0-9.]+)"})], {}, "jobs[0].jobChain.metrics.loss: ${run.id}"),
    ([job("a")], {"config_path": "/pfs/${params.tag}/chain_info.json", "params": {"tag": "x"}},
     "config_path: ${params.tag}: references are replaced only in a job's create body"),
    ([job("a")], {"params": {"tag": "x", "out": "/pfs/${params.tag}"}}, "params.out: ${params.tag}: references are"),
])
def test_references_and_settings_are_checked_at_their_json_path(jobs: List[Dict[str, Any]], top: Dict[str, Any],
                                                                expected: str) -> None:
    assert any(expected in p for p in problems(jobs, **top)), problems(jobs, **top)


def test_a_checkpoint_is_read_where_its_params_matrix_values_and_run_id_say() -> None:
    from job_chain.spec.params import checkpoint_of

    chain = load([job("train", "echo ${run.id}", matrix={"lr": ["1e-4", "3e-4"]},
                      checkpoint={"dir": "${params.root}/${params.tag}/${run.id}/${matrix.lr}",
                                  "tracker": "latest-${matrix.lr}.txt"})],
                 params={"root": "/pfs", "tag": "base"})
    run = replace(chain, params={"root": "/pfs", "tag": "v7"})  # --param tag=v7
    spec = checkpoint_of(run, run.steps[1], "20260101-000000-abcd")
    assert spec is not None and (spec.dir, spec.tracker) == ("/pfs/v7/20260101-000000-abcd/3e-4", "latest-3e-4.txt")
    assert run.steps[1].checkpoint.dir == "${params.root}/${params.tag}/${run.id}/${matrix.lr}"  # as written, frozen
    thawed = thaw(freeze(run), run.path)
    assert checkpoint_of(thawed, thawed.steps[0], "R").dir == "/pfs/v7/R/1e-4"
    body = build_request(run, run.steps[0].name, "20260101-000000-abcd", 1, mode="watch")
    assert body["jobSpec"]["command"] == "echo 20260101-000000-abcd"


def test_a_script_file_with_a_reference_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "train.sh").write_text("python train.py --lr ${params.lr}\n")
    chain = load([job("train", "train.sh")], path=str(tmp_path / "chain_info.json"), params={"lr": "1"})
    assert any("runs as written" in w and "$JOB_CHAIN_PARAM_<NAME>" in w for w in chain.warnings)


def test_params_resolve_with_did_you_mean_and_reach_the_request() -> None:
    chain = load(PIPELINE, params={"lr": "1e-4", "tag": "base"})
    with pytest.raises(UsageError, match="no parameter 'l' .*did you mean 'lr'"):
        resolve_params(chain.params, {"l": "3"}, "chain_info.json")
    with pytest.raises(UsageError, match="NAME=VALUE"):
        parse_param_args(["lr"])
    run = replace(chain, params=resolve_params(chain.params, parse_param_args(["lr=3e-4"]), "c"))
    body = build_request(run, "train-lr-1e-4-seed-2", "r1", 1, outputs={"convert": {"ckpt": "/pfs/c"}})
    assert "train --lr 3e-4 --seed 2 --from /pfs/c" in body["jobSpec"]["command"]
    assert body["labels"][0] == {"key": "sweep", "value": "base"}
    assert body["datasources"][0]["mountPath"] == "/pfs/base" and body["name"] == "train-lr-1e-4-seed-2"
    assert {k: v for k, v in env(body).items() if k.startswith("JOB_CHAIN_")} == {
        "JOB_CHAIN_RUN_ID": "r1", "JOB_CHAIN_STEP": "train-lr-1e-4-seed-2", "JOB_CHAIN_PARAM_LR": "3e-4",
        "JOB_CHAIN_PARAM_TAG": "base", "JOB_CHAIN_MATRIX_LR": "1e-4", "JOB_CHAIN_MATRIX_SEED": "2"}
    with pytest.raises(MissingOutput, match="did not write ckpt .*it wrote: other"):
        build_request(run, "report", "r1", 1, outputs={"convert": {"other": "x"}})


def test_a_script_file_runs_byte_for_byte(tmp_path: Path) -> None:
    (tmp_path / "t.sh").write_text("echo ${params.x} literal\n")
    chain = load([job("t", "t.sh")], path=str(tmp_path / "chain_info.json"), params={"x": "1"})
    assert "echo ${params.x} literal\n" in build_request(chain, "t", "r", 1)["jobSpec"]["command"]


def test_outputs_files_are_bounded(tmp_path: Path) -> None:
    assert parse("a=1\n\nb=x=y\na=2\n") == ({"a": "2", "b": "x=y"}, None)
    assert "line 1" in str(parse("not a pair\n")[1]) and "line 2" in str(parse("a=1\n9x=2\n")[1])
    assert f"at most {MAX_KEYS}" in str(parse("".join(f"k{i}=v\n" for i in range(MAX_KEYS + 1)))[1])
    assert f"at most {MAX_BYTES}" in str(parse("k=" + "v" * MAX_BYTES)[1])
    assert read_file(str(tmp_path / "none")) == ({}, None)
    (tmp_path / "bin").write_bytes(b"a=\xff\n")
    assert "not UTF-8" in str(read_file(str(tmp_path / "bin"))[1])
    log = 'x\njob-chain: outputs of prep: {"ckpt":"/a"}\njob-chain: step prep submitted\n'
    assert from_log(log, "prep") == {"ckpt": "/a"} and from_log(log, "other") is None


def test_the_frozen_copy_and_the_inline_snapshot_keep_points_params_and_outputs() -> None:
    chain = load(PIPELINE, params={"lr": "1e-4", "tag": "base"}, maxRunning=3)
    run = replace(chain, params={"lr": "3e-4", "tag": "base"}, params_set={"lr": "3e-4"})
    back = thaw(freeze(run), run.path)
    assert [(s.name, s.display, s.point, s.max_parallel, s.depends_on) for s in back.steps] == \
        [(s.name, s.display, s.point, s.max_parallel, s.depends_on) for s in run.steps]
    assert (back.params, back.params_set, back.max_running) == (run.params, run.params_set, 3)
    run.outputs = {"convert": {"ckpt": "/a"}, "unused": {"k": "v"}}
    carried = decode_snapshot(encode_snapshot(run, run.steps[1], None))
    assert carried.outputs == {"convert": {"ckpt": "/a"}}  # only what some step uses travels


def test_resume_keeps_the_runs_params_and_applies_a_changed_matrix_by_point() -> None:
    old = replace(load(PIPELINE, params={"lr": "1e-4", "tag": "base"}), revision=1)
    jobs = [dict(j) for j in PIPELINE]
    jobs[1] = dict(jobs[1], jobChain=dict(jobs[1]["jobChain"], matrix={"lr": ["1e-4", "3e-4"], "seed": [1, 2, 3, 4]}))
    new = replace(load(jobs, params={"lr": "1e-4", "tag": "v2"}))
    done = {"convert", "train-lr-1e-4-seed-1"}
    revised, changes = revise(old, new, done=done, latest={n: 1 for n in done}, rerun=(), revision=2)
    lines = [c.line() for c in changes]
    assert "+ train[lr=1e-4,seed=4]: added" in lines and "+ train[lr=3e-4,seed=4]: added" in lines
    assert any(line.startswith("~ params: changed (tag: base -> v2)") for line in lines)
    by_name = {s.name: s for s in revised.steps}
    assert by_name["train-lr-1e-4-seed-2"].changed_in == 2  # its request changes: a new token
    assert by_name["train-lr-1e-4-seed-1"].changed_in == 1 and revised.params["tag"] == "v2"


def write(tmp_path: Path, jobs: List[Dict[str, Any]], **top: Any) -> str:
    import json

    path = tmp_path / "chain_info.json"
    for body in jobs:  # every step mounts the chain's folder, as on AIHC its pods must see the record
        body.setdefault("datasources", [{"type": "pfs", "name": "pfs", "mountPath": str(tmp_path)}])
    path.write_text(json.dumps({"resourcePoolId": "pool", "jobs": jobs, **top}))
    return str(path)


def test_validate_and_dry_run_show_the_expansion_and_the_first_wave(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from job_chain.cli import cli

    path = write(tmp_path, [job("sweep", "echo ${matrix.lr} ${params.tag}", matrix={"lr": ["1e-4", "3e-4", "1e-3"]},
                                maxParallel=2), job("report", dependsOn=["sweep"])], params={"tag": "base"})
    checked = CliRunner().invoke(cli, ["validate", path])
    assert checked.exit_code == 0 and "OK, 2 jobs, 4 steps once its matrices are expanded" in checked.output
    dry = CliRunner().invoke(cli, ["run", path, "--dry-run", "--param", "tag=v2"])
    assert dry.exit_code == 0, dry.output + dry.stderr
    assert dry.stdout.count("POST ") == 2 and '"echo' not in dry.stdout  # the first wave: two requests
    assert "JOB_CHAIN_PARAM_TAG" in dry.stdout and "v2" in dry.stdout
    assert "# params: tag=v2" in dry.stderr and "# matrix sweep: 3 points, maxParallel 2" in dry.stderr
    assert "#   2 sweep[lr=1e-3] (job name sweep-lr-1e-3)" in dry.stderr
    assert "# first wave (the caps allow): sweep[lr=1e-4], sweep[lr=3e-4]; 1 more wait for a slot" in dry.stderr
    wrong = CliRunner().invoke(cli, ["run", path, "--dry-run", "--param", "tga=x"])
    assert wrong.exit_code == 2 and "no parameter 'tga' (did you mean 'tag'?)" in wrong.stderr


def test_modes_that_cannot_carry_a_feature_refuse_it_before_anything_is_recorded(tmp_path: Path) -> None:
    from job_chain import ChainSession

    capped = write(tmp_path, [job("sweep", matrix={"i": [1, 2, 3]}, maxParallel=1)])
    with pytest.raises(UsageError, match="an --inline run has none"):
        ChainSession.from_file(capped).start(mode="inline")
    used = write(tmp_path, [job("a"), job("b", "echo ${steps.a.outputs.k}")])
    with pytest.raises(UsageError, match="run it without --advance watch"):
        ChainSession.from_file(used).start(mode="watch")
    assert not (tmp_path / "chain_info.json.runs").exists() or not list((tmp_path / "chain_info.json.runs").iterdir())


def test_status_shows_a_matrix_as_one_line_with_counts_then_what_needs_attention() -> None:
    from job_chain.cli.run_view import status_table
    from job_chain.status.summarize import summarize
    from job_chain.status.types import Attempt, RunFacts

    chain = load([job("prep"), job("train", dependsOn=["prep"], matrix={"seed": [1, 2, 3, 4, 5, 6]}),
                  job("report", dependsOn=["train"])])
    statuses = ["Succeeded", "Succeeded", "Succeeded", "Succeeded", "Running", "Failed"]
    attempts = [Attempt("prep", 1, "j0", "Succeeded")] + [
        Attempt(s.name, 1, f"j{s.index}", st) for s, st in zip(chain.steps[1:7], statuses)]
    status = summarize(chain, attempts, RunFacts(), run_id="r")
    short = status_table(status, points=False).plain().splitlines()
    assert any("1-6" in line and "train ×6" in line and "4 ✓ 1 running 1 failed" in line and " prep " in line
               for line in short)
    assert [line.split()[:2] for line in short if "  train[" in line] == [["5", "train[seed=5]"],
                                                                           ["6", "train[seed=6]"]]
    assert any(line.startswith("7 ") and " train " in line and "needs train[seed=6]" in line for line in short)
    assert sum("  train[seed=" in line for line in status_table(status).plain().splitlines()) == 6


def test_unusable_outputs_fail_the_step_and_good_ones_are_recorded_before_its_success(tmp_path: Path) -> None:
    from job_chain.hop.advance import advance
    from job_chain.record.outputs import EXIT_BAD_OUTPUTS, recorded
    from job_chain.record.records import RunRecords

    chain = load([job("convert")], path=str(tmp_path / "chain_info.json"))
    records = RunRecords(chain.path)
    records.create_run("r1")
    common: Dict[str, Any] = dict(run_id="r1", step="convert", exit_code=0, records=records, resume_hint="resume")
    bad = advance(chain, None, attempt=1, outputs=({}, "$JOB_CHAIN_OUTPUTS line 1: 'x' is not KEY=VALUE"),
                  **common)  # type: ignore[arg-type]
    assert bad == EXIT_BAD_OUTPUTS and records.script_exit("r1", "convert", 1) == EXIT_BAD_OUTPUTS
    assert not records.succeeded("r1", "convert", 1) and recorded(records, "r1") == {}
    assert advance(chain, None, attempt=2, outputs=({"ckpt": "/a"}, None), **common) == 0  # type: ignore[arg-type]
    assert records.succeeded("r1", "convert", 2) and recorded(records, "r1") == {"convert": {"ckpt": "/a"}}


def test_the_sweep_example_loads() -> None:
    from job_chain.spec.loader import load_chain

    chain = load_chain(str(Path(__file__).resolve().parent.parent / "examples" / "sweep" / "chain_info.json"),
                       local=True)
    assert [s.display for s in chain.steps][:2] == ["convert", "train[lr=1e-4,seed=1]"] and not chain.warnings
    assert chain.params == {"tag": "base"} and chain.steps[1].max_parallel == 2 and len(chain.steps) == 8


HOSTILE = ["$(touch pwned-subst)", "`touch pwned-tick`", "x'; touch pwned-quote; echo '", 'a "b" $HOME \\ c',
           "two words\nand a line"]


def test_a_substituted_value_arrives_in_the_command_as_that_string_never_as_shell(tmp_path: Path) -> None:
    import subprocess

    from job_chain.spec.params import Ref, substitute

    values = {"params": HOSTILE[0], "matrix": HOSTILE[1], "steps": HOSTILE[2], "run": HOSTILE[3]}
    body = {"name": "n", "jobSpec": {
        "command": "printf '%s|\\n' ${params.p} ${matrix.m} pre-${steps.a.outputs.k} ${run.id} ${params.q}",
        "envs": [{"name": "E", "value": "${params.p}"}]}}

    def value_of(ref: Ref) -> str:
        return HOSTILE[4] if ref.name == "q" else values[ref.kind]

    done = substitute(body, value_of, script_file=False)
    assert done["jobSpec"]["envs"][0]["value"] == HOSTILE[0]  # not a shell: as it is
    ran = subprocess.run(["bash", "-c", done["jobSpec"]["command"]], cwd=tmp_path, capture_output=True, text=True)
    assert ran.stdout == f"{HOSTILE[0]}|\n{HOSTILE[1]}|\npre-{HOSTILE[2]}|\n{HOSTILE[3]}|\n{HOSTILE[4]}|\n"
    assert list(tmp_path.iterdir()) == []  # nothing ran
    # the whole way: a --param and an output into a step's request
    chain = load(PIPELINE, params={"lr": "1e-4", "tag": "base"})
    run = replace(chain, params=resolve_params(chain.params, {"lr": HOSTILE[0]}, "c"))
    command = build_request(run, "train-lr-1e-4-seed-2", "r1", 1,
                            outputs={"convert": {"ckpt": HOSTILE[2]}})["jobSpec"]["command"]
    assert "train --lr '$(touch pwned-subst)' --seed 2 --from 'x'\"'\"'; touch pwned-quote" in command


def test_validate_warns_where_a_reference_sits_inside_shell_quotes() -> None:
    chain = load([job("a", "echo \"${params.x}\" '${params.y}' ${params.z} \\\"${params.w}\\\"")],
                 params={"x": "1", "y": "2", "z": "3", "w": "4"})
    quoted = [w for w in chain.warnings if "inside shell quotes" in w]
    assert [w.split(": ")[1].split(" ")[0] for w in quoted] == ["${params.x}", "${params.y}"]
    assert all(w.startswith("jobs[0].jobSpec.command: ") for w in quoted)
