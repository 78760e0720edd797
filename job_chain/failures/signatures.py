"""Why a step failed, as data: the failure classes and the catalogue of log signatures.

Each :class:`Signature` names a way PyTorch, NCCL, CUDA, Megatron, the kernel or the shell word
a failure in a pod's log, the class it belongs to, and what to do about it. Matching lives in
:mod:`job_chain.failures.classify`; deciding whether to retry in :mod:`job_chain.rules.retry`.
``docs/failures.md`` shows this table; its examples are what ``job-chain local fault`` writes
into a pod's log, and every example is tested to classify as its own signature.

Tiers order causes when several pods (or lines) match: job-chain's own verdicts first (its
watchdog killed the step), then root causes (a GPU fell off the bus, a rank ran out of memory,
a module is missing), then *consequences* (a collective timed out, a peer went away, the store
stopped answering: what the other ranks print when one rank dies), then generic errors (any
Python exception, a shell error). Within a tier the earliest line wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

VERDICT, ROOT, CONSEQUENCE, GENERIC = 0, 1, 2, 3
UNRECORDED = "run-record-unwritable"  # the advance could not write the run record: it decided nothing

CLASSES: Dict[str, str] = {
    "infra": "the platform failed: NCCL or network errors, collective or store timeouts, InfiniBand, a GPU lost "
             "(Xid, ECC), storage I/O errors. Usually worth a retry, on other nodes if it repeats.",
    "oom": "memory ran out: CUDA out of memory, or the host's OOM killer. A retry fails the same way unless "
           "something changes.",
    "hang": "the step printed nothing for too long: killed by its hangTimeout, or found hung by AIHC's hang "
            "detection (faultToleranceConfig.enabledHangDetection).",
    "timeout": "killed by timeout: the step ran longer than allowed.",
    "user": "the step's own code or data: a Python exception, a missing file or module, a failed assertion, a "
            "shell error. A retry fails the same way.",
    "platform": "the platform failed the job, before or around its script: a datasource it could not mount, an "
                "image it could not pull, no room in the pool. No log says so; the job's Warning events and its "
                "reason do. A retry fails the same way until what the event says is fixed.",
    "unknown": "nothing in the tail of any pod's log matched a signature.",
}
BUILTIN_CLASSES = tuple(CLASSES)


@dataclass(frozen=True)
class Signature:
    """One way a failure is worded in a log. ``words`` (optional) says it in a phrase, filled from
    the pattern's named groups: ``killed after {timeout_after} (timeout)``."""

    name: str
    cls: str
    tier: int
    pattern: str
    explanation: str
    example: str
    words: str = ""


_S = Signature
SIGNATURES: Tuple[Signature, ...] = (
    # -- job-chain's own verdicts -------------------------------------------------------------------
    _S("step-timeout", "timeout", VERDICT,
       r"^job-chain(?: watchdog: killed after|: stopping the step: it ran for more than its timeout of) "
       r"(?P<timeout_after>\d+(?:\.\d+)?[smhd]?)",
       "The step ran longer than its jobChain timeout and job-chain killed it: raise timeout if the work needs "
       "longer, or find out why it became slow.",
       "job-chain watchdog: killed after 6h (timeout); stopping the step (exit code 124)",
       "killed after {timeout_after} (timeout)"),
    _S("step-hang", "hang", VERDICT,
       r"^job-chain(?: watchdog: no output for|: stopping the step: it printed nothing for) "
       r"(?P<hang_after>\d+(?:\.\d+)?[smhd]?)",
       "The step printed nothing for its hangTimeout and job-chain killed it: typically a collective stuck on a "
       "dead peer or a data loader that stopped; a retry (elsewhere) usually helps.",
       "job-chain watchdog: no output for 30m (hangTimeout); stopping the step (exit code 124)",
       "no output for {hang_after} (hangTimeout)"),
    _S(UNRECORDED, "infra", VERDICT,
       r"^job-chain: step \S+ (?:succeeded|failed \(exit code -?\d+\)), but the run record could not be written",
       "The step's advance could not write the run record (a full disk, a read-only mount), so it decided nothing: "
       "free space where the run record is (beside the chain file), then resume the run.",
       "job-chain: step train succeeded, but the run record could not be written (cannot write "
       "/mnt/pfs/chain_info.json record of run r1: No space left on device); nothing is submitted or retried. "
       "Free space there, then run 'job-chain resume chain_info.json --run r1'"),
    # -- Slurm's own verdicts (slurmstepd writes them into the job's output) ---------------------------
    _S("slurm-time-limit", "timeout", VERDICT,
       r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+ DUE TO TIME LIMIT \*\*\*",
       "Slurm ended the job at its time limit (TIMEOUT): raise the \"time\" of the step's \"slurm\" section if the "
       "work needs longer, or make it save checkpoints and retry for timeout.",
       "slurmstepd: error: *** JOB 4242 ON gpu-node-07 CANCELLED AT 2026-11-29T02:10:00 DUE TO TIME LIMIT ***",
       "Slurm's time limit (TIMEOUT)"),
    _S("slurm-preempted", "infra", VERDICT,
       r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+ DUE TO PREEMPTION \*\*\*",
       "Slurm preempted the job for a higher-priority one (PREEMPTED): nothing was wrong with it. Retry.",
       "slurmstepd: error: *** JOB 4242 ON gpu-node-07 CANCELLED AT 2026-11-29T02:10:00 DUE TO PREEMPTION ***",
       "preempted by Slurm (PREEMPTED)"),
    _S("slurm-node-fail", "infra", VERDICT,
       r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+ DUE TO NODE FAILURE",
       "A node of the job failed and Slurm ended it (NODE_FAIL). Retry on other nodes; report the node.",
       "slurmstepd: error: *** JOB 4242 ON gpu-node-07 CANCELLED AT 2026-11-29T02:10:00 DUE TO NODE FAILURE, SEE "
       "SLURMCTLD LOG FOR DETAILS ***",
       "a node failed (NODE_FAIL)"),
    _S("slurm-oom-kill", "oom", ROOT,
       r"Detected \d+ oom[-_]kill event",
       "The job went over its memory and Slurm's cgroup killed it (OUT_OF_MEMORY): ask for more (\"mem\" in the "
       "\"slurm\" section) or use less.",
       "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.batch. Some of the step tasks have been "
       "OOM Killed.",
       "killed by Slurm's cgroup for memory (OUT_OF_MEMORY)"),
    _S("slurm-cancelled", "infra", VERDICT,
       r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+ \*\*\*",
       "Someone cancelled the job with scancel outside job-chain (CANCELLED), or Slurm did: ask who. A stop by "
       "job-chain itself is never a failure.",
       "slurmstepd: error: *** JOB 4242 ON gpu-node-07 CANCELLED AT 2026-11-29T02:10:00 ***",
       "cancelled outside job-chain (CANCELLED)"),
    # -- root causes: hardware ------------------------------------------------------------------------
    _S("gpu-fallen-off-bus", "infra", ROOT,
       r"Xid \(PCI:[0-9A-Fa-f:.]+\): 79\b|fallen off the bus|GPU is lost",
       "A GPU dropped off the PCIe bus (Xid 79): the node needs a reset. Retry on other nodes and report this one.",
       "NVRM: Xid (PCI:0000:3b:00): 79, pid=48210, GPU has fallen off the bus."),
    _S("ecc-uncorrectable", "infra", ROOT,
       r"uncorrectable ECC error|CUDA_ERROR_ECC_UNCORRECTABLE|cudaErrorECCUncorrectable|double bit error \(DBE\)",
       "A GPU's memory had an uncorrectable ECC error: the GPU needs a reset or replacement. Retry on other "
       "nodes and report this one.",
       "RuntimeError: CUDA error: uncorrectable ECC error encountered"),
    _S("nvlink-error", "infra", ROOT,
       r"Xid \(PCI:[0-9A-Fa-f:.]+\): 74\b|NVLink: fatal error",
       "An NVLink between GPUs failed (Xid 74): the node needs attention. Retry on other nodes.",
       "NVRM: Xid (PCI:0000:b1:00): 74, pid=3312, NVLink: fatal error detected on link 3"),
    _S("gpu-xid", "infra", ROOT,
       r"NVRM: Xid \(PCI:[0-9A-Fa-f:.]+\): (?P<xid>\d+)",
       "The GPU driver reported an Xid error: look it up in NVIDIA's Xid table (13, 31 and 43 can also be a "
       "program's own bad memory access). Retry; report the node if it repeats.",
       "NVRM: Xid (PCI:0000:4e:00): 94, pid=9921, name=python, Contained: SM (0x1). RST: No, D-RST: No",
       "Xid {xid}"),
    _S("gpu-unavailable", "infra", ROOT,
       r"CUDA-capable device\(s\) is/are busy or unavailable|all CUDA-capable devices are busy or unavailable|"
       r"No CUDA GPUs are available|no CUDA-capable device is detected",
       "The step could not use its GPUs (busy, missing or not visible): a node problem, unless the script sets "
       "CUDA_VISIBLE_DEVICES itself. Retry on other nodes.",
       "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable"),
    # -- root causes: memory -------------------------------------------------------------------------
    _S("cuda-oom", "oom", ROOT,
       r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError: CUDA|NCCL WARN .*Cuda failure '?out of memory",
       "A GPU ran out of memory: lower the micro-batch size or sequence length, raise tensor/pipeline "
       "parallelism, or turn on activation recomputation. A retry as is fails the same way.",
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of "
       "79.15 GiB of which 1.06 GiB is free."),
    _S("cublas-alloc-failed", "oom", ROOT,
       r"CUBLAS_STATUS_ALLOC_FAILED",
       "cuBLAS could not allocate GPU memory for its workspace: the GPU is (nearly) full. Lower the memory use "
       "as for CUDA out of memory.",
       "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
    _S("host-oom-killed", "oom", ROOT,
       r"Signal 9 \(SIGKILL\) received by PID|\bline \d+: +\d+ Killed\b|is killed by signal: Killed",
       "A process was killed with SIGKILL, most often by the kernel's OOM killer when the container ran out of "
       "host memory: use fewer data-loader workers or less prefetching, or ask for more memory.",
       "/tmp/job-chain-step.Xk2f9q: line 14: 50211 Killed                  python pretrain_gpt.py"),
    _S("shm-exhausted", "oom", ROOT,
       r"insufficient shared memory \(shm\)|is killed by signal: Bus error",
       "/dev/shm is too small for the data-loader workers: mount a bigger in-memory emptyDir at /dev/shm, or use "
       "fewer workers.",
       "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory "
       "(shm)."),
    # -- root causes: storage and network hardware ----------------------------------------------------
    _S("storage-io-error", "infra", ROOT,
       r"\[Errno 5\] Input/output error|failed with Input/output error|PytorchStreamWriter failed writing file|"
       r"error writing .*: Input/output error",
       "The storage failed a read or write (often while saving a checkpoint): a file-system or network-storage "
       "fault. Retry; the checkpoint being written is incomplete and is not used.",
       "OSError: [Errno 5] Input/output error: '/mnt/pfs/ckpt/run1/iter_0000300/mp_rank_00/model_optim_rng.pt'"),
    _S("storage-unavailable", "infra", ROOT,
       r"Transport endpoint is not connected|Stale file handle",
       "A mounted file system went away (FUSE endpoint gone, stale NFS handle): the node's mount needs repair. "
       "Retry on other nodes.",
       "OSError: [Errno 107] Transport endpoint is not connected: '/mnt/pfs/data/train_text_document.bin'"),
    _S("no-space-left", "infra", ROOT,
       r"No space left on device|Disk quota exceeded",
       "The file system is full or over quota (often while saving a checkpoint): free space or raise the quota; "
       "a retry before that fails the same way.",
       "OSError: [Errno 28] No space left on device"),
    _S("ib-completion-error", "infra", ROOT,
       r"NET/IB ?: Got completion (?:from peer \S+ )?with error \d+",
       "An InfiniBand/RoCE transfer failed (error 12: the retry count ran out, a link flapped or a NIC went "
       "down). Retry; report the node if it repeats.",
       "gpu-node-17:5521:5790 [3] NCCL WARN NET/IB : Got completion from peer 10.12.8.41<51324> with error 12, "
       "opcode 0, len 0, vendor err 129 (Recv)"),
    _S("ib-device-error", "infra", ROOT,
       r"NET/IB ?: Got async event|NCCL WARN Call to ibv_\w+ failed",
       "An InfiniBand device reported an error (port down, queue pair failure): a network fault on the node.",
       "gpu-node-03:2210:2301 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error Network is "
       "unreachable"),
    # -- root causes: the step's own code ------------------------------------------------------------
    _S("python-module-not-found", "user", ROOT,
       r"ModuleNotFoundError: No module named|ImportError: (?:cannot import name|No module named)",
       "A Python module is missing from the image or the PYTHONPATH: install it, or fix the import. A retry fails "
       "the same way.",
       "ModuleNotFoundError: No module named 'megatron'"),
    _S("python-syntax-error", "user", ROOT,
       r"^\s*(?:\[[\w:.-]+\]:? ?)*(?:SyntaxError|IndentationError|TabError): ",
       "The step's Python code does not parse: fix the file the traceback names.",
       "SyntaxError: invalid syntax"),
    _S("nan-grad-norm", "user", ROOT,
       r"found NaN in local grad norm|Rank \d+: found NaN|loss is nan",
       "Training diverged (NaN gradients): lower the learning rate, check the data, or resume from an earlier "
       "checkpoint. A failureRules entry can give it its own retry budget.",
       "AssertionError: Rank 11: found NaN in local grad norm in backward pass before data-parallel communication "
       "collective. Device: 3"),
    # -- consequences: what the other ranks print when one rank or the network fails -----------------
    _S("nccl-watchdog-timeout", "infra", CONSEQUENCE,
       r"Watchdog caught collective operation timeout|WorkNCCL\(.*\) ran for \d+ milliseconds before timing out",
       "A collective (all-reduce, all-gather, ...) did not complete within the NCCL timeout: a rank died or "
       "hung, or the network stalled. If no rank failed first, retry (on other nodes if it repeats).",
       "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
       "timeout: WorkNCCL(SeqNum=7753, OpType=ALLREDUCE, NumelIn=544997376, NumelOut=544997376, "
       "Timeout(ms)=600000) ran for 600061 milliseconds before timing out."),
    _S("nccl-watchdog-stuck", "infra", CONSEQUENCE,
       r"ProcessGroupNCCL's watchdog got stuck|Heartbeat monitor timed out",
       "NCCL's watchdog itself was stuck (a CUDA or NCCL call hung): usually a hung GPU or peer. Retry.",
       "[rank2]:[F1019 01:14:03.356851194 ProcessGroupNCCL.cpp:1224] [PG 3 Rank 2] ProcessGroupNCCL's watchdog got "
       "stuck for 600 seconds without making progress in monitoring enqueued collectives."),
    _S("nccl-remote-error", "infra", CONSEQUENCE,
       r"ncclRemoteError|remote process exited or there was a network error",
       "A peer rank went away or the network dropped the connection: if no other rank failed first, it is the "
       "network. Retry.",
       "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."),
    _S("nccl-communicator-aborted", "infra", CONSEQUENCE,
       r"NCCL communicator was aborted",
       "The NCCL communicator was aborted after an error on some rank: the first failing rank has the cause.",
       "RuntimeError: NCCL communicator was aborted on rank 5. Original reason for failure was: Work: "
       "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=600000) timed out in call to wait()."),
    _S("nccl-system-error", "infra", CONSEQUENCE,
       r"ncclSystemError|ncclInternalError|NCCL error(?: in: \S+)?:?,? (?:unhandled system error|internal error)",
       "NCCL hit a system or internal error (sockets, shared memory, a failed peer). Retry; look at NCCL_DEBUG=INFO "
       "output if it repeats.",
       "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
       "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5"),
    _S("c10d-store-timeout", "infra", CONSEQUENCE,
       r"DistStoreError: (?:Timed out|Socket Timeout)|store->get\('[^']*'\) got (?:error|exception): "
       r"(?:Socket Timeout|Timeout waiting for key)",
       "The c10d store (rank 0's TCPStore) did not answer in time: some rank never joined or the master died. "
       "If no rank failed first, retry.",
       "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined."),
    _S("rendezvous-timeout", "infra", CONSEQUENCE,
       r"Rendezvous(?:Timeout|Connection|Closed)Error|client socket has timed out after \d+m?s while trying to "
       r"connect",
       "torchrun's rendezvous failed: the nodes could not meet (a pod did not start, or the master address is "
       "unreachable). Retry.",
       "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has "
       "failed. See inner exception for details."),
    _S("connection-reset", "infra", CONSEQUENCE,
       r"Connection reset by peer|Connection closed by remote peer",
       "A peer closed its connection: it died or the network dropped it. The first failing rank has the cause.",
       "gpu-node-09:183006:183181 [1] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer "
       "gpu-node-10<47861>"),
    _S("torch-distributed-error", "infra", CONSEQUENCE,
       r"torch\.distributed\.(?:\w+\.)*Dist(?:Backend|Network|Store)?Error: ",
       "torch.distributed failed between ranks (backend, network or store): the first failing rank, or the "
       "network, has the cause. Retry.",
       "torch.distributed.DistBackendError: [4] is setting up NCCL communicator and retrieving ncclUniqueId from "
       "[0] via c10d key-value store by key '0', but store->get('0') got error: Broken pipe"),
    # -- generic: any error of the step's own code or shell ------------------------------------------
    _S("file-not-found", "user", GENERIC,
       r"FileNotFoundError: |No such file or directory",
       "A file or directory the step needs is missing: check the paths (and that the storage holding them is "
       "mounted). A retry fails the same way.",
       "FileNotFoundError: [Errno 2] No such file or directory: '/mnt/pfs/data/tokenizer.model'"),
    _S("command-not-found", "user", GENERIC,
       r": command not found$|: not found$",
       "A command the script runs is not in the image or on the PATH.",
       "/tmp/job-chain-step.Ab12Cd: line 3: torchrun: command not found"),
    _S("permission-denied", "user", GENERIC,
       r"Permission denied",
       "The step may not read, write or run something: check file modes and the mount's permissions.",
       "PermissionError: [Errno 13] Permission denied: '/mnt/pfs/ckpt/run1/latest_checkpointed_iteration.txt'"),
    _S("shell-syntax-error", "user", GENERIC,
       r"syntax error near unexpected token|unexpected end of file|unbound variable$",
       "The step's shell script is malformed or uses an unset variable under set -u.",
       "/tmp/job-chain-step.Qw34Er: line 9: syntax error near unexpected token `fi'"),
    _S("python-exception", "user", GENERIC,
       r"^\s*(?:\[[\w:.-]+\]:? ?)*(?:[A-Za-z_][\w.]*\.)?(?!ChildFailedError|Dist\w*Error)[A-Z]\w*(?:Error|Exception)"
       r"(?:: |$)",
       "The step's Python code raised an exception: read the traceback above this line.",
       "AssertionError: micro batch size times data parallel size must divide the global batch size"),
)


def signature(name: str) -> Signature:
    """The catalogue entry called ``name`` (KeyError when there is none)."""
    for item in SIGNATURES:
        if item.name == name:
            return item
    raise KeyError(name)
