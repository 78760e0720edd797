"""A cached step in the web console, in a real headless Chromium against the real local server: its
row says Cached, and its panel says where its success came from, with a link to that run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chain_helpers import cli_here, latest_run, make_chain
from test_ui_browser import _cid, attr, browser, console, css, home, shot, wait_for  # noqa: F401 - fixtures
from ui_helpers import Console, chromium_available

pytestmark = pytest.mark.skipif(not chromium_available(),
                                reason="needs Debian's chromium and chromium-driver (make browser installs them)")


def test_a_cached_step_shows_where_its_success_came_from(console: Console, browser: Any,  # noqa: F811
                                                        home: Path, shared_server: Any,  # noqa: F811
                                                        tmp_path: Path) -> None:
    import json

    folder = home / "cached"
    folder.mkdir()
    chain = make_chain(folder, [{"name": "convert-llama-9b-to-megatron", "script": "echo converted\n"},
                                {"name": "train", "script": "echo trained\n"}], shared_server.pool)
    data = json.loads(chain.read_text())
    data["jobs"][0]["jobChain"] = {"cache": True}
    chain.write_text(json.dumps(data))
    cli_here("run", str(chain), "--follow", server=shared_server, check=True)
    first = latest_run(chain)
    cli_here("run", str(chain), "--follow", server=shared_server, check=True)
    second = latest_run(chain)
    browser.get(f"{console.url}/run/{_cid(chain)}/{second}")
    wait_for(browser, lambda b: attr(b, "#step-row-0", "data-status") == "Cached")
    assert "ok" in css(browser, "#step-row-0 .chip").get_attribute("class")
    assert f"reused the success of run {first}" in css(browser, "#step-row-0 .reason").text
    browser.execute_script("document.querySelector('#step-row-0 a').click();")
    wait_for(browser, lambda b: b.find_elements("css selector", "#cached-from"))
    reused = css(browser, "#cached-from")
    assert f"run {first}" in reused.text and "attempt 1" in reused.text
    link = reused.find_element("css selector", "a").get_attribute("href")
    assert link.endswith(f"/run/{_cid(chain)}/{first}?step=convert-llama-9b-to-megatron")
    shot(browser, tmp_path, "cached-step")
