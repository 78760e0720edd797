"""What `make demo` leaves behind: one web console however often it runs (issue 18 item 20)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "demo-console.sh"


def test_make_demo_starts_its_console_once_and_then_reuses_it(tmp_path: Path) -> None:
    job_chain = os.path.join(os.path.dirname(sys.executable), "job-chain")
    (tmp_path / "chains").mkdir()

    def demo() -> str:
        done = subprocess.run(["sh", str(SCRIPT), job_chain, str(tmp_path), str(tmp_path / "chains")],
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        return done.stdout

    (tmp_path / "ui.log").write_text("an older demo's log\n")
    (tmp_path / "ui.log").chmod(0o644)
    first = demo()
    pid = int((tmp_path / "ui.pid").read_text())
    try:
        assert first.startswith("web console: http://127.0.0.1:") and f"kill {pid}" in first
        assert "token=" in (tmp_path / "ui.log").read_text()  # the URL with its token: private
        assert [oct((tmp_path / name).stat().st_mode & 0o777) for name in ("ui.log", "ui.pid")] == ["0o600"] * 2
        again = demo()
        assert again.startswith("web console (already running): http://127.0.0.1:")
        assert int((tmp_path / "ui.pid").read_text()) == pid  # no second console
        assert first.split()[2] == again.split()[4]  # the same URL
        consoles = [p for p in psutil.process_iter(["cmdline"])
                    if str(tmp_path / "chains") in (p.info["cmdline"] or []) and p.pid != os.getpid()]
        assert [p.pid for p in consoles] == [pid]
    finally:
        os.kill(pid, signal.SIGTERM)
        psutil.Process(pid).wait(15)
    try:
        restarted = demo()
    finally:  # the console it started ends with the test, whatever failed
        try:
            second = psutil.Process(int((tmp_path / "ui.pid").read_text()))
            second.terminate()
            second.wait(15)
        except (OSError, ValueError, psutil.NoSuchProcess):
            pass
    assert restarted.startswith("web console: ")  # a console that ended is started again
