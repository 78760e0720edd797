"""The command a chain step runs: the user's script, byte for byte, then a small fixed tail.

The tail never holds a secret and never installs anything. Its size does not depend on the
chain's length (except with ``inline``, which embeds a snapshot of the remaining steps).
"""

from __future__ import annotations

import os
import shlex
from typing import Optional

# Exit code the tail uses when it cannot find the job-chain runtime.
NO_RUNTIME = 127


def _delimiter(script: str) -> str:
    """A heredoc delimiter that cannot occur as a line of ``script``."""
    import hashlib

    digest = hashlib.sha256(script.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    delimiter = f"JOB_CHAIN_SCRIPT_{digest}"
    lines = set(script.splitlines())
    while delimiter in lines:  # practically never; keeps the guarantee absolute
        delimiter += "_"
    return delimiter


def runtime_invocation(scrips_path: Optional[str], module: str = "job_chain") -> str:
    """Shell words that run job-chain (``module``) in the job: the bundled runtime if any, else the image's."""
    if not scrips_path:
        return f"python3 -m {module}"
    root = scrips_path[:-3].rsplit("/", 1)[0] if scrips_path.endswith(".py") else scrips_path
    return f"PYTHONPATH={shlex.quote(root)}${{PYTHONPATH:+:$PYTHONPATH}} python3 -m {module}"


def _runtime_check(scrips_path: Optional[str]) -> str:
    if not scrips_path:
        return ""
    root = scrips_path[:-3].rsplit("/", 1)[0] if scrips_path.endswith(".py") else scrips_path
    quoted = shlex.quote(root)
    return (
        f"[ -f {quoted}/job_chain/__init__.py ] || {{ echo \"job-chain: no runtime at {root}: "
        f"run 'job-chain bundle {root}' where that storage is mounted\" >&2; exit {NO_RUNTIME}; }}\n"
    )


def script_runner(script: str, runner: str = "") -> str:
    """The shell words that run a step's script: ``bash``/``sh`` as the command said (``bash X``,
    ``sh X``); else the script's ``#!`` line when it names another interpreter (``./train.py``),
    else bash."""
    if runner:
        return runner
    first = script.split("\n", 1)[0]
    if not first.startswith("#!"):
        return "bash"
    words = first[2:].strip().split(None, 1)  # as Linux reads it: the interpreter and one argument
    interpreter = os.path.basename(words[0]) if words else "bash"
    if interpreter == "bash" or (interpreter == "env" and words[1:] == ["bash"]):
        return "bash"
    return " ".join(shlex.quote(w) for w in words)


def launch(script: str, runner: str) -> str:
    """A step's command in watch mode (no tail): the script itself when bash runs it, else the
    script written to a file and run by its runner."""
    if runner == "bash":
        return script
    delimiter = _delimiter(script)
    body = script if script.endswith("\n") else script + "\n"
    return (f"jc_script=$(mktemp \"${{TMPDIR:-/tmp}}/job-chain-script.XXXXXX\") || exit 1\n"
            f"cat > \"$jc_script\" <<'{delimiter}'\n{body}{delimiter}\n"
            f"exec {runner} \"$jc_script\"\n")


def step_command(
    script: str,
    *,
    run_id: str,
    step: str,
    attempt: int,
    config_path: str,
    scrips_path: Optional[str] = None,
    snapshot: Optional[str] = None,
    timeout: Optional[float] = None,
    hang_timeout: Optional[float] = None,
    runner: str = "bash",
) -> str:
    """Wrap ``script`` so that success (RANK 0) submits the next step and failure stops the chain.

    ``snapshot`` (inline mode) is a base64 text of the remaining steps, passed on stdin to the
    advance (``python3 -m job_chain.hop``) instead of reading the chain file from shared storage.
    """
    delimiter = _delimiter(script)
    if timeout is not None or hang_timeout is not None:  # the step's timeouts, enforced in the job
        limits = "".join(f" --{flag} {value:g}" for flag, value in (("timeout", timeout),
                                                                    ("hang-timeout", hang_timeout)) if value)
        runner = f"{'env ' if scrips_path else ''}{runtime_invocation(scrips_path)} watchdog{limits} -- {runner}"
    body = script if script.endswith("\n") else script + "\n"
    # a heredoc always ends in a newline; drop it again when the script had none
    trim = "" if script.endswith("\n") else "truncate -s -1 \"$jc_script\"\n"
    advance = (
        # the lean entry point (job_chain/hop/entry.py): no CLI to import on every hop
        f"{runtime_invocation(scrips_path, 'job_chain.hop')} --run {shlex.quote(run_id)} --step {shlex.quote(step)} "
        f"--attempt {attempt} --exit-code \"$jc_rc\" --outputs \"$jc_dir/outputs\" "
    )
    if snapshot is None:
        advance += shlex.quote(config_path)
    else:
        advance += "--snapshot - <<'JOB_CHAIN_SNAPSHOT'\n" + snapshot + "\nJOB_CHAIN_SNAPSHOT"
    return (
        f"# job-chain run {run_id}, step {step}, attempt {attempt}: your script runs unchanged,\n"
        "# then job-chain submits the next step if it exited 0 (only the RANK 0 pod does).\n"
        "jc_pid=\n"
        "jc_dir=$(mktemp -d \"${TMPDIR:-/tmp}/job-chain-step.XXXXXX\") || exit 1\n"
        "trap 'rm -rf \"$jc_dir\"' EXIT\n"
        "jc_script=$jc_dir/script\n"
        # where the script appends KEY=VALUE lines for the steps after it (docs/graphs.md: outputs)
        "export JOB_CHAIN_OUTPUTS=$jc_dir/outputs\n"
        # a stop (TERM) or INT reaches the script too; then exit as if killed by it (128+N)
        "trap '{ kill -TERM \"$jc_pid\"; wait \"$jc_pid\"; } 2>/dev/null; exit 143' TERM\n"
        "trap '{ kill -TERM \"$jc_pid\"; wait \"$jc_pid\"; } 2>/dev/null; exit 130' INT\n"
        f"cat > \"$jc_script\" <<'{delimiter}'\n{body}{delimiter}\n"
        f"{trim}"
        # in the background so the traps run at once (bash defers them while a foreground child
        # runs); stdin stays the job's, and INT/QUIT are not left ignored as in plain `&`
        f"{{ trap - INT QUIT; exec {runner} \"$jc_script\"; }} <&0 &\n"
        "jc_pid=$!\n"
        "wait \"$jc_pid\"\n"
        "jc_rc=$? jc_pid=\n"
        "if [ \"$jc_rc\" -eq 0 ] && [ \"${RANK:-0}\" != 0 ]; then exit 0; fi\n"
        f"{_runtime_check(scrips_path)}"
        f"{advance}\n"
        "jc_adv=$?\n"
        "if [ \"$jc_rc\" -ne 0 ]; then exit \"$jc_rc\"; fi\n"
        "exit \"$jc_adv\"\n"
    )


def ended_command(*, run_id: str, step: str, attempt: int, config_path: str,
                  scrips_path: Optional[str] = None) -> str:
    """What runs when a step's job ended without its tail (Slurm killed it: TIMEOUT, NODE_FAIL,
    PREEMPTED, OUT_OF_MEMORY, CANCELLED): the same advance, told the job ended (``--ended``), which
    takes the script's exit from the run record, else Slurm's verdict (``docs/slurm.md``)."""
    return (f"{runtime_invocation(scrips_path, 'job_chain.hop')} --run {shlex.quote(run_id)} "
            f"--step {shlex.quote(step)} --attempt {attempt} --ended {shlex.quote(config_path)}")


def tail_size(command: str, script: str) -> int:
    """Bytes the wrapper adds around the user's script (the figure the benchmarks report)."""
    return len(command.encode("utf-8")) - len(script.encode("utf-8"))
