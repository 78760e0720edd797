"""A chain's ``"slurm"`` section: sbatch long options, as defaults for every step and per step.

``{"partition": "gpu", "account": "llm", "time": "2-00:00:00", "qos": "normal"}`` becomes
``--partition=gpu --account=llm --time=2-00:00:00 --qos=normal``; ``true`` is a bare flag
(``"exclusive": true``), ``false``/``null`` leaves the option out. The options job-chain sets
itself (the job's name, comment, output, nodes, tasks, GPUs, environment) are refused: they come
from the step (``name``, ``jobSpec.replicas``, ``jobSpec.resources``, ``jobSpec.envs``).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

# set by job-chain from the step: a user's value would break its exactly-once name, its logs or its nodes
OURS = {
    "job-name": "the job's name is job-chain's (run, step, attempt): it is how a step is created once",
    "comment": "job-chain keeps the run, step and attempt in the job's comment",
    "output": "job-chain keeps each node's log where `job-chain logs` reads it",
    "error": "job-chain keeps each node's log where `job-chain logs` reads it",
    "nodes": "use jobSpec.replicas (one node per replica)",
    "ntasks": "use jobSpec.replicas (one task per node)",
    "ntasks-per-node": "use jobSpec.replicas (one task per node)",
    "gres": "use jobSpec.resources (a GPU resource's quantity is GPUs per node)",
    "gpus-per-node": "use jobSpec.resources (a GPU resource's quantity is GPUs per node)",
    "export": "use jobSpec.envs",
    "dependency": "job-chain starts a step when what it depends on succeeded (dependsOn), not Slurm",
    "parsable": "job-chain reads sbatch's answer itself",
    "wrap": "the step's command is jobSpec.command",
    "array": "use a matrix (jobChain.matrix) for a sweep",
}
_NAME = re.compile(r"[a-z][a-z0-9-]*")


def option_problems(section: Any, where: str) -> List[Tuple[str, str]]:
    """(JSON path, what is wrong) for a ``"slurm"`` section."""
    if not isinstance(section, dict):
        return [(where, "must be an object of sbatch long options, e.g. "
                        "{\"partition\": \"gpu\", \"time\": \"1:00:00\"}")]
    out: List[Tuple[str, str]] = []
    for key, value in section.items():
        path = f"{where}.{key}"
        if key in OURS:
            out.append((path, f"is set by job-chain: {OURS[key]}"))
        elif not _NAME.fullmatch(str(key)):
            out.append((path, "must be an sbatch long option without its dashes, e.g. \"partition\""))
        elif not (value is None or isinstance(value, (bool, str, int)) and not isinstance(value, float)):
            out.append((path, f"must be a string, a number or true (a flag), found {type(value).__name__}"))
        elif isinstance(value, str) and ("\n" in value or not value.isprintable()):
            out.append((path, "must be one printable line"))
    return out


def merged(defaults: Optional[Mapping[str, Any]], own: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """A step's options: the chain's, then its own over them."""
    return {**(defaults or {}), **(own or {})}


def sbatch_words(options: Mapping[str, Any]) -> List[str]:
    """``--key=value`` words (``--key`` for true; nothing for false or null)."""
    words = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        words.append(f"--{key}" if value is True else f"--{key}={value}")
    return words
