"""``python3 -m job_chain.hop``: the entry point every step's tail calls (runs in flight keep it)."""

from job_chain.hop.entry import exit_now, main

exit_now(main())
