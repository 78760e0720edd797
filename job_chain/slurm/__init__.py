"""Slurm behind the engine seam: each step a batch job made with ``sbatch`` and read with
``scontrol``/``squeue`` (:mod:`job_chain.slurm.engine`), its sbatch options checked where the chain
file is read (:mod:`job_chain.slurm.options`). ``docs/slurm.md`` says how to use it."""
