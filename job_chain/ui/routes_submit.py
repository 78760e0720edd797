"""The Submit page: paste or import a chain, check it (problems at their JSON path), save and run
it; and a step's job cloned into the form as a one-step chain."""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any, Dict, Optional

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from job_chain.errors import JobChainError
from job_chain.session import ChainSession
from job_chain.ui import views
from job_chain.ui.pages import NotFoundError, Pages, say
from job_chain.util.redaction import redact

MAX_SUBMIT = 1 << 20  # bytes of pasted chain JSON accepted
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,80}\.json$")


async def read_form(request: Request) -> Dict[str, str]:
    """htmx posts forms url-encoded: the standard library reads them (bounded)."""
    from urllib.parse import parse_qs

    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > 2 * MAX_SUBMIT:
            break
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}


def _differs(path: str, text: str) -> bool:
    """Whether ``path`` exists with other contents than ``text`` (read bounded, never blocking on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return False
    except OSError:
        return True
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return True
        return handle.read(2 * MAX_SUBMIT + 1).decode("utf-8", "replace") != text


def register(app: FastAPI, pages: Pages) -> None:
    catalog = pages.catalog

    @app.get("/submit", response_class=HTMLResponse)
    def submit_page(request: Request, clone: str = "", step: Optional[str] = None,
                    run: Optional[str] = None) -> HTMLResponse:
        """The submit form; ``?clone=CHAIN&step=NAME`` (or its number) fills it with that step's job
        as a one-step chain: as the chain file has it, or with ``&run=RUN`` as that run ran it."""
        text, name = "", "chain.json"
        if clone and step is not None:
            found = pages.entry(clone)
            session = pages.session(found)
            chain = session.frozen(pages.run_of(found, run)) if run else session.chain
            chosen = chain.find(step)
            if chosen is None:
                raise NotFoundError(f"{found.path} has no step {step!r}")
            job = dict(chosen.body, jobSpec=dict(chosen.body["jobSpec"], command=chosen.script))
            settings = {k: v for k, v in chosen.settings_raw.items() if k in ("retries", "metrics")}
            if settings:
                job["jobChain"] = settings
            text = json.dumps({"resourcePoolId": chain.pool, "jobs": [job]}, indent=2, ensure_ascii=False)
            name = re.sub(r"[^A-Za-z0-9._-]", "-", f"{chosen.name}-clone.json").lstrip(".-") or "clone.json"
        return pages.page("submit.html", home=catalog.home, text=text, name=name)

    def check_submission(text: str, name: str, params: str = "") -> Dict[str, Any]:
        """Parse and validate pasted chain JSON as if it were ``home/name`` (and the run's parameters,
        ``NAME=VALUE`` lines); problems at their path."""
        from job_chain.spec.loader import ChainFileError, check_chain_data
        from job_chain.spec.params import parse_param_args, resolve_params
        from job_chain.util.jsonfile import parse_json

        result: Dict[str, Any] = {"lines": [], "loose": [], "problems": [], "warnings": [], "name": name,
                                  "chain": None, "path": "", "params": {}}
        if not _FILE_NAME.match(name):
            result["loose"].append(f"file name {name!r}: use letters, digits, . _ - and end in .json")
            return result
        path = os.path.join(catalog.home, name)
        result["path"] = path
        if len(text.encode("utf-8")) > MAX_SUBMIT:
            result["loose"].append(f"the chain is larger than {MAX_SUBMIT // 1024} KiB")
            return result
        try:
            data = parse_json(text, name)
        except JobChainError as exc:
            result["loose"].append(say(exc))
            return result
        if not isinstance(data, dict):
            result["loose"].append(f"{name}: a chain file holds one JSON object, not a {type(data).__name__}")
            return result
        found = data.get("api_config")
        api: Dict[str, Any] = found if isinstance(found, dict) else {}
        secrets = [api[k] for k in ("sk", "sessionToken") if isinstance(api.get(k), str) and api[k]]
        lines = views.json_lines(redact(data, secrets))
        try:
            chain = check_chain_data(data, path, local=catalog.local)
            result["params"] = parse_param_args(line.strip() for line in params.splitlines() if line.strip())
            resolve_params(chain.params, result["params"], name)
            result["chain"] = chain
            result["warnings"] = list(chain.warnings)
        except ChainFileError as exc:
            result["problems"] = list(exc.problems)
            result["loose"] = views.annotate(lines, exc.problems)
        except JobChainError as exc:  # the parameters
            result["loose"].append(say(exc))
        result["lines"] = lines
        return result

    def checked(result: Dict[str, Any]) -> HTMLResponse:
        """The check's report: 400 when the chain has problems (the page swaps it in all the same)."""
        bad = result["chain"] is None or bool(result["loose"])
        return pages.page("_check.html", 400 if bad else 200, **result, started=None)

    @app.post("/submit/check", response_class=HTMLResponse)
    async def submit_check(request: Request) -> HTMLResponse:
        form = await read_form(request)
        # off the event loop: validating reads script files and walks a chain of up to 1 MiB
        result = await run_in_threadpool(check_submission, str(form.get("chain") or ""),
                                         str(form.get("name") or "chain.json").strip(), str(form.get("params") or ""))
        return checked(result)

    @app.post("/submit/run", response_class=HTMLResponse)
    async def submit_run(request: Request) -> HTMLResponse:
        from job_chain.util.files import write_private

        form = await read_form(request)
        text = str(form.get("chain") or "")
        result = await run_in_threadpool(check_submission, text, str(form.get("name") or "chain.json").strip(),
                                         str(form.get("params") or ""))
        if result["chain"] is None or result["loose"]:
            return checked(result)
        path = result["path"]
        if await run_in_threadpool(_differs, path, text):
            result["loose"].append(f"{path} exists with other contents: choose another file name")
            return pages.page("_check.html", **result, started=None)
        if not os.path.exists(path):
            write_private(path, text)
        try:
            session = await run_in_threadpool(ChainSession.from_file, path, local=catalog.local)
            run = await run_in_threadpool(lambda: session.start(params=result["params"]))
        except JobChainError as exc:
            result["loose"].append(say(exc))
            return pages.page("_check.html", **result, started=None)
        found = catalog.add(path)
        response = pages.page("_check.html", **result, started=(found.id, run.run_id))
        response.headers["HX-Redirect"] = f"/run/{found.id}/{run.run_id}"
        return response
