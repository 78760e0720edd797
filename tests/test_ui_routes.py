"""The console's routes over real HTTP (in-process uvicorn) against a real local server:
token, Host, CSRF, secret redaction, log tail and download, submit, retry, jobs."""

from __future__ import annotations

import html
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, List

import pytest
import requests
from chain_helpers import cli_here, latest_run, make_chain, wait_outcome
from ui_helpers import Console, kill

from job_chain.errors import JobChainError, UsageError
from job_chain.ui.catalog import chain_id
from job_chain.ui.security import Guard

SECRET = "SK-do-not-show-7f3a9c2e1b"


@pytest.fixture(scope="module")
def creds(shared_server: Any) -> Iterator[None]:
    old = os.environ.get("JOB_CHAIN_CREDENTIALS")
    os.environ["JOB_CHAIN_CREDENTIALS"] = shared_server.credentials_file
    yield
    if old is None:
        os.environ.pop("JOB_CHAIN_CREDENTIALS", None)
    else:
        os.environ["JOB_CHAIN_CREDENTIALS"] = old


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-routes")


@pytest.fixture(scope="module")
def console(home: Path, creds: None) -> Iterator[Console]:
    served = Console([str(home)])
    yield served
    served.close()


def csrf(console: Console) -> dict:
    return {"X-CSRF-Token": console.guard.csrf}


def first_job(chain: Path, server: Any) -> str:
    return json.loads(cli_here("status", str(chain), "--json", server=server, check=True).stdout)["steps"][0]["jobId"]


def chain_in(home: Path, name: str, steps: Any, pool: str, **top: Any) -> Path:
    folder = home / name
    folder.mkdir()
    return make_chain(folder, steps, pool, **top)


def test_without_a_token_loopback_still_needs_its_own_host(console: Console) -> None:
    assert console.guard.token is None  # --no-token
    assert requests.get(console.url + "/").status_code == 200
    assert requests.get(console.url + "/static/vendor/htmx.min.js").status_code == 200
    rebound = requests.get(console.url + "/", headers={"Host": f"evil.example:{console.port}"})
    assert rebound.status_code == 403


def test_console_requires_its_token_on_loopback(home: Path, creds: None) -> None:
    """On a shared machine any local user reaches 127.0.0.1: the token is needed there too, its
    cookie is named for the port and holds no token, and ?token= never redirects off the console."""
    assert Guard.for_bind("127.0.0.1", 1).token and Guard.for_bind("0.0.0.0", 1).token
    assert Guard.for_bind("127.0.0.1", 1, token=False).token is None
    with pytest.raises(UsageError, match="--no-token is for a loopback --bind only"):
        Guard.for_bind("0.0.0.0", 1, token=False)
    served = Console([str(home)], token=True)
    guard = served.guard
    try:
        assert requests.get(served.url + "/").status_code == 403
        assert requests.get(served.url + "/?token=wrong").status_code == 403
        assert requests.get(served.url + "/static/console.css").status_code == 403
        assert requests.post(served.url + "/submit/run", headers={"X-CSRF-Token": guard.csrf},
                             data={"name": "x.json", "chain": "{}"}).status_code == 403
        first = requests.get(served.url + "/?outcome=a%26b&token=" + guard.token, allow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/?outcome=a%26b"  # token leaves the URL
        cookie = first.headers["set-cookie"]
        assert cookie.startswith(f"job_chain_ui_{served.port}=") and "HttpOnly" in cookie
        assert "samesite=strict" in cookie.lower() and guard.token not in cookie  # other ports never see it
        for sneaky in ("//evil.example/x", "/\\evil.example/x", "///evil.example"):
            away = requests.get(served.url + sneaky + "?token=" + guard.token, allow_redirects=False)
            assert away.status_code == 303 and away.headers["location"].startswith("/")
            assert not away.headers["location"].startswith(("//", "/\\")), sneaky
        browser = requests.Session()
        assert browser.get(served.url + "/?token=" + guard.token).status_code == 200
        assert browser.get(served.url + "/static/console.css").status_code == 200
        page = browser.get(served.url + "/")
        assert page.status_code == 200 and guard.csrf in page.text
        # a cookie made for another token (a restarted console, another user's) is refused
        stale = requests.get(served.url + "/", cookies={guard.cookie: Guard("other", set(), served.port).cookie_value})
        assert stale.status_code == 403
    finally:
        served.close()


def test_the_cli_prints_a_token_url_first(home: Path) -> None:
    for bind in ("127.0.0.1", "0.0.0.0"):
        proc = subprocess.Popen([sys.executable, "-m", "job_chain", "ui", str(home), "--bind", bind, "--port", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = proc.stdout.readline().strip()  # type: ignore[union-attr]
            assert "?token=" in first and first.startswith("http://")
            port = first.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
            token = first.split("?token=", 1)[1]
            url = f"http://127.0.0.1:{port}/"
            assert requests.get(url).status_code == 403
            assert requests.get(url + "?token=" + token).status_code == 200
        finally:
            kill(proc)
    refused = subprocess.run([sys.executable, "-m", "job_chain", "ui", str(home), "--bind", "0.0.0.0", "--no-token"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--no-token is for a loopback --bind only" in refused.stderr


def test_a_no_token_console_only_shows(home: Path) -> None:
    # anyone on the machine can open it: submitting through it would run commands as its user
    import re

    proc = subprocess.Popen([sys.executable, "-m", "job_chain", "ui", str(home), "--no-token", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()  # type: ignore[union-attr]
        page = requests.get(url + "submit")
        assert page.status_code == 200
        token = re.search(r'"X-CSRF-Token": "([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
        chain = json.dumps({"resourcePoolId": "p", "jobs": [{"name": "a", "jobSpec": {"command": "id", "image": "i"}}]})
        for path in ("submit/run", "submit/check", "action/x/y/stop"):
            answer = requests.post(url + path, data={"name": "nt.json", "chain": chain},
                                   headers={"X-CSRF-Token": token, "Origin": url.rstrip("/")})
            assert answer.status_code == 403 and "started with --no-token" in answer.text
        assert not (home / "nt.json").exists()
    finally:
        kill(proc)


def test_posts_need_the_csrf_header_and_a_matching_origin(console: Console) -> None:
    data = {"name": "x.json", "chain": "{}"}
    assert requests.post(console.url + "/submit/check", data=data).status_code == 403
    wrong = requests.post(console.url + "/submit/check", data=data, headers={"X-CSRF-Token": "nope"})
    assert wrong.status_code == 403
    foreign = requests.post(console.url + "/submit/check", data=data,
                            headers={**csrf(console), "Origin": "http://evil.example"})
    assert foreign.status_code == 403
    ok = requests.post(console.url + "/submit/check", data=data,
                       headers={**csrf(console), "Origin": console.url})
    assert ok.status_code == 400 and "resourcePoolId: required" in ok.text  # problems: 400, shown all the same


def test_the_secret_key_appears_nowhere(console: Console, home: Path, shared_server: Any,
                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    api = {"host": shared_server.url, "ak": "AK-visible-is-fine", "sk": SECRET}
    chain = chain_in(home, "secret", [{"script": "echo training\n"}], shared_server.pool, api_config=api)
    cli_here("run", str(chain), "--follow", server=shared_server, check=True)
    run_id = latest_run(chain)
    cid = chain_id(str(chain))
    job_id = first_job(chain, shared_server)
    pages = ["/", "/fragment/runs", f"/run/{cid}/{run_id}", f"/fragment/run/{cid}/{run_id}",
             f"/fragment/step/{cid}/{run_id}/0", f"/fragment/log/{cid}/{run_id}/0", f"/download/log/{cid}/{run_id}/0",
             f"/api/curves/{cid}/{run_id}/0", f"/api/metrics/{cid}/{job_id}?run={run_id}", "/jobs", "/fragment/jobs",
             f"/job/{cid}/{job_id}", "/submit"]
    for page in pages:
        answer = requests.get(console.url + page)
        assert answer.status_code == 200, page
        assert SECRET not in answer.text, page
    step = requests.get(f"{console.url}/fragment/step/{cid}/{run_id}/0").text
    assert "resourcePoolId" in step and "job-chain/run" in step  # the request is shown, redacted
    echoed = requests.post(console.url + "/submit/check", headers=csrf(console),
                           data={"name": "again.json", "chain": chain.read_text().replace('"jobs"', '"jobz"')})
    assert "jobs: required" in echoed.text and "api_config" in echoed.text and SECRET not in echoed.text
    assert SECRET not in caplog.text


def test_log_tail_and_full_download(console: Console, home: Path, shared_server: Any) -> None:
    chain = chain_in(home, "biglog", [{"script": "seq 1 200000\n"}], shared_server.pool)
    cli_here("run", str(chain), "--follow", server=shared_server, check=True)
    base = f"/{chain_id(str(chain))}/{latest_run(chain)}/0"
    tail = requests.get(console.url + "/fragment/log" + base + "?lines=50").text
    body = html.unescape(tail.split('id="log-text">', 1)[1].split("</pre>", 1)[0])
    assert body == cli_here("logs", str(chain), "--tail", "50", server=shared_server, check=True).stdout
    assert len(body.splitlines()) == 50 and "\n199999\n200000\n" in body and "\n199940\n" not in body
    assert "the last 50 lines" in tail and "show the last 500" in tail
    with requests.get(console.url + "/download" + "/log" + base, stream=True) as full:
        assert "attachment" in full.headers["content-disposition"]
        text = b"".join(full.iter_content(1 << 16)).decode()
    assert text == cli_here("logs", str(chain), server=shared_server, check=True).stdout
    assert [line for line in text.splitlines() if line.isdigit()] == [str(n) for n in range(1, 200001)]


def test_resume_from_the_console_shows_the_changes_then_submits(console: Console, home: Path,
                                                               shared_server: Any) -> None:
    chain = chain_in(home, "flaky", [{"script": "echo first"}, {"script": "echo broken >&2; exit 3\n"}],
                     shared_server.pool)
    (chain.parent / "shared").mkdir()
    cli_here("run", str(chain), "--follow", server=shared_server)
    run_id = latest_run(chain)
    cid = chain_id(str(chain))
    from job_chain.record.records import RunRecords  # a notify target that failed is said on the run's page

    RunRecords(str(chain)).record_notify_failure(run_id, 0, "notify[0] (dingtalk, $DING_URL): the failed message "
                                                            "was not sent: the dingtalk bot refused it")
    live = requests.get(f"{console.url}/fragment/run/{cid}/{run_id}").text
    assert 'data-outcome="failed"' in live and 'id="resume"' in live
    assert 'id="failed-steps"' in live and "step-1 · exit 3" in live and 'id="stop"' not in live
    assert "notification failed: notify[0] (dingtalk, $DING_URL): the failed message was not sent" in live
    (chain.parent / "step-1.sh").write_text("echo fixed\n")  # the fix goes in through resume
    preview = requests.post(f"{console.url}/action/{cid}/{run_id}/preview", headers=csrf(console)).text
    assert "~ step-1: changed (script content (step-1.sh))" in html.unescape(preview)
    assert "step-1 · attempt 2" in preview and 'id="resume-now"' in preview
    assert len(json.loads(cli_here("status", str(chain), "--json", server=shared_server).stdout)["steps"][1]
               ["attempts"]) == 1  # previewing submits nothing
    answer = requests.post(f"{console.url}/action/{cid}/{run_id}/resume", headers=csrf(console))
    assert "submitted step-1 attempt 2" in answer.text and answer.headers["HX-Trigger"] == "refresh-run"
    status = wait_outcome(chain, shared_server, "succeeded")
    assert [a["status"] for a in status["steps"][1]["attempts"]] == ["Failed", "Succeeded"]
    assert status["revision"] == 2
    page = requests.get(f"{console.url}/run/{cid}/{run_id}?step=step-1&attempt=1").text
    assert 'id="revision"' in requests.get(f"{console.url}/fragment/run/{cid}/{run_id}").text
    assert f"/fragment/step/{cid}/{run_id}/step-1?attempt=1" in page
    step = requests.get(f"{console.url}/fragment/step/{cid}/{run_id}/step-1?attempt=1").text
    assert "echo broken" in html.unescape(step)  # the request attempt 1 ran, from revision 1
    stopped = requests.post(f"{console.url}/action/{cid}/{run_id}/stop", headers=csrf(console)).text
    assert f"run {run_id} already succeeded" in stopped and 'class="message error"' in stopped


def test_console_steers_a_run_whose_file_is_gone_and_deletes_finished_runs(console: Console, home: Path,
                                                                           shared_server: Any) -> None:
    chain = chain_in(home, "gone", [{"script": "sleep 60"}], shared_server.pool)
    cli_here("run", str(chain), server=shared_server, check=True)
    run_id = latest_run(chain)
    cid = chain_id(str(chain))
    chain.unlink()
    page = requests.get(f"{console.url}/run/{cid}/{run_id}").text  # (finds the new chain at once)
    assert 'id="file-problem"' in page and "frozen copy" in page
    assert run_id in requests.get(f"{console.url}/").text
    stopped = requests.post(f"{console.url}/action/{cid}/{run_id}/stop", headers=csrf(console)).text
    assert f"run {run_id} stopped" in stopped
    end = __import__("time").monotonic() + 30
    while 'data-outcome="stopped"' not in requests.get(f"{console.url}/fragment/run/{cid}/{run_id}").text:
        assert __import__("time").monotonic() < end
        __import__("time").sleep(0.3)
    deleted = requests.post(f"{console.url}/action/{cid}/{run_id}/delete", headers=csrf(console))
    assert "deleted" in deleted.text and deleted.headers["HX-Redirect"] == f"/?chain={cid}"
    assert not (chain.parent / "chain_info.json.runs" / run_id).exists()


def test_submit_saves_privately_and_starts_a_run(console: Console, home: Path, shared_server: Any) -> None:
    (home / "hello.sh").write_text("echo hello from the console\n")
    text = json.dumps({"resourcePoolId": shared_server.pool,
                       "jobs": [{"name": "hello",
                                 "jobSpec": {"command": "hello.sh", "image": "local", "replicas": 1},
                                 "datasources": [{"type": "pfs", "name": "pfs", "mountPath": str(home)}]}]})
    answer = requests.post(console.url + "/submit/run", headers=csrf(console), data={"name": "web.json", "chain": text})
    target = answer.headers["HX-Redirect"]
    saved = home / "web.json"
    assert saved.read_text() == text and stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert target.startswith(f"/run/{chain_id(str(saved))}/")
    wait_outcome(saved, shared_server, "succeeded")
    assert 'data-outcome="succeeded"' in requests.get(console.url + target).text
    other = requests.post(console.url + "/submit/run", headers=csrf(console),
                          data={"name": "web.json", "chain": text.replace('"replicas": 1', '"replicas": 2')})
    assert "exists with other contents" in other.text and "HX-Redirect" not in other.headers
    bad_name = requests.post(console.url + "/submit/check", headers=csrf(console),
                             data={"name": "../up.json", "chain": text})
    assert "file name" in bad_name.text


def test_two_quick_save_and_run_clicks_start_one_run(console: Console, home: Path, shared_server: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    text = json.dumps({"resourcePoolId": shared_server.pool,
                       "jobs": [{"name": "twice", "jobSpec": {"command": "sleep 30", "image": "local"},
                                 "datasources": [{"type": "pfs", "name": "pfs", "mountPath": str(home)}]}]})

    def click(_: int) -> requests.Response:
        return requests.post(console.url + "/submit/run", headers=csrf(console),
                             data={"name": "twice.json", "chain": text})

    with ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(pool.map(click, range(2)))
    started = [a for a in answers if "HX-Redirect" in a.headers]
    assert len(started) == 1, [a.text for a in answers]
    refused = next(a for a in answers if "HX-Redirect" not in a.headers)
    assert "is still going" in refused.text
    runs = [p for p in (home / "twice.json.runs").iterdir() if p.name[0] != "."]
    assert len(runs) == 1
    cli_here("stop", str(home / "twice.json"), server=shared_server)


def test_jobs_page_links_runs_and_shows_events(console: Console, home: Path, shared_server: Any) -> None:
    chain = chain_in(home, "jobs", [{"script": "exit 4\n"}], shared_server.pool)
    cli_here("run", str(chain), "--follow", server=shared_server)
    run_id = latest_run(chain)
    cid = chain_id(str(chain))
    jobs = requests.get(console.url + "/jobs").text
    assert f'href="/run/{cid}/{run_id}?step=step-0"' in jobs  # the job's step (by name) opens with its run
    job_id = first_job(chain, shared_server)
    page = requests.get(f"{console.url}/job/{cid}/{job_id}").text
    assert "Failed" in page and "step-0-master-0" in page and "exit" in page.lower()
    assert requests.get(f"{console.url}/job/{cid}/no-such-job").status_code == 404
    assert requests.get(f"{console.url}/run/{cid}/no-such-run").status_code == 404
    # issue 29 items 13 and 6: the step renamed and the run resumed, its old job still links its step, which the
    # run keeps as history (removed in revision 2), and no link leads to a step the run lacks
    data = json.loads(chain.read_text())
    data["jobs"][0]["name"] = "renamed"
    chain.write_text(json.dumps(data))
    cli_here("resume", str(chain), "--follow", server=shared_server)
    jobs = requests.get(console.url + "/jobs").text
    assert f'href="/run/{cid}/{run_id}?step=renamed"' in jobs
    assert f'href="/run/{cid}/{run_id}?step=step-0"' in jobs  # the old job: its step, in the run's history
    for step in re.findall(rf'href="/run/{cid}/{run_id}\?step=([^"]+)"', jobs):
        assert requests.get(f"{console.url}/fragment/step/{cid}/{run_id}/{step}").status_code == 200, step


def test_a_runs_job_page_uses_the_pool_the_run_froze_not_the_files_now(console: Console, home: Path,
                                                                         shared_server: Any) -> None:
    chain = chain_in(home, "moved", [{"script": "echo hi\n"}], shared_server.pool)
    cli_here("run", str(chain), "--follow", server=shared_server)
    run_id, cid, job_id = latest_run(chain), chain_id(str(chain)), first_job(chain, shared_server)
    data = json.loads(chain.read_text())
    chain.write_text(json.dumps(dict(data, resourcePoolId="pool-elsewhere")))  # edited after the run
    run_page = requests.get(f"{console.url}/run/{cid}/{run_id}").text
    assert f'href="/job/{cid}/{job_id}?run={run_id}"' in run_page
    page = requests.get(f"{console.url}/job/{cid}/{job_id}?run={run_id}")
    assert page.status_code == 200 and "Succeeded" in page.text and "step-0-master-0" in page.text


def test_clone_a_step_with_edits(console: Console, home: Path, shared_server: Any) -> None:
    chain = chain_in(home, "clone", [{"name": "prep", "script": "echo prep\n"},
                                     {"name": "train", "script": "echo train $SHARED\n", "retries": 2}],
                     shared_server.pool)
    (chain.parent / "chain_info.json.runs").mkdir()
    form = requests.get(f"{console.url}/submit?clone={chain_id(str(chain))}&step=1").text
    assert 'value="train-clone.json"' in form
    text = html.unescape(form.split('id="chain"', 1)[1].split(">", 1)[1].split("</textarea>", 1)[0])
    cloned = json.loads(text)
    assert [j["name"] for j in cloned["jobs"]] == ["train"] and cloned["resourcePoolId"] == shared_server.pool
    assert cloned["jobs"][0]["jobSpec"]["command"] == "echo train $SHARED\n"
    assert cloned["jobs"][0]["jobChain"] == {"retries": 2}
    edited = text.replace('"replicas": 1', '"replicas": 2')
    check = requests.post(console.url + "/submit/check", headers=csrf(console),
                          data={"name": "train-clone.json", "chain": edited})
    assert 'id="valid"' in check.text
    assert requests.get(f"{console.url}/submit?clone={chain_id(str(chain))}&step=7").status_code == 404


def test_session_log_tail_asks_the_api_for_only_those_lines(home: Path, shared_server: Any) -> None:
    from job_chain.session import ChainSession

    asked = []

    class Recording:
        """The real client, noting what each logs call asked for."""

        def __init__(self, client: Any) -> None:
            self.client = client
            self.endpoint = client.endpoint

        def __getattr__(self, name: str) -> Any:
            return getattr(self.client, name)

        def pod_logs(self, *args: Any, **kwargs: Any) -> Any:
            asked.append(kwargs.get("max_lines"))
            return self.client.pod_logs(*args, **kwargs)

    chain = chain_in(home, "sessiontail", [{"script": "seq 1 5000\n"}], shared_server.pool)
    cli_here("run", str(chain), "--follow", server=shared_server, check=True)
    session = ChainSession.from_file(str(chain), client=Recording(shared_server.client()))
    whole = session.log()
    assert session.log(tail=10) == "".join(whole.splitlines(True)[-10:])
    assert asked == [None, 10] and "\n5000\n" in whole


def test_console_request_view_redacts_secret_looking_envs(console: Console, home: Path, shared_server: Any) -> None:
    """The step's request, the job page and the log hide env values named *TOKEN*, *KEY*, ... (item 5)."""
    from test_newcomer import SECRET_ENVS, chain_with_envs

    from job_chain.util.redaction import REDACTED

    folder = home / "envsecrets"
    folder.mkdir()
    chain = chain_with_envs(folder)
    data = json.loads(chain.read_text())
    data["resourcePoolId"] = shared_server.pool
    (folder / "train.sh").write_text('echo "token is $HF_TOKEN"\n')
    chain.write_text(json.dumps(data))
    cli_here("run", str(chain), "--follow", server=shared_server, check=True)
    run_id, cid = latest_run(chain), chain_id(str(chain))
    step = html.unescape(requests.get(f"{console.url}/fragment/step/{cid}/{run_id}/0").text)
    assert '"name": "HF_TOKEN",\n' in step and REDACTED in step and '"value": "pretrain"' in step
    shown = step + requests.get(f"{console.url}/job/{cid}/{first_job(chain, shared_server)}").text
    shown += requests.get(f"{console.url}/fragment/log/{cid}/{run_id}/0").text
    shown += requests.get(f"{console.url}/download/log/{cid}/{run_id}/0").text
    assert "token is " + REDACTED in html.unescape(shown)
    for value in SECRET_ENVS.values():
        assert value not in shown


def test_console_messages_speak_of_the_console(home: Path, shared_server: Any, creds: None,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A console started with --local shows a cloud run (no "drop --local"), and refusals name the
    console's buttons and pages, not the CLI's commands and flags (item 17)."""
    from job_chain.errors import CredentialsMissing
    from job_chain.ui.pages import say

    chain = chain_in(home, "advice", [{"script": "sleep 60\n"}], shared_server.pool)
    cli_here("run", str(chain), server=shared_server, check=True)
    run_id, cid = latest_run(chain), chain_id(str(chain))
    served = Console([str(home)], local=True)
    try:
        page = requests.get(f"{served.url}/run/{cid}/{run_id}")
        assert page.status_code == 200 and 'data-outcome="running"' in page.text and "--local" not in page.text
        from job_chain.session import resume

        previews: List[str] = []
        real = resume.preview
        monkeypatch.setattr(resume, "preview", lambda ctx, run, *a, **kw: previews.append(run.run_id) or real(
            ctx, run, *a, **kw))
        busy = requests.post(f"{served.url}/action/{cid}/{run_id}/resume", headers={"X-CSRF-Token": served.guard.csrf})
        assert f"run {run_id} is still going: nothing was stopped or submitted; the chain file matches" in busy.text
        assert previews == [run_id]  # one look at the going run, which revises it
        missing = requests.get(f"{served.url}/run/{cid}/20990101-000000-abcd")
        assert missing.status_code == 404 and "Runs page lists" in missing.text
        for answer in (page, busy, missing):
            assert "job-chain stop" not in answer.text and "job-chain runs" not in answer.text
    finally:
        served.close()
        cli_here("stop", str(chain), server=shared_server, check=True)
    said = say(CredentialsMissing("no AIHC host: pass --host, set AIHC_HOST, use --credentials FILE"))
    assert "--host" not in said and "restart the console" in said
    resumed = say(JobChainError("boom. 'job-chain resume /x/c.json --run R' continues the run"))
    assert resumed == "boom. Resume on the run's page continues the run"


def test_timeline_ticks_say_where_they_are() -> None:
    """A quarter of a 3 s run is +0.75s, not a rounded +0.8s; long runs count in durations."""
    from job_chain.ui.views import _offset_label

    assert [_offset_label(k * 3 / 4, 3) for k in range(1, 5)] == ["+0.75s", "+1.5s", "+2.25s", "+3s"]
    assert [_offset_label(k / 4, 1) for k in range(1, 5)] == ["+0.25s", "+0.5s", "+0.75s", "+1s"]
    assert _offset_label(1800, 7200) == "+30m 00s"


def test_pages_of_a_local_run_never_start_its_stopped_server(console: Console, home: Path) -> None:
    """Looking is not acting: a page says the server is not running (as `status` does), and only
    an action (stop, resume) may start it."""
    from chain_helpers import RECORDED_RUN, diamond_jobs, recorded_run

    from job_chain.local import daemon

    state = str(home / "stopped-local-state")
    folder = home / "stopped-local"
    folder.mkdir()
    _, records = recorded_run(folder / "chain_info.json", "pool-local", diamond_jobs(), submitted="a")
    run = {k: v for k, v in records.get_run(RECORDED_RUN).items() if k not in ("id", "started")}
    records.create_run("20260101-000000-10ca", **dict(run, local=True, localStateDir=state))
    for name in ("revision-1.json", "step-a-attempt-1.json"):
        shutil.copy(os.path.join(records.directory(RECORDED_RUN), name), records.directory("20260101-000000-10ca"))
    cid = chain_id(str(folder / "chain_info.json"))
    for path in (f"/run/{cid}/20260101-000000-10ca", f"/fragment/run/{cid}/20260101-000000-10ca",
                 f"/fragment/step/{cid}/20260101-000000-10ca/a", f"/fragment/log/{cid}/20260101-000000-10ca/a",
                 f"/job/{cid}/job-a?run=20260101-000000-10ca"):
        answer = requests.get(console.url + path)
        assert answer.status_code in (200, 404, 502), (path, answer.status_code, answer.text[:300])
        assert "the local server is not running" in answer.text and "Traceback" not in answer.text, path
        assert "pages only show, so they do not start it (Stop run and Resume on the run&#39;s page do)" in answer.text
    with pytest.raises(JobChainError, match="the local server is not running"):
        daemon.local_credentials_file(start=False, state_dir=state)
    try:  # the user asked for an action: as in a terminal, that starts it
        requests.post(f"{console.url}/action/{cid}/20260101-000000-10ca/stop", headers=csrf(console), timeout=60)
        assert daemon.local_credentials_file(start=False, state_dir=state)
    finally:
        subprocess.run([sys.executable, "-m", "job_chain", "local", "stop", "--state-dir", state], timeout=60,
                       capture_output=True)


def test_check_and_submit_read_scripts_only_from_the_consoles_folder_and_never_wait_on_a_fifo(
        console: Console, home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "host-secret.sh"
    outside.write_text("echo a file of the console's host\n")
    fifo = home / "fifo-script.sh"
    os.mkfifo(fifo)  # reading it would block (every page, were it read on the event loop) until a writer came
    chain = {"resourcePoolId": "pool-x", "jobs": [
        {"name": "a", "jobSpec": {"scriptFile": str(outside), "image": "i"}},
        {"name": "b", "jobSpec": {"scriptFile": fifo.name, "image": "i"}}]}
    data = {"name": "fifo-chain.json", "chain": json.dumps(chain)}
    for action in ("check", "run"):
        answer = requests.post(f"{console.url}/submit/{action}", data=data, timeout=20,
                               headers={**csrf(console), "Origin": console.url})
        assert answer.status_code == 400
        assert "jobs[0].jobSpec.scriptFile" in answer.text and "not in the chain&#39;s directory" in answer.text
        assert "jobs[1].jobSpec.scriptFile" in answer.text and "is not a regular file" in answer.text
    assert not (home / "fifo-chain.json").exists()
