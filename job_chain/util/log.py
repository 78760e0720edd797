"""The one way in-job code speaks: a ``job-chain: …`` line on stderr, which lands in the job's log."""

import sys


def log(message: str) -> None:
    sys.stderr.write(f"job-chain: {message}\n")  # one write: lines from concurrent submits never interleave
    sys.stderr.flush()
