"""Issue 34: notifications where teams read them — DingTalk, Feishu/Lark and WeCom bots with signing
on, and Slack — with secrets kept out of the chain file and the jobs, vendors' limits kept, and a
bot that fails never failing the run. Against a loopback listener that checks signatures
(``tests/bot_listener.py``), and the real local server for runs."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import stat
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from bot_listener import DING_SECRET, FEISHU_SECRET, Bots
from chain_helpers import run_jobs, write_chain
from click.testing import CliRunner, Result
from conftest import LocalServer

from job_chain import ChainSession, Outcome
from job_chain.cli import cli as job_chain_cli
from job_chain.hop import bots as bots_
from job_chain.hop.notify import Sender, message
from job_chain.record.ratelimit import earliest, reserve
from job_chain.spec.loader import load_chain

ENV = {"DING_URL": "", "DING_SECRET": DING_SECRET, "FEISHU_URL": "", "FEISHU_SECRET": FEISHU_SECRET,
       "WECOM_URL": "", "SLACK_URL": ""}


@pytest.fixture
def listener() -> Iterator[Bots]:
    bots = Bots()
    yield bots
    bots.close()


def bot_env(bots: Bots) -> Dict[str, str]:
    return dict(ENV, DING_URL=bots.urls["dingtalk"], FEISHU_URL=bots.urls["feishu"], WECOM_URL=bots.urls["wecom"],
                SLACK_URL=bots.urls["slack"])


TARGETS = [{"url": {"env": "DING_URL"}, "secret": {"env": "DING_SECRET"}, "format": "dingtalk",
            "on": ["failed", "stepFailed"]},
           {"url": {"env": "FEISHU_URL"}, "secret": {"env": "FEISHU_SECRET"}, "format": "feishu", "on": ["failed"]},
           {"url": {"env": "WECOM_URL"}, "format": "wecom", "on": ["failed"]}]


# -- signatures, pinned by vectors computed from each vendor's algorithm ----------------------------------
def test_dingtalk_signature_vectors() -> None:
    # urlencode(base64(HMAC-SHA256(key=secret, msg=timestamp + "\n" + secret)))
    for secret, ts in [("secret", 1700000000000), ("SEC19dd84be8c7f3cf7", 1599360473000)]:
        mac = hmac.new(secret.encode(), f"{ts}\n{secret}".encode(), hashlib.sha256).digest()
        assert bots_.dingtalk_sign(secret, ts) == urllib.parse.quote_plus(base64.b64encode(mac).decode())
    # the value published with another DingTalk client for the same inputs
    assert bots_.dingtalk_sign("secret", 1700000000000) == "OuzzJR5%2BxZ4%2FEYwqtNt6sMYZQMTa%2FHEGvc9miJe7XzY%3D"


def test_feishu_signature_vectors() -> None:
    # base64(HMAC-SHA256(key=timestamp + "\n" + secret, msg="")): the string is the key
    for secret, ts in [("secret", 1599360473), ("飞书密钥", 1700000000)]:
        mac = hmac.new(f"{ts}\n{secret}".encode(), b"", hashlib.sha256).digest()
        assert bots_.feishu_sign(secret, ts) == base64.b64encode(mac).decode()
    wrong = hmac.new(b"secret", b"1599360473\nsecret", hashlib.sha256).digest()  # DingTalk's way round
    assert bots_.feishu_sign("secret", 1599360473) != base64.b64encode(wrong).decode()


# -- bodies and sizes ------------------------------------------------------------------------------------
def chain_with(tmp_path: Path, notify: List[Dict[str, Any]]) -> Any:
    path = write_chain(tmp_path, "pool-x", [{"name": "train", "script": "exit 3"}], notify=notify)
    return load_chain(str(path), local=True)


def test_each_bot_gets_a_readable_card_that_names_the_failed_step(tmp_path: Path) -> None:
    chain = chain_with(tmp_path, TARGETS)
    facts = message(chain, "r1", "failed", None, "failed", None,
                    [{"name": "train", "exitCode": 3, "cause": "oom (cuda-oom on pod train-worker-0)"}], gpu=(2.0, 0.5))
    facts["console"] = "http://console:8080/run/abc/r1"
    ding = bots_.body("dingtalk", facts)
    assert ding["msgtype"] == "markdown" and ding["markdown"]["title"] == "job-chain: run failed"
    text = ding["markdown"]["text"]
    assert "train failed with exit code 3 (oom (cuda-oom on pod train-worker-0))" in text
    assert "**GPU-hours**: 2.00 (0.50 lost in failed attempts)" in text
    assert f"`job-chain status {chain.path} --run r1`" in text
    assert "[Open the run in the console](http://console:8080/run/abc/r1)" in text
    wecom = bots_.body("wecom", facts)["markdown"]["content"]
    assert "train failed with exit code 3" in wecom and "\n**GPU-hours**" in wecom
    post = bots_.body("feishu", facts)["content"]["post"]["zh_cn"]
    assert post["title"] == "job-chain: run failed"
    assert [{"tag": "a", "text": "Open the run in the console", "href": "http://console:8080/run/abc/r1"}] \
        in post["content"]
    assert any("train failed with exit code 3" in p[0].get("text", "") for p in post["content"])
    assert "<http://console:8080/run/abc/r1|Open the run in the console>" in bots_.body("slack", facts)["text"]


@pytest.mark.parametrize("fmt", ["wecom", "dingtalk", "feishu", "slack"])
def test_a_message_over_the_vendors_size_is_shortened_not_refused(tmp_path: Path, fmt: str) -> None:
    chain = chain_with(tmp_path, TARGETS)
    failed = [{"name": f"point-{i}", "exitCode": 1, "cause": "失败 " * 200} for i in range(40)]
    facts = message(chain, "r1", "failed", None, "failed", None, failed, gpu=(1.0, 0.0))
    payload = bots_.body(fmt, facts)
    text = {"wecom": lambda p: p["markdown"]["content"], "dingtalk": lambda p: p["markdown"]["text"],
            "slack": lambda p: p["text"],
            "feishu": lambda p: "\n".join(x[0]["text"] for x in p["content"]["post"]["zh_cn"]["content"])}[fmt](payload)
    assert len(text.encode("utf-8")) <= bots_.TEXT_BYTES[fmt]
    assert bots_.SHORTENED in text and f"job-chain status {chain.path} --run r1" in text  # the way to more is kept
    assert "point-0 failed" in text
    body, _ = bots_.encode(fmt, payload)
    assert len(body) < {"wecom": 4096 + 200, "dingtalk": 20000, "feishu": 20 * 1024, "slack": 40000}[fmt]


# -- the chain file: secrets by reference ----------------------------------------------------------------
def test_a_literal_secret_is_a_warning_and_a_reference_is_kept_as_written(tmp_path: Path) -> None:
    literal = chain_with(tmp_path, [{"url": "https://oapi.dingtalk.com/robot/send?access_token=x", "secret": "SECx",
                                     "format": "dingtalk"}])
    assert any(w.startswith("notify[0].secret: a literal secret in the chain file") for w in literal.warnings)
    assert any(w.startswith("notify[0].url: a dingtalk bot's URL carries its token") for w in literal.warnings)
    chain = chain_with(tmp_path, TARGETS)
    assert not [w for w in chain.warnings if w.startswith("notify")]
    assert chain.notify[0]["url"] == {"env": "DING_URL"} and chain.notify[0]["secret"] == {"env": "DING_SECRET"}


def test_bad_notify_settings_name_their_json_path(tmp_path: Path) -> None:
    from job_chain.errors import UsageError

    path = write_chain(tmp_path, "pool-x", [{"name": "train", "script": "true"}], notify=[
        {"url": {"env": "1BAD"}, "format": "dingtalk"},
        {"url": {"env": "W"}, "format": "wecom", "secret": {"env": "S"}},
        {"format": "slack"}])
    with pytest.raises(UsageError) as problem:
        load_chain(str(path), local=True)
    text = str(problem.value)
    assert "notify[0].url: must be a string or {\"env\": \"NAME\"}" in text
    assert "notify[1].secret: only dingtalk and feishu bots sign their messages" in text
    assert "notify[2].url: required" in text


# -- rate limits held across processes -------------------------------------------------------------------
def windows_hold(times: List[float], windows: Any) -> bool:
    times = sorted(times)
    return all(sum(1 for s in times if t - w < s <= t) <= n for t in times for w, n in windows)


@pytest.mark.parametrize("fmt", ["dingtalk", "wecom", "feishu"])
def test_a_burst_of_50_events_keeps_the_bots_rate_limit(tmp_path: Path, fmt: str) -> None:
    """50 senders at once (threads, each on its own file descriptor: the state is only in the file),
    at one instant of an injected clock: each is given a time that keeps every window."""
    windows = bots_.windows(fmt)
    state, lock = str(tmp_path / "state.json"), str(tmp_path / "state.lock")
    times: List[Any] = []
    go = threading.Event()

    def one() -> None:
        go.wait()
        times.append(reserve(state, lock, windows, 1000.0, 150.0))

    threads = [threading.Thread(target=one) for _ in range(50)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join()
    assert None not in times and len(times) == 50
    assert windows_hold(times, bots_.RATE_LIMITS[fmt]) and windows_hold(times, windows)
    # the check can fail: one more at the first instant breaks it
    assert not windows_hold(times + [min(times)], bots_.RATE_LIMITS[fmt])
    assert max(times) - 1000.0 == pytest.approx({"dingtalk": 120.5, "wecom": 120.5, "feishu": 9 * 1.25}[fmt])
    assert reserve(state, lock, windows, 1000.0, 10.0) is None  # past the wait: not sent, nothing reserved
    assert len(json.loads(Path(state).read_text())) == 50


def test_earliest_waits_for_the_oldest_message_to_leave_the_window() -> None:
    assert earliest([], ((60.0, 20),), 5.0) == 5.0
    assert earliest([0.0] * 20, ((60.0, 20),), 5.0) == 60.0
    assert earliest([0.0, 0.2, 0.4, 0.6, 0.8], ((1.0, 5), (60.0, 100)), 0.9) == 1.0


def test_senders_in_separate_processes_keep_feishus_5_a_second(tmp_path: Path, listener: Bots) -> None:
    """Six processes send to one Feishu bot at once: the bot never sees more than 5 in a second."""
    chain = write_chain(tmp_path, "pool-x", [{"name": "train", "script": "true"}],
                        notify=[{"url": {"env": "FEISHU_URL"}, "secret": {"env": "FEISHU_SECRET"}, "format": "feishu"}])
    script = ("import sys\nfrom job_chain.hop.notify import send_samples\nfrom job_chain.record.records import "
              "RunRecords\nfrom job_chain.spec.loader import load_chain\n"
              "c = load_chain(sys.argv[1], local=True)\n"
              "secrets = {'FEISHU_URL': sys.argv[2], 'FEISHU_SECRET': sys.argv[3]}\n"
              "r = send_samples(c, secrets, RunRecords(sys.argv[1]))\n"
              "sys.exit(0 if r[0][1] is None else r[0][1])\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(chain), listener.urls["feishu"], FEISHU_SECRET],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    arrived = [r["at"] for r in listener.received]
    assert len(arrived) == 6 and not listener.rejected
    assert windows_hold(arrived, bots_.RATE_LIMITS["feishu"]), [round(t - min(arrived), 3) for t in sorted(arrived)]
    assert max(arrived) - min(arrived) >= 0.9, [round(t - min(arrived), 3) for t in sorted(arrived)]  # the sixth waited


# -- sending: signed, checked by the listener; failures said, never raised ----------------------------------
def test_a_text_target_gets_plain_text_and_a_bad_url_is_said_without_it(tmp_path: Path) -> None:
    chain = chain_with(tmp_path, [{"url": "https://x.example/h", "format": "text"}])
    facts = message(chain, "r1", "failed", None, "failed", None, [{"name": "train", "exitCode": 3}])
    data, kind = bots_.encode("text", bots_.body("text", facts))
    assert kind == "text/plain; charset=utf-8" and data.decode().startswith("job-chain: run r1 of ")
    said: List[str] = []
    why = Sender(None, {"U": "ftp//tok-123"}, said.append).send(0, {"url": {"env": "U"}, "format": "json"}, facts)
    assert why == "its URL is not a valid http:// or https:// URL" and "tok-123" not in why


def test_a_refusing_bot_is_said_once_with_why_and_never_raises(tmp_path: Path, listener: Bots) -> None:
    chain = chain_with(tmp_path, TARGETS)
    said: List[str] = []
    secrets = dict(bot_env(listener), DING_SECRET="wrong-secret")
    sender = Sender(None, secrets, said.append, sleep=lambda _: None)
    facts = message(chain, "r1", "failed", None, "failed", None, [{"name": "train", "exitCode": 3}])
    failed: List[Any] = []
    took = sender.send_all(list(enumerate(chain.notify)), facts, lambda i, why: failed.append((i, why)))
    assert took == 2 and [v["vendor"] for v in listener.received] == ["feishu", "wecom"]
    assert failed == [(0, "the dingtalk bot refused it: sign not match (errcode 310000)")]
    assert said == ["notification to notify[0] (dingtalk, $DING_URL) failed: the dingtalk bot refused it: "
                    "sign not match (errcode 310000)"]
    assert all("ding-token" not in line and "wrong-secret" not in line for line in said)


# -- the CLI: notify test, and a start refused for a missing variable -------------------------------------------
def invoke(*args: str, env: Dict[str, Any]) -> Result:
    return CliRunner().invoke(job_chain_cli, list(args), env=env)


def test_notify_test_sends_one_message_per_target(tmp_path: Path, listener: Bots) -> None:
    targets = TARGETS + [{"url": {"env": "SLACK_URL"}, "format": "slack"}]
    chain = write_chain(tmp_path, "pool-x", [{"name": "train", "script": "true"}], notify=targets)
    done = invoke("notify", "test", str(chain), env=bot_env(listener))
    assert done.exit_code == 0, done.output
    assert [r["vendor"] for r in listener.received] == ["dingtalk", "feishu", "wecom", "slack"]
    assert not listener.rejected
    assert done.output.splitlines() == ["notify[0] (dingtalk, $DING_URL): sent",
                                        "notify[1] (feishu, $FEISHU_URL): sent",
                                        "notify[2] (wecom, $WECOM_URL): sent", "notify[3] (slack, $SLACK_URL): sent"]
    ding = listener.received[0]["body"]["markdown"]["text"]
    assert "[test] job-chain: run failed" in ding and "train failed with exit code 1" in ding
    for secret in (DING_SECRET, FEISHU_SECRET, listener.urls["wecom"]):
        assert secret not in done.output
    step = invoke("notify", "test", str(chain), "--event", "stepFailed", env=dict(bot_env(listener), DING_SECRET="x"))
    assert step.exit_code == 1
    assert "notify[0] (dingtalk, $DING_URL): not sent: the dingtalk bot refused it: sign not match" in step.output
    wecom = [r for r in listener.received if r["vendor"] == "wecom"]
    assert len(wecom) == 2 and "step train failed" in wecom[-1]["body"]["markdown"]["content"]


def test_a_missing_variable_refuses_the_start_naming_it(tmp_path: Path, shared_server: LocalServer) -> None:
    chain = write_chain(tmp_path, shared_server.pool, [{"name": "train", "script": "true"}], notify=TARGETS)
    env = {"JOB_CHAIN_CREDENTIALS": shared_server.credentials_file, "AIHC_HOST": None, "AIHC_AK": None,
           "AIHC_SK": None, **dict(ENV, DING_URL="http://127.0.0.1:9/x", FEISHU_SECRET=None, WECOM_URL=None,
                                   FEISHU_URL="http://127.0.0.1:9/y")}
    refused = invoke("run", str(chain), env=env)
    assert refused.exit_code != 0 and "Traceback" not in refused.output
    assert "notify names $FEISHU_SECRET, $WECOM_URL, which are not set here" in refused.output
    assert not (tmp_path / "chain_info.json.runs").exists() or not [
        p for p in (tmp_path / "chain_info.json.runs").iterdir() if not p.name.startswith(".")]
    dry = invoke("run", str(chain), "--dry-run", env=env)
    assert dry.exit_code == 0, dry.output
    assert ("# notify: reads $DING_URL, $DING_SECRET, $FEISHU_URL, $FEISHU_SECRET, $WECOM_URL from this environment "
            "at start; not set here: $FEISHU_SECRET, $WECOM_URL (the run would be refused)") in dry.output
    assert DING_SECRET not in dry.output and "127.0.0.1:9" not in dry.output
    bad = invoke("run", str(chain), env=dict(env, FEISHU_SECRET="s", WECOM_URL="qyapi.weixin.qq.com/send?key=k-77"))
    assert bad.exit_code != 0 and "notify's URL $WECOM_URL is not an http:// or https:// URL" in bad.output
    assert "k-77" not in bad.output
    inline = invoke("run", str(chain), "--inline", env=dict(env, FEISHU_SECRET="s", WECOM_URL="http://127.0.0.1:9/z"))
    assert inline.exit_code != 0 and "an --inline run has no record" in inline.output


# -- a failed run, end to end ----------------------------------------------------------------------------
def test_a_failed_run_notifies_each_bot_signed_and_keeps_its_secrets(tmp_path: Path, listener: Bots,
                                                                     shared_server: LocalServer,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in bot_env(listener).items():
        monkeypatch.setenv(name, value)
    refusing = dict(TARGETS[1], secret={"env": "WRONG_SECRET"}, on=["stepFailed"])
    monkeypatch.setenv("WRONG_SECRET", "not-the-secret")
    unreachable = {"url": {"env": "GONE_URL"}, "format": "wecom", "on": ["stepFailed", "failed"]}
    monkeypatch.setenv("GONE_URL", "http://127.0.0.1:9/cgi-bin/webhook/send?key=gone-key-123")
    chain = write_chain(tmp_path, shared_server.pool, [
        {"name": "prep", "script": "true"},
        {"name": "train", "script": "echo boom >&2; exit 3", "jobChain": {"dependsOn": ["prep"]}},
        {"name": "other", "script": 'for i in $(seq 100); do test -f "$SHARED/go" && break; sleep 0.1; done; echo ok',
         "jobChain": {"dependsOn": ["prep"]}},
    ], notify=TARGETS + [refusing, unreachable])
    s = ChainSession.from_file(str(chain), client=shared_server.client(max_retries=3), strict=False)
    run = s.start()
    end = time.monotonic() + 60
    while not any(r["vendor"] == "dingtalk" for r in listener.received) and time.monotonic() < end:
        time.sleep(0.1)
    (tmp_path / "shared" / "go").write_text("go")  # the other branch goes on after the bots failed
    final = s.wait(run.run_id, timeout=90, interval=0.3)
    assert final.outcome is Outcome.FAILED and [x.status for x in final.steps][2] == "Succeeded"
    end = time.monotonic() + 20
    while len(listener.received) < 4 and time.monotonic() < end:
        time.sleep(0.1)
    by = sorted((r["vendor"], (r["body"].get("markdown") or {}).get("title", r["body"].get("msg_type")))
                for r in listener.received)
    assert by == [("dingtalk", "job-chain: run failed"), ("dingtalk", "job-chain: step train failed"),
                  ("feishu", "post"), ("wecom", None)], listener.received
    ding = next(r for r in listener.received if r["vendor"] == "dingtalk"
                and r["body"]["markdown"]["title"] == "job-chain: run failed")["body"]["markdown"]["text"]
    assert "train failed with exit code 3" in ding and f"--run {run.run_id}" in ding
    feishu = next(r for r in listener.received if r["vendor"] == "feishu")["body"]
    assert any("train failed with exit code 3" in p[0]["text"] for p in feishu["content"]["post"]["zh_cn"]["content"])
    assert [r["vendor"] for r in listener.rejected] == ["feishu"]  # the refusing one, once (no retry of a refusal)
    # status says which target failed and why, once each
    status = s.status(run.run_id)
    assert len(status.notify_failed) == 2
    assert status.notify_failed[0].startswith("notify[3] (feishu, $FEISHU_URL): the stepFailed message was not sent: "
                                              "the feishu bot refused it: sign match fail")
    assert status.notify_failed[1].startswith("notify[4] (wecom, $GONE_URL): the stepFailed message was not sent: "
                                              "it could not be reached")
    shown = CliRunner().invoke(job_chain_cli, ["status", str(chain)], env={
        "JOB_CHAIN_CREDENTIALS": shared_server.credentials_file, "AIHC_HOST": None, "AIHC_AK": None, "AIHC_SK": None})
    assert "notification failed: notify[3] (feishu, $FEISHU_URL)" in shown.output
    # secrets: in no job, no log, no readable file; kept 0600 in the run record
    secrets = [DING_SECRET, FEISHU_SECRET, "ding-token-5f2c", "feishu-hook-77de", "wecom-key-4a6e", "gone-key-123",
               "not-the-secret"]
    jobs = json.dumps(run_jobs(shared_server, run.run_id))
    assert jobs.count("job-chain/step") >= 3
    logs = CliRunner().invoke(job_chain_cli, ["logs", str(chain), "--step", "train"], env={
        "JOB_CHAIN_CREDENTIALS": shared_server.credentials_file, "AIHC_HOST": None, "AIHC_AK": None, "AIHC_SK": None})
    assert "boom" in logs.output
    kept = Path(s.records.directory(run.run_id)) / "notify-secrets.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and DING_SECRET in kept.read_text()
    holding = []
    for root in (tmp_path, shared_server.state_dir):
        for path in Path(root).rglob("*"):
            if path.is_file() and path != kept:
                text = path.read_bytes().decode("utf-8", "replace")
                holding += [f"{path}: {x}" for x in secrets if x in text]
    for secret in secrets:
        assert secret not in jobs and secret not in logs.output and secret not in shown.output
    assert holding == []


def test_a_going_run_revised_with_new_notify_targets_keeps_their_secrets(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A resume of a going run that adds a {"env"} target reads the variable then (or refuses)."""
    from memory_api import MemoryAPI

    from job_chain.errors import UsageError

    api = MemoryAPI()
    chain = write_chain(tmp_path, "pool-local", [{"name": "a", "script": "true"}, {"name": "b", "script": "true"}])
    s = ChainSession.from_file(str(chain), client=api)
    run = s.start()
    data = json.loads(chain.read_text())
    data["notify"] = [{"url": {"env": "WECOM_URL"}, "format": "wecom"}]
    chain.write_text(json.dumps(data))
    monkeypatch.delenv("WECOM_URL", raising=False)
    with pytest.raises(UsageError, match=r"notify names \$WECOM_URL, which is not set here"):
        s.revise_running(run.run_id)
    assert s.records.notify_secrets(run.run_id) == {}
    monkeypatch.setenv("WECOM_URL", "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k1")
    assert s.revise_running(run.run_id).revision == 2
    assert s.records.notify_secrets(run.run_id) == {"WECOM_URL": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k1"}


def test_an_unexpected_error_in_a_send_is_a_failed_target_not_a_failed_advance(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain = chain_with(tmp_path, [{"url": "https://x.example/hook/tok-991", "format": "slack"}])

    def broken(*args: Any) -> Any:
        raise RuntimeError("while posting to https://x.example/hook/tok-991")

    monkeypatch.setattr(bots_, "body", broken)
    said: List[str] = []
    failed: List[Any] = []
    facts = message(chain, "r1", "failed", None, "failed", None)
    assert Sender(None, {}, said.append).send_all([(0, chain.notify[0])], facts, lambda i, w: failed.append(w)) == 0
    assert failed == ["it could not be sent (RuntimeError)"] and "tok-991" not in said[0]
