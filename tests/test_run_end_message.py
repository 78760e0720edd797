"""What a run-end message says of each failed step is one rule (issue 28): the job's tail
(``hop/failure.failed_details``), a look's late message (``session/look.tell_a_silent_end``) and
the run's summary all say it with ``status/summary.step_end``. In-process on the in-memory jobs API;
the message goes over real HTTP to a loopback webhook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chain_helpers import Hooks, memory_runs

from job_chain import ChainSession
from job_chain.engine.errors import EngineError
from job_chain.status import causes


def test_a_late_run_end_message_says_a_failed_step_as_the_summary_does(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # the failed job's logs cannot be read: the step has the engine's reason and no known cause,
    # which the late message used to give as its "cause" where the summary (and a tail) said none
    def unreadable(*args: Any, **kwargs: Any) -> Any:
        raise EngineError("its pods are gone", status=503)

    monkeypatch.setattr(causes, "classify_job", unreadable)
    hook = Hooks()
    try:
        chain, ids, api = memory_runs(tmp_path, 1, (1,), notify=[{"url": hook.url, "on": ["failed"], "format": "json"}])
        session = ChainSession.from_file(str(chain), client=api)
        (summary,) = session.summaries()
        sent = list(hook.bodies)
    finally:
        hook.server.shutdown()
        hook.server.server_close()
    assert [m["event"] for m in sent] == ["failed"], sent
    (told,) = sent[0]["failedSteps"]
    said = {k: v for k, v in summary.failed[0].items() if k in told}
    assert told == said and told["cause"] is None and told["reason"] and told["exitCode"] == 1, (told, said)
    assert f"train failed with exit code 1 ({told['reason']})" in sent[0]["text"]  # the words are unchanged
