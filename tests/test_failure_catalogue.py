"""The failure catalogue, in-process: every signature, the corpus of real-world log tails, ``diagnose``.

The corpus (``tests/failure_corpus/``, listed with its expected answers and public sources in
``cases.json``) is log tails worded the way PyTorch, NCCL, CUDA, Megatron, the kernel and the
shell word these failures; a case that is a directory holds one log per pod.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List

import pytest
from click.testing import CliRunner

from job_chain.cli import cli as job_chain_cli
from job_chain.failures.classify import TAIL_BYTES, Failure, classify, classify_files, read_tail
from job_chain.failures.signatures import BUILTIN_CLASSES, SIGNATURES
from job_chain.spec.model import FailureRule

CORPUS = Path(__file__).resolve().parent / "failure_corpus"
CASES: List[Dict[str, Any]] = json.loads((CORPUS / "cases.json").read_text())


def files_of(case: Dict[str, Any]) -> List[str]:
    path = CORPUS / case["case"]
    return sorted(str(p) for p in path.iterdir()) if path.is_dir() else [str(path)]


def test_the_catalogue_names_at_least_20_signatures_each_with_a_known_class_and_advice() -> None:
    names = [s.name for s in SIGNATURES]
    assert len(names) >= 20 and len(set(names)) == len(names)
    assert {s.cls for s in SIGNATURES} == set(BUILTIN_CLASSES) - {"unknown", "platform"}  # (events say platform)
    for item in SIGNATURES:
        assert re.fullmatch(r"[a-z0-9-]+", item.name) and item.explanation.endswith(".") and item.example


@pytest.mark.parametrize("item", SIGNATURES, ids=lambda s: s.name)
def test_every_signature_example_classifies_as_that_signature(item: Any) -> None:
    found = classify([("pod-0", f"some earlier output\n{item.example}\nmore output\n")])
    assert (found.cls, found.signature, found.line) == (item.cls, item.name, item.example)


def test_the_corpus_is_classified_right_and_the_share_is_printed(capsys: pytest.CaptureFixture) -> None:
    assert len(CASES) >= 40
    assert all(c["source"] for c in CASES)
    wrong = []
    for case in CASES:
        found = classify_files(files_of(case))
        if found.cls != case["class"]:
            wrong.append(f"{case['case']}: {found.cls} ({found.signature}), expected {case['class']}")
    share = 1 - len(wrong) / len(CASES)
    with capsys.disabled():
        print(f"\nfailure corpus: {len(CASES) - len(wrong)} of {len(CASES)} log tails classified right "
              f"({share:.1%})" + "".join(f"\n  wrong: {w}" for w in wrong))
    assert share >= 0.95, wrong


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["case"])
def test_diagnose_on_each_corpus_case(case: Dict[str, Any]) -> None:
    done = CliRunner().invoke(job_chain_cli, ["diagnose", *files_of(case), "--json"])
    assert done.exit_code == 0, done.output
    answer = json.loads(done.output)
    assert set(answer) == {"class", "signature", "line", "explanation", "file"}
    assert (answer["class"], answer["signature"]) == (case["class"], case["signature"])
    if case["signature"]:
        assert answer["line"] and re.search(SIGNATURE_PATTERNS[case["signature"]], answer["line"])
    if case.get("pod"):
        assert os.path.basename(answer["file"]) == case["pod"]
    assert answer["explanation"]
    text = CliRunner().invoke(job_chain_cli, ["diagnose", *files_of(case)])
    assert f"class:       {case['class']}" in text.output and "what to do:" in text.output


SIGNATURE_PATTERNS = {s.name: s.pattern for s in SIGNATURES}


def test_the_documented_catalogue_is_the_catalogue() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "failures.md").read_text()
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| (\w+) \|", text, re.MULTILINE)
    assert rows == [(s.name, s.cls) for s in SIGNATURES]


def test_diagnose_says_what_is_wrong_with_its_arguments(tmp_path: Path) -> None:
    missing = CliRunner().invoke(job_chain_cli, ["diagnose", str(tmp_path / "nope.log")])
    assert missing.exit_code == 2 and "nope.log: no such file" in missing.output
    folder = CliRunner().invoke(job_chain_cli, ["diagnose", str(tmp_path)])
    assert folder.exit_code == 2 and "is a directory" in folder.output
    assert CliRunner().invoke(job_chain_cli, ["diagnose"]).exit_code == 2


def test_a_root_cause_on_one_pod_beats_what_the_others_print_after_it() -> None:
    master = "[rank0]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for " \
             "600013 milliseconds before timing out.\n"
    worker = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.\n"
    found = classify([("train-master-0", master), ("train-worker-0", worker)])
    assert (found.cls, found.signature, found.pod) == ("oom", "cuda-oom", "train-worker-0")
    assert found.summary() == "oom (cuda-oom on pod train-worker-0)"


def test_between_equals_the_earliest_time_stamp_wins_else_the_pod_that_failed_first() -> None:
    late = "[rank0]:[E321 02:07:08.408 ProcessGroupNCCL.cpp:607] Watchdog caught collective operation timeout\n"
    early = "[rank9]:[E321 02:07:05.432 ProcessGroupNCCL.cpp:607] Watchdog caught collective operation timeout\n"
    assert classify([("a", late), ("b", early)]).pod == "b"
    assert classify([("a", "ncclRemoteError: x\n"), ("b", "ncclRemoteError: y\n")]).pod == "a"


def test_the_users_rules_come_first_and_job_chains_own_lines_never_match() -> None:
    text = "loss is nan at iteration 300\nAssertionError: found NaN in local grad norm\n"
    rule = FailureRule("failureRules[0]", "nan", r"loss is nan at iteration \d+")
    found = classify([("p", text)], [rule])
    assert (found.cls, found.signature, found.line) == ("nan", "failureRules[0]", "loss is nan at iteration 300")
    assert classify([("p", text)]).signature == "nan-grad-norm"
    own = "job-chain: step train failed with exit code 1: A Python module is missing. No such file or directory\n"
    assert classify([("p", own)]).cls == "unknown"


def test_timeouts_and_hangs_are_said_in_words() -> None:
    hang = classify([("p", "job-chain watchdog: no output for 30m (hangTimeout); stopping the step (exit code 124)\n")])
    assert (hang.cls, hang.words, hang.summary()) == ("hang", "no output for 30m (hangTimeout)",
                                                       "no output for 30m (hangTimeout) on pod p")
    timeout = classify([("", "job-chain watchdog: killed after 6h (timeout); stopping the step (exit code 124)\n")])
    assert (timeout.cls, timeout.summary()) == ("timeout", "killed after 6h (timeout)")


def test_nothing_matched_is_unknown_with_a_hint_from_the_exit_code() -> None:
    found = classify([("p", "iteration 10 | lm loss: 2.1\n")], exit_code=137)
    assert found.cls == "unknown" and found.signature == "" and "SIGKILL" in found.explanation
    assert found.as_json() == {"class": "unknown", "signature": None, "line": None, "pod": None}
    assert Failure.from_record(found.to_record()) == found


def test_read_tail_reads_the_end_from_a_whole_line(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_text("x" * 100 + "\n" + ("filler line\n" * (TAIL_BYTES // 12 + 10)) + "the last line\n")
    text = read_tail(str(log))
    assert len(text.encode()) <= TAIL_BYTES and text.startswith("filler line\n") and text.endswith("the last line\n")
    assert read_tail(str(log), 20) == "the last line\n"


def test_diagnose_tries_a_chains_failure_rules_first(tmp_path: Path) -> None:
    log = tmp_path / "master.log"
    log.write_text("step 900 loss 2.1\nRuntimeError: loss spike above 50, stopping\n")
    rule = {"match": "loss spike above \\d+", "class": "spike", "explanation": "Lower the learning rate."}
    chain = tmp_path / "chain.json"
    chain.write_text(json.dumps({"resourcePoolId": "pool-x", "jobs": [
        {"name": "train", "jobSpec": {"command": "true", "image": "python:3.11", "replicas": 1},
         "jobChain": {"failureRules": [rule]}},
        {"name": "eval", "jobSpec": {"command": "true", "image": "python:3.11", "replicas": 1}}]}))
    plain = CliRunner().invoke(job_chain_cli, ["diagnose", str(log), "--json"])
    assert plain.exit_code == 0 and json.loads(plain.output)["class"] == "user"  # a RuntimeError, no rule
    ruled = CliRunner().invoke(job_chain_cli, ["diagnose", str(log), "--chain", str(chain), "--step", "train",
                                               "--json"])
    assert ruled.exit_code == 0, ruled.output
    assert json.loads(ruled.output)["class"] == "spike"
    assert json.loads(ruled.output)["explanation"] == "Lower the learning rate."
    other = CliRunner().invoke(job_chain_cli, ["diagnose", str(log), "--chain", str(chain), "--step", "eval", "--json"])
    assert json.loads(other.output)["class"] == "user"
    ambiguous = CliRunner().invoke(job_chain_cli, ["diagnose", str(log), "--chain", str(chain)])
    assert ambiguous.exit_code == 2 and "different failureRules: pass --step NAME" in ambiguous.output
    missing = CliRunner().invoke(job_chain_cli, ["diagnose", str(log), "--chain", str(chain), "--step", "nope"])
    assert missing.exit_code == 2 and "no step named 'nope' (steps: train, eval)" in missing.output
    alone = CliRunner().invoke(job_chain_cli, ["diagnose", str(log), "--step", "train"])
    assert alone.exit_code == 2 and "pass --chain CHAIN.json too" in alone.output


def test_a_catastrophic_failure_rule_is_stopped_and_the_catalogue_still_decides() -> None:
    # ^(a+)+$ over a line of 40 a's and a stop backtracks for hours in Python's re: the step would
    # stay Running with its advance at 100% CPU. It runs in a child process killed at the limit.
    import time

    rules = [FailureRule("slow", "nan", r"^(a+)+$"), FailureRule("quick", "data", r"bad shard \d+")]
    log = "a" * 40 + "!\ntorch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    started = time.monotonic()
    failure = classify([("pod-0", log)], rules, seconds=1.0)
    assert time.monotonic() - started < 4
    assert failure.cls == "oom"
    assert "failureRules were not applied" in failure.explanation and "(a+)+" in failure.explanation
    quick = classify([("pod-0", "x\nbad shard 12\n")], rules[1:], seconds=5.0)
    assert (quick.cls, quick.signature, quick.line) == ("data", "quick", "bad shard 12")
