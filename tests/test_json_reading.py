"""JSON files read two ways, each in one place: strictly where a person wrote the file (chain files,
credentials: file:line:column, what is wrong, how to fix it; job_chain/util/jsonfile.py) and
tolerantly where job-chain wrote it and may find it gone or half-there (util/files.read_json_dict)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from job_chain.aihc.credentials import file_api_config, load_credentials_file
from job_chain.errors import UsageError
from job_chain.local import daemon, server
from job_chain.local.process import ServerProcess
from job_chain.util.jsonfile import decode_utf8, read_text


def refused(path: Path) -> str:
    with pytest.raises(UsageError) as caught:
        load_credentials_file(str(path))
    return str(caught.value)


def test_a_credentials_file_is_read_as_strictly_as_a_chain_file(tmp_path: Path) -> None:
    path = tmp_path / "creds.json"
    path.write_text('{"host": "h", "ak": "a", "sk": "s"}')
    assert load_credentials_file(str(path)) == {"host": "h", "ak": "a", "sk": "s"}

    path.write_text('{"host": "h",\n "ak": "a", "sk": "SECRET",}\n')
    message = refused(path)
    assert message.startswith(f"{path}:2:27: invalid JSON: a comma after the last entry") and "remove it" in message
    assert "SECRET" not in message
    path.write_text('["h", "a", "s"]')
    assert refused(path) == f"{path}:1:1: a credentials file must be a JSON object with host, ak and sk, found array"
    path.write_bytes(b'{"host": "h",\n "ak": "\xe9"}')
    assert refused(path) == (f"{path}:2:9: not UTF-8 text: invalid byte 0xe9 at byte offset 22 "
                             "(save the file as UTF-8)")
    path.write_text('{"ak": "a", "ak": "b"}')
    assert "duplicate key 'ak'" in refused(path)
    assert refused(tmp_path / "gone.json") == f"{tmp_path / 'gone.json'}: no such credentials file"
    assert refused(tmp_path) == f"{tmp_path}: is a directory, expected a JSON credentials file"
    if os.geteuid() != 0:
        path.chmod(0)
        assert refused(path) == f"{path}: cannot read this credentials file: Permission denied"


def test_a_files_invalid_byte_is_located_once_for_chain_files_credentials_and_scripts(tmp_path: Path) -> None:
    raw = "é\n  ok\nab".encode() + b"\xff"
    assert decode_utf8(raw) == (None, "3:3: not UTF-8 text: invalid byte 0xff at byte offset 10 "
                                      "(save the file as UTF-8)")
    assert decode_utf8("fine ✓".encode()) == ("fine ✓", None)
    (tmp_path / "chain.json").write_bytes(raw)
    with pytest.raises(UsageError, match=r"chain.json:3:3: not UTF-8 text: invalid byte 0xff at byte offset 10"):
        read_text(str(tmp_path / "chain.json"), "chain file")


def test_files_job_chain_wrote_are_read_tolerantly_where_they_may_be_gone_or_damaged(tmp_path: Path) -> None:
    chain = tmp_path / "chain_info.json"
    state = tmp_path / "state"
    state.mkdir()
    for broken in (None, "{not json", "[1, 2]"):  # gone, half-written, not an object
        for path in (chain, state / "server.json", state / "credentials.json"):
            if broken is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(broken)
        assert file_api_config(str(chain)) == {}  # a run goes on without its file
        assert daemon.read_info(str(state)) is None  # no server recorded
        assert server.recorded_port(str(state)) is None  # no host recorded
        with pytest.raises(Exception, match="credentials.json is missing or not a JSON object"):
            ServerProcess(state).creds()  # a test's own server: an error that names the file
    chain.write_text(json.dumps({"api_config": {"host": "http://h:1", "ak": 1}}))
    assert file_api_config(str(chain)) == {"host": "http://h:1"}
    (state / "credentials.json").write_text(json.dumps({"host": "http://127.0.0.1:8123", "ak": "a", "sk": "s"}))
    assert server.recorded_port(str(state)) == 8123 and ServerProcess(state).creds()["ak"] == "a"
