"""A real one-host Slurm cluster for the tests: munged, slurmctld and slurmd (two of them, as two
nodes, so a step with ``replicas: 2`` runs on two nodes) on loopback, with a private slurm.conf,
munge key, ports, state and spool directories under a temporary directory.

:class:`SlurmCluster` starts them in the foreground of their own process groups and stops them by
PID (TERM, then KILL), whatever happens: a context manager, and an ``atexit`` hook for a worker that
dies between start and stop. Clients find the cluster through ``SLURM_CONF`` (:meth:`env`), which
every job inherits (sbatch exports the submitting environment), so the in-job advance submits to the
same cluster.

Needs root (slurmd runs jobs as their user) and Debian's ``slurm-wlm`` and ``munge``
(``make test`` installs them). :func:`require` says loudly what is missing.

``clock``: slurmctld's clock runs that many times faster than the wall's (Debian's ``libfaketime``,
preloaded into slurmctld alone). Slurm keeps time limits in whole minutes and looks for jobs past
theirs every 30 s (compiled in): a real TIMEOUT takes 60 to 90 s. With ``clock=12`` a ``--time=1``
job is ended by Slurm's own time-limit code after 5 to 7.5 s; the daemons' timeouts are scaled so
that their messages keep their real-time patience.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional

if TYPE_CHECKING:
    import psutil

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel")
NODES = ("jc1", "jc2")  # two slurmd on this host, each a node of 2 CPUs and 2 (emulated) GPUs


def missing() -> List[str]:
    """The Slurm and munge programs that are not installed."""
    return [name for name in DAEMONS + CLIENTS
            if shutil.which(name) is None and not os.path.exists(f"/usr/sbin/{name}")]


def require() -> Optional[str]:
    """None when a Slurm cluster can start here; else why not (the tests fail with it, or — only
    when not root, where the daemons cannot run — are skipped with it)."""
    lacking = missing()
    if lacking:
        return ("Slurm is not installed (missing " + ", ".join(lacking) + "): `make test` installs it, or run "
                "`apt-get install -y slurm-wlm munge` as root")
    return None


def faketime() -> Optional[str]:
    """Debian's libfaketime (multi-threaded), or None."""
    found = glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1")
    return found[0] if found else None


def _program(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _die_with_parent() -> None:
    """In the daemon before it starts: SIGTERM it when this process dies, also by SIGKILL (a test
    run killed by a timeout never runs its teardown or atexit)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_ports(count: int) -> List[int]:
    """Ports nobody listens on now (bound then released; xdist workers each ask the kernel)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


CONF = """\
ClusterName=jc{tag}
SlurmctldHost={host}(127.0.0.1)
MailProg=/bin/true
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
{scheduler}
MinJobAge={min_job_age}
KillWait=2
InactiveLimit=0
MessageTimeout={message_timeout}
SlurmctldTimeout={daemon_timeout}
SlurmdTimeout={daemon_timeout}
Waittime=0
PrologFlags=NoHold
{nodes}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
"""

# what the tests and the tuned benchmark run with: a scheduling pass as often as slurmctld's background loop
# turns (about once a second) rather than every 3 s (22.05 has no defer_batch: it was ignored)
TUNED = ("SchedulerParameters=batch_sched_delay=0,"
         "default_queue_depth=100\nSchedulerTimeSlice=5")
DEFAULTS = ""  # Slurm's own defaults (the afterok baseline of benchmarks/)


class SlurmCluster:
    """munged + slurmctld + slurmd×2 under ``root`` (a fresh directory). ``tuned``: schedule at once
    (what the tests use); False keeps Slurm's scheduler defaults (the benchmark's baseline)."""

    def __init__(self, root: Path, *, tuned: bool = True, min_job_age: int = 600, clock: float = 1.0) -> None:
        self.root = Path(root)
        self.clock = clock
        self.tuned = tuned
        self.min_job_age = min_job_age
        self.procs: Dict[str, subprocess.Popen] = {}
        self.conf = self.root / "slurm.conf"
        self.munge_socket = str(self.root / "munge" / "munge.socket")

    # -- the environment clients need
    def env(self, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        return env

    # -- start and stop
    def start(self, timeout: float = 30.0) -> SlurmCluster:
        atexit.register(self.stop)
        try:
            self._write()
            self._start_munge()
            fast = {}
            if self.clock != 1.0:
                library = faketime()
                if library is None:
                    raise RuntimeError("a fast-clock Slurm needs Debian's libfaketime: `make test` installs it, or "
                                       "`apt-get install -y libfaketime`")
                fast = {"LD_PRELOAD": library, "FAKETIME": f"+0 x{self.clock:g}", "FAKETIME_DONT_RESET": "1"}
            self._spawn("slurmctld", [_program("slurmctld"), "-D", "-i", "-f", str(self.conf)], fast)
            for node in NODES:
                self._spawn(f"slurmd-{node}", [_program("slurmd"), "-D", "-N", node, "-f", str(self.conf)])
            self._wait_idle(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """TERM each daemon (slurmd first), then KILL what is left; and every job process they left."""
        for name in sorted(self.procs, key=lambda n: ("slurmd" not in n, n == "munged")):
            self._end(self.procs[name])
        if self.procs:
            self._kill_stepds()
        self.procs.clear()
        atexit.unregister(self.stop)

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _end(self, proc: subprocess.Popen) -> None:
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # the daemon's own group: its job steps (slurmstepd) too
        except ProcessLookupError:
            return
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def mine(self, proc: psutil.Process) -> bool:
        """A process of this cluster: a daemon or slurmstepd (working in its directory; slurmstepd
        clears its environment), or a job's (``SLURM_CONF`` is this cluster's)."""
        import psutil

        try:
            cwd = proc.cwd()
            return cwd == str(self.root) or cwd.startswith(f"{self.root}/") or \
                proc.environ().get("SLURM_CONF") == str(self.conf)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return False

    def leftovers(self) -> List[psutil.Process]:
        import psutil

        keep = {os.getpid()} | {p.pid for p in psutil.Process().parents()}
        return [p for p in psutil.process_iter() if p.pid not in keep and self.mine(p)]

    def _kill_stepds(self) -> None:
        """slurmstepd and the job processes it started leave slurmd's group: end them all, again until
        none is left (a step daemon killed while it starts its job's script leaves that script behind)."""
        import psutil

        end = time.monotonic() + 15
        while time.monotonic() < end:
            left = self.leftovers()
            if not left:
                return
            for proc in left:
                try:
                    proc.kill()
                except psutil.NoSuchProcess:
                    continue
            psutil.wait_procs(left, timeout=1.0)

    def _spawn(self, name: str, argv: List[str], extra: Optional[Dict[str, str]] = None) -> None:
        with open(self.root / f"{name}.out", "ab") as log:
            self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True, env={**self.env(), **(extra or {})},
                                                cwd=str(self.root),
                                                preexec_fn=_die_with_parent)

    def _write(self) -> None:
        for sub in ("state", "spool", "munge", "jobs"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        for node in NODES:
            (self.root / "spool" / node).mkdir(exist_ok=True)
        os.chmod(self.root, 0o755)
        os.chmod(self.root / "jobs", 0o1777)
        ctld, slurmd_port, *node_ports = free_ports(2 + len(NODES))
        nodes = "\n".join(f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={p} CPUs=2 "
                          f"RealMemory=1000 Gres=gpu:2 State=UNKNOWN" for n, p in zip(NODES, node_ports))
        self.conf.write_text(CONF.format(tag=ctld, host=socket.gethostname().split('.')[0], ctld_port=ctld,
                                         slurmd_port=slurmd_port,
                                         munge_socket=self.munge_socket, root=self.root, nodes=nodes,
                                         scheduler=TUNED if self.tuned else DEFAULTS,
                                         min_job_age=self.min_job_age, message_timeout=round(10 * self.clock),
                                         daemon_timeout=round(30 * self.clock)))
        # two emulated GPUs a node: Slurm counts and allocates them (there is no device behind them)
        (self.root / "gres.conf").write_text("Name=gpu File=/dev/null\nName=gpu File=/dev/zero\n")
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(128))
        os.chmod(key, 0o600)
        os.chmod(self.root / "munge", 0o700)

    def _start_munge(self) -> None:
        d = self.root / "munge"
        self._spawn("munged", [_program("munged"), "-F", "--force", f"--socket={self.munge_socket}",
                               f"--key-file={d / 'munge.key'}", f"--pid-file={d / 'munged.pid'}",
                               f"--log-file={d / 'munged.log'}", f"--seed-file={d / 'munged.seed'}",
                               "--num-threads=4"])
        end = time.monotonic() + 10
        while not os.path.exists(self.munge_socket):
            if self.procs["munged"].poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"munged did not start: {self._tail('munged.out')}")
            time.sleep(0.02)

    def _tail(self, name: str) -> str:
        try:
            return (self.root / name).read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def _wait_idle(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        last = ""
        while time.monotonic() < end:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}: {self._tail(name + '.out')}"
                                       f"{self._tail(name + '.log') if name == 'slurmctld' else ''}")
            done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env(), capture_output=True,
                                  text=True)
            last = done.stdout + done.stderr
            states = dict(line.split() for line in done.stdout.splitlines() if len(line.split()) == 2)
            if done.returncode == 0 and all(states.get(n) in ("idle", "mix", "alloc") for n in NODES):
                return
            time.sleep(0.1)
        raise RuntimeError(f"the Slurm nodes did not come up in {timeout:g}s: {last.strip()} "
                           f"{self._tail('slurmctld.log')}")

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        """A Slurm client command against this cluster."""
        return subprocess.run(list(argv), env=self.env(), capture_output=True, text=True, check=check, timeout=60)
