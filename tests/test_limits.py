"""Issue 18 item 6: bounded request bodies on the local server; commands the kernel cannot take."""

from __future__ import annotations

import errno
import json
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
import requests
from click.testing import CliRunner
from conftest import LocalServer

from job_chain.aihc.spec import MAX_ARG_BYTES
from job_chain.cli import cli
from job_chain.local.wire import MAX_BODY

API = "/api/v1/aijobs?resourcePoolId=pool-local"


def test_a_request_body_over_the_cap_is_refused_before_it_is_read(shared_server: LocalServer) -> None:
    big = b'{"name": "' + b"x" * MAX_BODY + b'"}'
    answer = requests.post(shared_server.url + API, data=big, timeout=60)
    assert answer.status_code == 413
    assert answer.json()["code"] == "RequestEntityTooLarge"
    assert f"over the local server's limit of {MAX_BODY} bytes" in answer.json()["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(MAX_BODY // (1 << 20) + 2):
            yield b"x" * (1 << 20)

    chunked = requests.post(shared_server.url + API, data=chunks(), timeout=60)
    assert chunked.status_code == 413 and chunked.json()["code"] == "RequestEntityTooLarge"
    # under the cap the request goes on to the signature check as before
    assert requests.post(shared_server.url + API, data=b"{}", timeout=30).status_code == 403
    assert requests.get(shared_server.url + "/healthz", timeout=30).status_code == 200


def test_the_argument_limit_is_the_kernels() -> None:
    """MAX_ARG_BYTES is what Linux takes in one argument: one byte more cannot be exec'd."""
    subprocess.run(["bash", "-c", ":", "x" * MAX_ARG_BYTES], check=True)
    with pytest.raises(OSError) as refused:
        subprocess.run(["bash", "-c", ":", "x" * (MAX_ARG_BYTES + 1)], check=True)
    assert refused.value.errno == errno.E2BIG


def test_a_command_over_the_kernels_argument_limit_is_refused_by_validate(tmp_path: Path) -> None:
    (tmp_path / "huge.sh").write_text("# padding\n" * (MAX_ARG_BYTES // 10))
    chain = tmp_path / "chain_info.json"
    chain.write_text(json.dumps({"resourcePoolId": "p", "jobs": [
        {"name": "huge", "jobSpec": {"command": "huge.sh", "image": "i"}},
        {"name": "env", "jobSpec": {"command": "true", "image": "i",
                                    "envs": [{"name": "BLOB", "value": "y" * MAX_ARG_BYTES}]}}]}))
    result = CliRunner().invoke(cli, ["validate", str(chain)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "jobs[0].jobSpec.command: is " in result.output
    assert f"Linux takes at most {MAX_ARG_BYTES} bytes per argument" in result.output
    assert "jobs[1].jobSpec.envs[0].value: NAME=value is" in result.output
    (tmp_path / "huge.sh").write_text("# padding\n" * ((MAX_ARG_BYTES - 8192) // 10))  # room for the tail
    chain.write_text(json.dumps({"resourcePoolId": "p", "jobs": [
        {"name": "huge", "jobSpec": {"command": "huge.sh", "image": "i"}}]}))
    assert CliRunner().invoke(cli, ["validate", str(chain)]).exit_code == 0
