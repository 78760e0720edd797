"""Where jobs run, behind one small interface: create with an idempotency key, read a job, list a
pool's jobs, stop, events and a pod's log pages, answering in a neutral job view. AIHC (v1, v2 and
so the local server) is the first implementation (:mod:`job_chain.aihc.engine`); nothing above
this seam reads an engine's own JSON. ``docs/architecture.md`` says how to add an engine."""
