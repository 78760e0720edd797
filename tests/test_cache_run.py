"""Steps cached across runs on the real local server, through the real CLI: a second run creates no
job for an unchanged cached step, its dependent starts with the cached output, and ``cache list``,
``cache explain``, ``cache forget`` and ``run --no-cache`` say and do what they should."""

from __future__ import annotations

import json
from pathlib import Path

from chain_helpers import cli_here, write_chain
from conftest import LocalServer
from test_dag_run import jobs_by_step


def test_a_second_run_reuses_convert_and_train_gets_its_output(tmp_path: Path, shared_server: LocalServer) -> None:
    shared = tmp_path / "shared"
    chain = write_chain(tmp_path, shared_server.pool, [
        {"name": "convert", "script": 'mkdir -p "$SHARED/ckpt"; echo x >> "$SHARED/converted"\n'
                                      'echo "ckpt=$SHARED/ckpt" >> "$JOB_CHAIN_OUTPUTS"',
         "jobChain": {"cache": {"paths": [str(shared / "ckpt")]}}},
        {"name": "train", "script": 'echo "$CKPT" >> "$SHARED/trained"'},
    ])
    data = json.loads(chain.read_text())
    data["jobs"][1]["jobSpec"]["envs"].append({"name": "CKPT", "value": "${steps.convert.outputs.ckpt}"})
    chain.write_text(json.dumps(data))

    def run(*extra: str) -> str:
        cli_here("run", str(chain), "--follow", *extra, server=shared_server, check=True)
        return str(json.loads(cli_here("status", str(chain), "--json", server=shared_server, check=True).stdout)["run"])

    first = run()
    second_run = cli_here("run", str(chain), "--follow", server=shared_server, check=True)
    assert "step convert reused a cached success" in second_run.stdout
    assert f"step convert reuses the success of run {first}" in second_run.stderr  # named before it is taken
    status = json.loads(cli_here("status", str(chain), "--json", server=shared_server, check=True).stdout)
    second = status["run"]
    assert jobs_by_step(shared_server, second) == {"train/1": 1}  # no job for convert
    assert status["outcome"] == "succeeded"
    assert status["steps"][0]["status"] == "Cached"
    assert status["steps"][0]["attempts"][0]["cached"]["run"] == first
    assert (shared / "converted").read_text() == "x\n"
    assert (shared / "trained").read_text() == f"{shared}/ckpt\n" * 2
    shown = cli_here("status", str(chain), server=shared_server, check=True).stdout
    assert "Cached" in shown and first in shown
    runs = cli_here("runs", str(chain), "--json", server=shared_server, check=True).stdout
    assert [r.get("cached") for r in json.loads(runs)][:2] == [["convert"], None]  # newest first
    assert "(1 cached)" in cli_here("runs", str(chain), server=shared_server, check=True).stdout

    listed = cli_here("cache", "list", str(chain), server=shared_server, check=True).stdout
    assert "convert" in listed and first in listed
    assert "the next run reuses it" in cli_here("cache", "explain", str(chain), "--step", "convert",
                                           server=shared_server, check=True).stdout
    (tmp_path / "convert.sh").write_text((tmp_path / "convert.sh").read_text() + "\necho v2\n")
    explained = cli_here("cache", "explain", str(chain), "--step", "convert", server=shared_server, check=True).stdout
    assert "in: script (marked *)" in explained and "the next run runs it" in explained
    third = run("--no-cache")
    assert jobs_by_step(shared_server, third) == {"convert/1": 1, "train/1": 1}
    assert "forgot 2 cached successes of step convert" in cli_here(
        "cache", "forget", str(chain), "--step", "convert", server=shared_server, check=True).stdout
    assert "no cached success" in cli_here("cache", "list", str(chain), server=shared_server, check=True).stdout
    unknown = cli_here("cache", "explain", str(chain), "--step", "convret", server=shared_server)
    assert unknown.returncode != 0 and "did you mean" in unknown.stderr and "Traceback" not in unknown.stderr


def test_cached_points_of_a_matrix_and_their_join_on_the_local_server(tmp_path: Path,
                                                                       shared_server: LocalServer) -> None:
    from job_chain import ChainSession, Outcome

    chain = write_chain(tmp_path, shared_server.pool, [
        {"name": "tok", "script": 'echo "$JOB_CHAIN_MATRIX_SEQ" >> "$SHARED/tokenized"',
         "jobChain": {"cache": True, "matrix": {"seq": [2048, 4096]}}},
        {"name": "other", "script": "true", "jobChain": {"cache": True}},
        {"name": "join", "script": 'echo joined >> "$SHARED/joined"', "jobChain": {"dependsOn": ["tok", "other"]}},
    ])
    s = ChainSession.from_file(str(chain), client=shared_server.client(max_retries=3))
    first = s.start()
    assert s.wait(first.run_id, timeout=120, interval=0.3).outcome is Outcome.SUCCEEDED
    second = s.start()
    final = s.wait(second.run_id, timeout=120, interval=0.3)
    assert final.outcome is Outcome.SUCCEEDED
    assert [x.status for x in final.steps] == ["Cached", "Cached", "Cached", "Succeeded"]
    assert jobs_by_step(shared_server, second.run_id) == {"join/1": 1}  # exactly once, no job for a cached step
    assert sorted((tmp_path / "shared" / "tokenized").read_text().split()) == ["2048", "4096"]
    assert (tmp_path / "shared" / "joined").read_text() == "joined\n" * 2
