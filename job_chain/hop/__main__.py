"""``python3 -m job_chain.hop``: the entry point every step's tail calls (runs in flight keep it)."""

import gc

# A hop is a fresh python that imports ~200 modules and ends within a blink (``exit_now``): the
# cyclic garbage collector's default (a pass every 700 new containers, the older generations
# rescanned every few passes) spent ~10 M instructions (~3 ms) of every hop, collecting nothing
# the exit would not free. Before the hop's own imports, a pass every 50,000 new containers: none
# in a hop, while a hop that waits long (its replicas, an API through its hiccups) still collects.
HOP_GC_THRESHOLD = 50_000
gc.set_threshold(HOP_GC_THRESHOLD, *gc.get_threshold()[1:])

from job_chain.hop.entry import exit_now, main  # noqa: E402 - after the collector is set

exit_now(main())
