"""This machine's host name: the one node every local pod runs on.

Execution writes it into pod events (``Successfully assigned default/<pod> to <host>``) and the
API answers it as ``nodeName``; a module of its own so neither depends on the other for it.
"""

from __future__ import annotations

import socket

HOSTNAME = socket.gethostname()
