"""An AIHC-compatible training-job server that runs jobs as local processes.

Split like moto: ``routes`` (HTTP only), ``store`` (SQLite state, no HTTP), ``executor``
(processes), ``metrics`` (psutil sampling), ``auth`` (BCE v1 signatures), ``errors`` (BCE
error bodies), ``server``/``daemon`` (running it in the foreground or background).
"""
