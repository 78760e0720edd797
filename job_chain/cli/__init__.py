"""The ``job-chain`` command: a thin click layer over the library.

Sub-commands are imported only when used, so ``job-chain --help`` stays fast.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

import click

from job_chain import __version__

# name -> (module:attribute, one-line help shown by --help without importing the module)
COMMANDS: Dict[str, Tuple[str, str]] = {
    "run": ("job_chain.cli.chain:run", "Submit a chain's step N; later steps start by themselves."),
    "validate": ("job_chain.cli.chain:validate", "Check a chain file and list every problem."),
    "status": ("job_chain.cli.chain:status", "Show every step of a run: status, exit code, reason."),
    "runs": ("job_chain.cli.chain:runs", "List every run of a chain, newest first."),
    "logs": ("job_chain.cli.logs:logs", "Show the logs of a chain's step (any attempt, any pod)."),
    "diagnose": ("job_chain.cli.diagnose:diagnose", "Say why a step failed from log files you have."),
    "stop": ("job_chain.cli.chain:stop", "Stop a chain: its running step, and no later step starts."),
    "resume": ("job_chain.cli.chain:resume", "Start a run again at its first unsucceeded step."),
    "advance": ("job_chain.cli.cluster:advance", "(in a job) Submit the next step after this one."),
    "bundle": ("job_chain.cli.cluster:bundle", "Write a job-chain runtime for training images."),
    "watchdog": ("job_chain.cli.cluster:watchdog", "(in a job) Run a step under its timeout/hangTimeout."),
    "cache": ("job_chain.cli.cache:cache", "Steps cached across runs: list, explain, forget."),
    "jobs": ("job_chain.cli.jobs:jobs", "The AIHC training-job API as commands."),
    "pools": ("job_chain.cli.pools:pools", "List the resource pools."),
    "queues": ("job_chain.cli.pools:queues", "List the queues of a resource pool (--pool ID)."),
    "local": ("job_chain.cli.local:local", "An AIHC-compatible server on this machine."),
    "notify": ("job_chain.cli.notify:notify", "Send a sample notification to every target: notify test FILE."),
    "ui": ("job_chain.cli.ui:ui", "A web console for the chains under PATH: runs, steps, logs, charts."),
}


# what a step's job runs, not the user: callable as ever, but not listed by --help
IN_JOB = {"advance", "watchdog"}


class UserError(click.ClickException):
    """A JobChainError shown the click way: one line on stderr, the error's own exit code."""

    def __init__(self, error: Exception, exit_code: int, prog: str) -> None:
        super().__init__(str(error))
        # click (8.2+) types exit_code as one code per exception class (a ClassVar) but reads it from
        # the instance; this error carries the code of the JobChainError it shows (unused-ignore: a
        # click before 8.2 has a plain attribute there)
        self.exit_code = exit_code  # type: ignore[misc,unused-ignore]
        self.prog = prog  # taken while the context lives: show() runs after it has closed

    def show(self, file: Any = None) -> None:
        click.echo(f"{self.prog}: error: {self.message}", err=True)


class Command(click.Command):
    """A click command whose expected failures become :class:`UserError` (no traceback), and whose
    every error is shown one way (:func:`run_cli`), however it was called; top-level commands such
    as aiak-gen are one, and so is :class:`LazyGroup`."""

    def main(self, args: Any = None, prog_name: Optional[str] = None, complete_var: Optional[str] = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        return run_cli(self, prog_name or self.name or "job-chain", args)

    def invoke(self, ctx: click.Context) -> Any:
        from job_chain.errors import CredentialsMissing, JobChainError

        try:
            return super().invoke(ctx)
        except JobChainError as exc:
            shown: Exception = exc
            if isinstance(exc, CredentialsMissing) and ctx.invoked_subcommand not in IN_JOB:
                shown = CredentialsMissing(f"{exc}; no AIHC account at hand? add --local to use the local "
                                           "server on this machine instead")
            raise UserError(shown, exc.exit_code, ctx.find_root().info_name or "job-chain") from None


class LazyGroup(Command, click.Group):
    """A group whose commands are imported on first use (a :class:`Command`: its errors are one line)."""

    def list_commands(self, ctx: click.Context) -> List[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        if cmd_name not in COMMANDS:
            return None
        module_name, attr = COMMANDS[cmd_name][0].split(":")
        return getattr(importlib.import_module(module_name), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, text) in COMMANDS.items() if name not in IN_JOB])


@click.group("job-chain", cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="job-chain")
def cli() -> None:
    """Chains of AIHC training jobs that advance themselves.

    \b
    job-chain run chain_info.json --follow     run a chain, watch it
    job-chain jobs list --pool POOL            the AIHC job API as commands
    job-chain local start                      an AIHC-compatible server here
    """


def run_cli(command: click.Command, prog_name: str, args: Optional[List[str]] = None) -> Any:
    """Run a click command, turning expected failures into one line on stderr and an exit code."""
    from job_chain.errors import JobChainError

    try:
        return command.main(args=args, prog_name=prog_name, standalone_mode=False)
    except JobChainError as exc:
        click.echo(f"{prog_name}: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo(f"{prog_name}: aborted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.UsageError as exc:  # click's own "Usage: ... Error: ...", said as every other error is
        click.echo(f"{prog_name}: error: {usage_message(exc)}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo(f"{prog_name}: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:  # the machine said no (disk full, permission): not a bug in job-chain
        if os.environ.get("JOB_CHAIN_DEBUG"):
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"{prog_name}: error: {where}{exc.strerror or exc}", err=True)
        sys.exit(1)
    except Exception as exc:  # a bug: still one line unless the user asks for more
        if os.environ.get("JOB_CHAIN_DEBUG"):
            raise
        click.echo(
            f"{prog_name}: internal error: {type(exc).__name__}: {exc} "
            "(set JOB_CHAIN_DEBUG=1 for the traceback and please report it)",
            err=True,
        )
        sys.exit(70)


def usage_message(exc: click.UsageError) -> str:
    """``invalid value for '--advance': 'x' is not one of 'job', 'watch' (see 'job-chain run --help')``."""
    text = exc.format_message().rstrip(".")
    if text[1:2].islower():
        text = text[:1].lower() + text[1:]
    where = exc.ctx.command_path if exc.ctx is not None else ""
    return text + (f" (see '{where} --help')" if where else "")


def main() -> None:
    """Console-script entry point for ``job-chain``."""
    try:
        result = run_cli(cli, "job-chain")
    except SystemExit as done:
        end(done.code)
    else:
        end(result if isinstance(result, int) else 0)


def end(code: Any) -> None:
    """Exit with ``code`` (as ``sys.exit`` takes it) once the command is done, without the
    interpreter's teardown: what Python does first at exit still happens (other threads are waited
    for, ``atexit`` handlers run, output is flushed), then the process ends instead of freeing every
    object one by one — ~50 ms after a ``status`` of 5,000 steps has printed. Not under a profiler
    or a tracer (coverage), which write their data at the very end, nor where the hooks are missing."""
    import atexit
    import threading

    wait_threads = getattr(threading, "_shutdown", None)
    run_exit_hooks = getattr(atexit, "_run_exitfuncs", None)
    if sys.getprofile() is not None or sys.gettrace() is not None or wait_threads is None \
            or run_exit_hooks is None:
        sys.exit(code)
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)  # what sys.exit does with a message
        code = 1
    wait_threads()
    run_exit_hooks()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed pipe, a closed or missing stream
            pass
    os._exit(code or 0)
