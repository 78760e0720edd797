"""Issue 18 item 7: a job's log cannot drive the terminal that prints it.

On a terminal, ``job-chain logs`` (and ``--follow``, and ``jobs logs``) shows control sequences
as escapes (``\\x1b]0;...\\x07``) instead of passing them on; colours stay, as with ``less -R``.
Into a pipe the log is written as it is.
"""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path
from typing import List

import pytest
from chain_helpers import JOB_CHAIN, cli_here, make_chain
from conftest import LocalServer

from job_chain.util.safe_text import for_stream, visible

HOSTILE = r"printf 'start\n\033]0;pwned\007title\n\033[2J\033[Hcleared\n\033[31mred\033[0m\n\302\233Cc1\ttab\rback\n'"


@pytest.mark.parametrize("raw, shown", [
    ("\x1b]0;pwned\x07title", "\\x1b]0;pwned\\x07title"),   # OSC: window title
    ("\x1b[2J\x1b[Hcleared", "\\x1b[2J\\x1b[Hcleared"),      # CSI: clear screen, cursor home
    ("\x9b31m 8-bit CSI", "\\x9b31m 8-bit CSI"),             # a C1 control
    ("\x1b[1;31mred\x1b[0m", "\x1b[1;31mred\x1b[0m"),        # colours (SGR) stay
    ("a\tb\r\nc\x7f\x00", "a\tb\r\nc\\x7f\\x00"),
    ("caf\udce9", "caf\\udce9"),
])
def test_control_sequences_are_made_visible(raw: str, shown: str) -> None:
    assert visible(raw) == shown


def test_only_a_terminal_gets_the_escaped_text(tmp_path: Path) -> None:
    with open(tmp_path / "file", "w") as plain:
        assert for_stream("\x1b]0;t\x07", plain) == "\x1b]0;t\x07"


def on_a_terminal(args: List[str], env: dict) -> str:
    """Run ``args`` with stdout on a pseudo-terminal; everything it printed there."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdout=slave, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:  # never leave it running
            proc.kill()
            proc.wait()
            raise
    assert proc.returncode == 0
    return out.decode("utf-8", "replace")


def test_job_chain_logs_shows_control_sequences_on_a_terminal(tmp_path: Path, shared_server: LocalServer) -> None:
    chain = make_chain(tmp_path, [{"name": "hostile", "script": HOSTILE + "\n"}], shared_server.pool)
    cli_here("run", str(chain), "--follow", server=shared_server, check=True)
    env = dict(os.environ, JOB_CHAIN_CREDENTIALS=shared_server.credentials_file)
    for extra in ([], ["--follow"]):
        shown = on_a_terminal([*JOB_CHAIN, "logs", str(chain), *extra], env)
        assert "\x1b]0;" not in shown and "\x1b[2J" not in shown and "\x9b" not in shown
        assert "\\x1b]0;pwned\\x07title" in shown and "\\x1b[2J\\x1b[Hcleared" in shown and "\\x9bCc1" in shown
        assert "\x1b[31mred\x1b[0m" in shown and "\ttab\rback" in shown
    piped = cli_here("logs", str(chain), server=shared_server, check=True).stdout
    assert "\x1b]0;pwned\x07title" in piped  # a pipe or file gets the log as written
