"""What every group of the console's routes shares: the catalog, the templates, and the lookups
that turn a URL's chain, run, step and attempt into objects (or a 404 page)."""

from __future__ import annotations

import os
import re
from typing import Any, List, Optional

import jinja2
from fastapi.responses import HTMLResponse

from job_chain.errors import JobChainError
from job_chain.session import ChainSession, Run
from job_chain.status.types import RunStatus, StepStatus, counts_text
from job_chain.ui import views
from job_chain.ui.catalog import Catalog, Entry
from job_chain.ui.security import Guard
from job_chain.util.redaction import env_secrets
from job_chain.util.safe_text import without_surrogates

HERE = os.path.dirname(os.path.abspath(__file__))
OUTCOMES = ("running", "succeeded", "failed", "stopped")
RUNS_PER_CHAIN = 50  # newest runs of each chain on the runs page


class NotFoundError(Exception):
    """A chain, run, step or job the URL names does not exist (a 404 page)."""


# what the library tells a terminal user to type, as a console user does it instead
_CLI_ADVICE = [
    (re.compile(r"'job-chain resume [^']*'"), "Resume on the run's page"),
    (re.compile(r"'job-chain stop [^']*'"), "Stop run on the run's page"),
    (re.compile(r"'job-chain (?:status|runs|logs) [^']*'"), "the run's page"),
    (re.compile(r"'job-chain run [^']*'"), "the Submit page"),
    (re.compile(r"this command only reads, so it does not start one"),
     "pages only show, so they do not start it (Stop run and Resume on the run's page do)"),
]


def say(exc: Exception) -> str:
    """An error's message as the console says it: in the console's words, not the CLI's flags."""
    from job_chain.errors import CredentialsMissing, RunNotFound, RunStillActive

    text = str(exc)
    if isinstance(exc, RunStillActive):
        head = re.match(r"run \S+ (?:of .+? )?is still going(?: \([^)]*\))?", text)
        return (head.group(0) if head else f"run {exc.run_id} is still going") + \
            ": its page (on the Runs page) follows it live and can stop it"
    if isinstance(exc, RunNotFound):
        return text.split(";")[0] + " (the Runs page lists the runs there are)"
    if isinstance(exc, CredentialsMissing):
        return (f"{text.split(':')[0]}: give the chain file an api_config (host, ak, sk), or restart the console "
                "with AIHC_HOST, AIHC_AK and AIHC_SK (or JOB_CHAIN_CREDENTIALS) in its environment")
    for pattern, words in _CLI_ADVICE:
        text = pattern.sub(words, text)
    return text


class Pages:
    """The console's templates and lookups, one per app (the route modules take it as their context)."""

    def __init__(self, catalog: Catalog, guard: Guard) -> None:
        self.catalog = catalog
        # Jinja2 directly (not Starlette's wrapper, whose signature changed across versions); autoescaped
        self.env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(HERE, "templates")),
                                      autoescape=jinja2.select_autoescape(["html"]), auto_reload=False)
        self.env.filters.update(tone=views.tone, duration=views.duration, when=views.when, rel=self.rel,
                                counts=counts_text)
        self.env.globals.update(csrf=guard.csrf, outcomes=OUTCOMES, run_duration=views.run_duration)

    def page(self, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        # pasted or stored text may hold a lone surrogate ("\udce9"), which UTF-8 cannot carry
        return HTMLResponse(without_surrogates(self.env.get_template(template).render(context)),
                            status_code=status_code)

    def rel(self, path: str) -> str:
        """A chain file's path relative to the console's directory it was found under."""
        for root in self.catalog.paths:
            if os.path.isdir(root) and path.startswith(root.rstrip(os.sep) + os.sep):
                return os.path.relpath(path, root)
        return path

    # -- lookups ---------------------------------------------------------------------------------
    def entry(self, cid: str) -> Entry:
        found = self.catalog.get(cid)
        if found is None:
            raise NotFoundError(f"no chain file with id {cid} under {', '.join(self.catalog.paths)}")
        if found.session is None:
            raise NotFoundError(found.error)
        return found

    @staticmethod
    def session(found: Entry) -> ChainSession:
        """The chain's session for pages: it reports a stopped local server, never starts it."""
        assert found.session is not None  # entry() returns only chains that opened
        return found.session

    @staticmethod
    def acting_session(found: Entry) -> ChainSession:
        """A session for an action the user asked for (stop, resume): it starts a stopped local
        server, as the same command in a terminal does."""
        return ChainSession.from_file(found.path, strict=False)

    def run_of(self, found: Entry, run_id: str) -> Run:
        try:
            return self.session(found).run(run_id)
        except JobChainError as exc:
            raise NotFoundError(say(exc)) from None

    @staticmethod
    def step_of(status: RunStatus, key: str) -> StepStatus:
        """The step a URL names: by its name (``?step=train``), or by its number (``?step=2``)."""
        for step in status.steps:
            if step.name == key or (key.isdigit() and step.index == int(key)):
                return step
        raise NotFoundError(f"run {status.run_id} has no step {key!r}")

    @staticmethod
    def pick_attempt(step: StepStatus, attempt: Optional[int]) -> Any:
        if not step.attempts and not step.history:
            return None
        tries = {a.attempt: a for a in step.history + step.attempts}
        return tries.get(attempt if attempt is not None else max(tries)) or tries[max(tries)]

    def secrets_of(self, found: Entry, run: Optional[Run] = None) -> List[str]:
        """The strings never shown: the chain's SK and session token and its steps' secret-looking env values (of the
        file when it can be read, and of the run's frozen chain)."""
        session = self.session(found)
        chains = [session.chain] if session.chain_problem is None else []
        keys: List[Optional[str]] = [s for c in chains for s in c.secrets]
        if run is not None:
            try:
                chains.append(session.frozen(run))
            except JobChainError:
                pass
            carried = session.records.credentials(run.run_id)
            keys += [carried.get("sk"), carried.get("sessionToken")]
        bodies = [step.body for chain in chains for step in chain.steps]
        return sorted({s for s in keys + env_secrets(bodies) if s})

    def pool_of(self, found: Entry) -> Optional[str]:
        """The chain's pool: the file's, else (a broken or missing file) its newest run's."""
        session = self.session(found)
        if session.chain_problem is None:
            return session.chain.pool
        runs = session.runs()
        try:
            return session.frozen(runs[0]).pool if runs else None
        except JobChainError:
            return None

    def pool_client(self, found: Entry) -> Any:
        """A client for the chain's pool: where its newest run runs (else where a new one would)."""
        session = self.session(found)
        runs = session.runs()
        if runs:
            return session.client_for(runs[0])
        return ChainSession(session.chain, local=self.catalog.local, start_local=False).client_for(None)

    def located(self, cid: str, run_id: str, key: str, attempt: Optional[int] = None) -> Any:
        """(entry, run, step, chosen attempt) a step URL names, each a 404 when it does not exist."""
        found = self.entry(cid)
        run = self.run_of(found, run_id)
        step = self.step_of(self.catalog.status(found, run.run_id), key)
        return found, run, step, self.pick_attempt(step, attempt)
