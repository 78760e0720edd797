"""An AIHC-compatible training-job server that runs jobs as local processes.

Split like moto: ``routes`` (HTTP only), ``store`` (SQLite state, no HTTP), ``executor``
(processes), ``metrics`` (psutil sampling), ``auth`` (BCE v1 signatures), ``errors`` (BCE
error bodies), ``server``/``daemon`` (running it in the foreground or background).
The layers stay apart (tests/test_structure.py): state (``store``, ``schema``) knows neither
HTTP nor execution, and execution (``executor``, ``lifecycle``, ``adoption``, ``pod_process``)
knows neither HTTP nor the API's shapes; what both need of this machine is in ``host``.
"""

HANG_MINUTE = 60.0  # seconds a minute of hang detection lasts here, unless --hang-minute says otherwise (tests)
