"""The web console in a real headless Chromium (Selenium), against a real local AIHC server.

One browser and one console for the module; each test writes its own chain under the console's
directory and starts runs with the real CLI. Screenshots go to the test's tmp dir.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest
from chain_helpers import EXAMPLES, cli, latest_run, make_chain, wait_outcome
from ui_helpers import Console, chromium, chromium_available, start_run

pytestmark = pytest.mark.skipif(not chromium_available(),
                                reason="needs Debian's chromium and chromium-driver (make browser installs them)")

WAIT = 40  # seconds a page has to show what a test waits for (runs take a few seconds)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-home")


@pytest.fixture(scope="module")
def console(home: Path, shared_server: Any) -> Iterator[Console]:
    old = os.environ.get("JOB_CHAIN_CREDENTIALS")
    os.environ["JOB_CHAIN_CREDENTIALS"] = shared_server.credentials_file
    served = Console([str(home)])
    yield served
    served.close()
    if old is None:
        os.environ.pop("JOB_CHAIN_CREDENTIALS", None)
    else:
        os.environ["JOB_CHAIN_CREDENTIALS"] = old


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver = chromium(tmp_path_factory.mktemp("chromium-profile"))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def wait_for(browser: Any, condition: Any, timeout: float = WAIT) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout, poll_frequency=0.2).until(condition)


def attr(browser: Any, selector: str, name: str) -> Any:
    """An attribute read in one script: live fragments may be swapped between two WebDriver calls."""
    return browser.execute_script(
        "var e = document.querySelector(arguments[0]); return e ? e.getAttribute(arguments[1]) : null;",
        selector, name)


def css(browser: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, selector)


def shot(browser: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    browser.save_screenshot(str(path))
    return path


def chain_in(home: Path, name: str, steps: Any, pool: str) -> Path:
    folder = home / name
    folder.mkdir()
    return make_chain(folder, steps, pool)


def test_run_page_goes_live_without_reload(console: Console, browser: Any, home: Path, shared_server: Any,
                                            tmp_path: Path) -> None:
    chain = chain_in(home, "live", [{"script": "sleep 2; echo one\n"}, {"script": "echo two\n"}], shared_server.pool)
    run_id = start_run(chain, shared_server)
    cid = _cid(chain)
    browser.get(f"{console.url}/run/{cid}/{run_id}")
    browser.execute_script("window.__sameDocument = 'yes';")  # gone if the page reloads
    assert attr(browser, "#step-row-1", "data-status") != "Succeeded"
    wait_for(browser, lambda b: attr(b, "#step-row-1", "data-status") == "Succeeded")
    wait_for(browser, lambda b: attr(b, "#outcome", "data-outcome") == "succeeded")
    assert browser.execute_script("return window.__sameDocument;") == "yes"
    assert "ok" in attr(browser, "#node-0", "class")
    shot(browser, tmp_path, "run-succeeded")

    browser.get(console.url + "/")
    wait_for(browser, lambda b: b.find_elements("css selector", f"tr[data-run='{run_id}']"))
    assert attr(browser, f"tr[data-run='{run_id}']", "data-outcome") == "succeeded"
    assert "live/chain_info.json" in browser.execute_script(
        f"return document.querySelector(\"tr[data-run='{run_id}']\").innerText;")
    shot(browser, tmp_path, "runs")


def test_stop_from_the_page_then_filter_runs(console: Console, browser: Any, home: Path, shared_server: Any,
                                             tmp_path: Path) -> None:
    from selenium.webdriver.support.ui import Select

    chain = chain_in(home, "stopme", [{"script": "sleep 120\n"}, {"script": "echo never\n"}], shared_server.pool)
    run_id = start_run(chain, shared_server)
    row = f"tr[data-run='{run_id}']"
    runs_tab = browser.current_window_handle
    browser.get(console.url + "/")  # the runs page stays open in this tab and must follow the stop live
    wait_for(browser, lambda b: attr(b, row, "data-outcome") == "running")
    browser.execute_script("window.__sameDocument = 'yes';")
    browser.switch_to.new_window("tab")
    browser.get(f"{console.url}/run/{_cid(chain)}/{run_id}")
    wait_for(browser, lambda b: b.find_elements("css selector", "#stop"))
    css(browser, "#stop").click()
    alert = wait_for(browser, lambda b: b.switch_to.alert)
    assert run_id in alert.text
    alert.accept()
    wait_for(browser, lambda b: attr(b, "#outcome", "data-outcome") == "stopped")
    assert "stopped" in css(browser, "#message").text
    shot(browser, tmp_path, "run-stopped")
    wait_outcome(chain, shared_server, "stopped")  # the CLI agrees
    browser.close()
    browser.switch_to.window(runs_tab)
    wait_for(browser, lambda b: attr(b, row, "data-outcome") == "stopped")
    assert browser.execute_script("return window.__sameDocument;") == "yes"

    Select(css(browser, "#outcome")).select_by_value("stopped")
    wait_for(browser, lambda b: b.execute_script(
        "var rows = document.querySelectorAll('tr.run-row'); return rows.length > 0 && "
        "Array.prototype.every.call(rows, function (r) { return r.dataset.outcome === 'stopped'; }) && "
        f"!!document.querySelector(\"{row}\");"))
    Select(css(browser, "#outcome")).select_by_value("succeeded")
    wait_for(browser, lambda b: not b.find_elements("css selector", row))


def test_import_a_chain_with_a_mistake(console: Console, browser: Any, home: Path, shared_server: Any,
                                       tmp_path: Path) -> None:
    (home / "step.sh").write_text("echo hi\n")
    bad = {"resourcePoolId": shared_server.pool,
           "jobs": [{"name": "prep", "jobSpec": {"command": "step.sh", "image": "local", "replicas": "two"}}]}
    upload = tmp_path / "mistake.json"
    upload.write_text(json.dumps(bad, indent=2))
    browser.get(console.url + "/submit")
    css(browser, "#import").send_keys(str(upload))
    wait_for(browser, lambda b: b.find_elements("css selector", "#invalid"))
    line = css(browser, ".jl.bad[data-path='jobs[0].jobSpec.replicas']")
    assert "replicas" in line.text and "jobs[0].jobSpec.replicas:" in line.text
    assert css(browser, "#name").get_attribute("value") == "mistake.json"
    shot(browser, tmp_path, "submit-problem")
    assert not (home / "mistake.json").exists()  # nothing saved


def test_training_loss_chart_from_the_log(console: Console, browser: Any, home: Path, shared_server: Any,
                                          tmp_path: Path) -> None:
    train = ("for i in $(seq 1 30); do echo \" iteration $i/ 30 | learning rate: $i.0E-05 | "
             "lm loss: $((40 - i)).5E-01 | throughput per GPU (TFLOP/s/GPU): $((150 + i % 7)).0\"; sleep 0.05; done\n")
    chain = chain_in(home, "train", [{"name": "prepare", "script": "echo data ready\n"},
                                     {"name": "pretrain", "script": train},
                                     {"name": "evaluate", "script": "echo eval done\n"}], shared_server.pool)
    cli("run", str(chain), "--follow", server=shared_server, check=True)
    run_id = latest_run(chain)
    browser.get(f"{console.url}/run/{_cid(chain)}/{run_id}?step=1")
    wait_for(browser, lambda b: b.find_elements("css selector", "#curves .chart[data-title='loss'] canvas"))
    canvas = css(browser, "#curves .chart[data-title='loss'] canvas")
    assert canvas.size["width"] > 200 and canvas.size["height"] > 100
    # uPlot drew a line: the canvas has non-blank pixels in the loss series' colour
    drawn = browser.execute_script(
        "var c = arguments[0], d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, n = 0;"
        "for (var i = 0; i < d.length; i += 4) if (d[i] < 80 && d[i+1] < 140 && d[i+2] > 200) n++; return n;", canvas)
    assert drawn > 50
    wait_for(browser, lambda b: "lm loss: 10.5E-01" in css(b, "#log-text").text)
    assert attr(browser, "#curves", "data-drawn") == "3"  # loss, learning rate, throughput
    wait_for(browser, lambda b: attr(b, "#metrics", "data-drawn") is not None)
    shot(browser, tmp_path, "run-page")
    browser.execute_script("document.getElementById('curves').scrollIntoView();")
    shot(browser, tmp_path, "loss-chart")


def test_dag_run_page_draws_columns_edges_and_the_exit_handler(console: Console, browser: Any, home: Path,
                                                                shared_server: Any, tmp_path: Path) -> None:
    demo = home / "dag"
    shutil.copytree(EXAMPLES / "dag", demo)
    chain = demo / "chain_info.json"
    data = json.loads(chain.read_text().replace("/tmp/job-chain-dag", str(tmp_path / "pfs"))
                      .replace("your-resource-pool-id", shared_server.pool))
    data.pop("notify")  # nothing to tell; the run succeeds
    chain.write_text(json.dumps(data))
    cli("run", str(chain), "--follow", server=shared_server, check=True)
    browser.get(f"{console.url}/run/{_cid(chain)}/{latest_run(chain)}")
    wait_for(browser, lambda b: attr(b, "#outcome", "data-outcome") == "succeeded")
    graph = browser.execute_script(
        "var g = document.getElementById('graph'), q = function (s) { return g.querySelectorAll(s); };"
        "return {nodes: q('circle.node').length, edges: Array.prototype.map.call(q('path.edge'), function (e) {"
        "  return e.dataset.from + '>' + e.dataset.to; }).sort(), arrows: q('path.edge[marker-end]').length,"
        "  handler: q('circle.node.handler').length, box: q('rect.handlers').length, skipped: q('a.skipped').length,"
        "  notes: Array.prototype.map.call(q('text.note'), function (t) { return t.textContent; }),"
        "  cx: Array.prototype.map.call(q('circle.node'), function (c) { return +c.getAttribute('cx'); })};")
    assert graph["nodes"] == 7  # prep, train, three evals, report; the failure handler apart
    assert graph["edges"] == sorted(["0>1", "1>2", "1>3", "1>4", "2>5", "3>5", "4>5"])
    assert graph["arrows"] == 7 and graph["handler"] == 1 and graph["box"] == 1
    assert graph["skipped"] == 0 and graph["notes"] == ["after the run (failure)"]
    assert len(set(graph["cx"])) == 5  # four columns by depth, the handler's column after them
    assert "ok" in attr(browser, "#node-5", "class")
    assert attr(browser, "#node-6", "data-status") == "not submitted"  # nothing failed: the handler never ran
    shot(browser, tmp_path, "run-dag")


def test_a_sweep_submitted_with_params_shows_its_matrix_params_and_outputs(
        console: Console, browser: Any, home: Path, shared_server: Any, tmp_path: Path) -> None:
    text = json.dumps({"resourcePoolId": shared_server.pool, "params": {"tag": "base"}, "jobs": [
        {"name": "prep", "jobSpec": {"image": "local", "command": "echo ckpt=/pfs/$JOB_CHAIN_PARAM_TAG >> "
                                                                  "$JOB_CHAIN_OUTPUTS"}},
        {"name": "train", "jobSpec": {"image": "local",
                                      "command": "echo lr ${matrix.lr} from ${steps.prep.outputs.ckpt}"},
         "jobChain": {"dependsOn": ["prep"], "matrix": {"lr": ["1e-4", "3e-4", "1e-3"]}, "maxParallel": 2}}]})
    browser.get(console.url + "/submit")
    browser.execute_script("document.getElementById('chain').value = arguments[0];"
                           "document.getElementById('name').value = 'sweep.json';"
                           "document.getElementById('params').value = 'tag=v2';", text)
    css(browser, "#run-btn").click()
    wait_for(browser, lambda b: b.switch_to.alert).accept()
    try:
        wait_for(browser, lambda b: "/run/" in b.current_url)
    finally:
        shot(browser, tmp_path, "sweep-submit")
    wait_for(browser, lambda b: attr(b, "#outcome", "data-outcome") == "succeeded")
    assert "tag=v2" in css(browser, "#params").text
    wait_for(browser, lambda b: "3 ✓" in css(b, "#group-train").text)
    assert "train ×3" in css(browser, "#group-train").text
    hidden = "return Array.prototype.filter.call(document.querySelectorAll('tr.point-row'), function (r) {" \
             " return r.offsetParent !== null; }).length;"
    assert browser.execute_script(hidden) == 0  # collapsed: all succeeded, nothing needs attention
    css(browser, "#group-train button.expand").click()
    wait_for(browser, lambda b: b.execute_script(hidden) == 3)
    assert "train[lr=3e-4]" in css(browser, "#step-row-2").text
    browser.execute_script("document.getElementById('outputs').scrollIntoView();")
    wait_for(browser, lambda b: "/pfs/v2" in css(b, "#outputs").text)
    browser.refresh()  # the points stay shown across reloads and live refreshes
    wait_for(browser, lambda b: b.execute_script(hidden) == 3)
    shot(browser, tmp_path, "sweep")


def _cid(chain: Path) -> str:
    from job_chain.ui.catalog import chain_id

    return chain_id(str(chain))
