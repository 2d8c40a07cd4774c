"""The dashboard's Starlette app: server-rendered pages, POST-only actions, an
event stream that tells open pages to refresh their live part."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..api import QueueConsumer, Store
from ..cli.selection import RedrivePlan, carry_out
from ..errors import (
    AlkstoreError,
    EngineUnavailable,
    InvalidName,
    InvalidOptions,
    ProfileUnavailable,
)
from ..values import QueueStats
from . import views
from .pulse import Pulse
from .security import CSRF_COOKIE, CSRF_FIELD, Access, Csrf, redact_url, scrub, url_secrets

log = logging.getLogger("alkstore.dashboard")

Authorize = Callable[[Request], "Access | None"]
"""The hook that decides what a request may do: ``"write"``, ``"read"`` or ``None``
(refused). Given the Starlette ``Request``: read the app's own session, a header,
the client's address."""

PARTIAL_HEADER = "x-alkstore-partial"
"""Sent by the page script when it fetches only a page's live part."""
KEEPALIVE_S = 15.0
PROFILE_NEEDS = {
    "ops": "stats, job pages, redrive, purge, pause and resume (contract §11)",
    "scheduler": "schedules (contract §5)",
    "workers": "the live workers and the jobs they hold (contract 1.2 §19)",
}
SECURITY_HEADERS = {
    # Escaping is the defence; the policy is the second line: no inline script runs.
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
_RANK = {"read": 1, "write": 2}


def _version() -> str:
    try:
        return version("alkstore")
    except PackageNotFoundError:  # run from a source tree
        return "dev"


class Dashboard:
    """What every request of one dashboard shares: the store, the hook, the templates."""

    def __init__(
        self,
        store: Store,
        authorize: Authorize,
        *,
        read_only: bool,
        url: str | None,
        poll_s: float,
        challenge: str | None,
        csrf: Csrf,
    ) -> None:
        self.store = store
        self.authorize = authorize
        self.read_only = read_only
        self.store_label = redact_url(url) if url else type(store).__name__
        self.secrets = url_secrets(url) if url else ()
        self.challenge = challenge
        self.csrf = csrf
        self.pulse = Pulse(store, poll_s)
        self.env = Environment(
            loader=PackageLoader("alkstore.dashboard", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["stamp"] = views.stamp
        self.env.filters["age"] = views.age
        self.env.filters["payload"] = views.payload_text
        self.env.filters["sparkline"] = views.sparkline
        self.version = _version()

    # -- access -------------------------------------------------------------------
    def access(self, request: Request) -> Access | None:
        granted = self.authorize(request)
        if granted not in (None, "read", "write"):
            raise TypeError(f"authorize returned {granted!r}: want 'read', 'write' or None")
        if granted == "write" and self.read_only:
            return "read"
        return granted

    def require(self, request: Request, need: Access) -> Access:
        granted = self.access(request)
        if granted is None:
            headers = {"www-authenticate": self.challenge} if self.challenge else None
            status = 401 if self.challenge else 403
            raise HTTPException(status, "You are not allowed to see this dashboard.", headers)
        if _RANK[granted] < _RANK[need]:
            raise HTTPException(403, "This dashboard is read-only for you.")
        return granted

    def check_csrf(self, request: Request, form: Any) -> None:
        if not self.csrf.valid(request.cookies.get(CSRF_COOKIE), form.get(CSRF_FIELD)):
            raise HTTPException(403, "The form's CSRF token is missing or stale: reload the page.")

    # -- reading -------------------------------------------------------------------
    def stats(self, request: Request) -> tuple[QueueStats, ...]:
        """Every queue's stats: a page's live part (fetched because the pulse just read
        a change) shares the pulse's read; a whole page reads afresh."""
        if request.headers.get(PARTIAL_HEADER) == "1":
            return self.pulse.shared.read()
        started = self.pulse.shared.clock()
        value = tuple(self.store.stats())
        self.pulse.shared.offer(value, started)
        return value

    def queue_stats(self, request: Request, queue: QueueConsumer) -> QueueStats:
        """One queue's stats, shared as ``stats`` is when the shared read lists it."""
        if request.headers.get(PARTIAL_HEADER) == "1":
            for stats in self.pulse.shared.read():
                if stats.queue == queue.name:
                    return stats
        return queue.stats()

    # -- rendering ----------------------------------------------------------------
    def path(
        self, request: Request, name: str, query: dict[str, Any] | None = None, **params: Any
    ) -> str:
        base = request.scope.get("root_path", "") + str(request.app.url_path_for(name, **params))
        kept = {k: v for k, v in (query or {}).items() if v not in (None, "")}
        return f"{base}?{urlencode(kept)}" if kept else base

    def render(
        self,
        request: Request,
        template: str,
        context: dict[str, Any],
        access: Access | None,
        status: int = 200,
    ) -> Response:
        cookie = request.cookies.get(CSRF_COOKIE)
        fresh = cookie is None
        if cookie is None:
            cookie = self.csrf.new_cookie()
        partial = request.headers.get(PARTIAL_HEADER) == "1" and "live" in context
        values = {
            "request": request,
            "url": lambda name, query=None, **params: self.path(request, name, query, **params),
            "can_write": access == "write",
            "read_only": self.read_only,
            "access": access,
            "csrf_field": CSRF_FIELD,
            "csrf_token": self.csrf.token(cookie),
            "store_label": self.store_label,
            "version": self.version,
            **context,
        }
        name = context["live"] if partial else template
        body = self.env.get_template(name).render(values)
        response = HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)
        if fresh:
            response.set_cookie(
                CSRF_COOKIE,
                cookie,
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",
                path=(request.scope.get("root_path", "") or "") + "/",
            )
        return response

    def problem(self, request: Request, status: int, title: str, detail: str) -> Response:
        try:
            access = self.access(request)
        except Exception:  # the hook itself failed: show nothing that needs it
            access = None
        context = {"title": title, "detail": scrub(detail, self.secrets), "status": status}
        response = self.render(request, "problem.html", context, access, status)
        if status == 401 and self.challenge:
            response.headers["www-authenticate"] = self.challenge
        return response


Endpoint = Callable[[Request], Awaitable[Response]]


def create_app(
    store: Store,
    *,
    authorize: Authorize,
    read_only: bool = False,
    url: str | None = None,
    poll_s: float = 2.0,
    challenge: str | None = None,
    csrf_secret: bytes | None = None,
) -> Starlette:
    """The dashboard of ``store`` as an ASGI app, to mount under any path.

    Args:
        store: the open store it shows and acts on (the caller closes it).
        authorize: decides each request's access: ``"write"``, ``"read"`` or ``None``
            (refused). There is no default: a dashboard is closed until its host says
            who may see it.
        read_only: no actions for anyone, whatever ``authorize`` grants.
        url: the store's URL, shown with its password and secret parameters
            hidden (and hidden in any error message that quotes them).
        poll_s: how often open pages re-read the store when nothing wakes them.
        challenge: a ``WWW-Authenticate`` value for refused requests (HTTP Basic);
            without one a refusal is a plain 403.
        csrf_secret: the key of the CSRF tokens (default: random per app; give the
            same to every process behind one load balancer).
    """
    dash = Dashboard(
        store,
        authorize,
        read_only=read_only,
        url=url,
        poll_s=poll_s,
        challenge=challenge,
        csrf=Csrf(csrf_secret),
    )

    def page(need: Access) -> Callable[[Callable[[Request, Access], Response]], Endpoint]:
        """A sync page body run in the thread pool, behind the access check, with the
        contract's errors shown as pages (never a stack trace)."""

        def wrap(body: Callable[[Request, Access], Response]) -> Endpoint:
            async def endpoint(request: Request) -> Response:
                granted = dash.require(request, need)
                if request.method == "POST":
                    form = await _form(request)
                    dash.check_csrf(request, form)
                    request.state.form = form
                try:
                    return await run_in_threadpool(body, request, granted)
                except ProfileUnavailable as exc:
                    return _missing(request, granted, exc)
                except (InvalidName, InvalidOptions) as exc:
                    return dash.problem(request, 400, "Not a valid request", str(exc))
                except EngineUnavailable as exc:
                    return dash.problem(request, 503, "The store cannot be reached", str(exc))
                except AlkstoreError as exc:
                    return dash.problem(request, 409, "The store refused", str(exc))

            endpoint.__name__ = body.__name__
            return endpoint

        return wrap

    def _missing(request: Request, access: Access, exc: ProfileUnavailable) -> Response:
        context = {
            "detail": scrub(str(exc), dash.secrets),
            "needs": PROFILE_NEEDS,
            "title": "Not available on this engine",
        }
        return dash.render(request, "missing.html", context, access, status=501)

    @page("read")
    def overview(request: Request, access: Access) -> Response:
        stats = dash.stats(request)
        context = {
            "stats": stats,
            "throughput": views.throughput_by_queue(dash.store),
            "live": "overview_live.html",
            "title": "Queues",
        }
        return dash.render(request, "overview.html", context, access)

    @page("read")
    def queue_page(request: Request, access: Access) -> Response:
        name = _queue_name(request.query_params.get("name"))
        queue = views.handle(dash.store, name)
        state = request.query_params.get("state", "pending")
        if state not in views.STATES:
            raise InvalidOptions(f"state must be one of {', '.join(views.STATES)}, got {state!r}")
        before = _cursor(request)
        text = request.query_params.get("q", "")
        found = (
            views.search(queue, state, text, before)
            if text
            else views.job_page(queue, state, before)
        )
        context = {
            "queue": name,
            "stats": dash.queue_stats(request, queue),
            "state": state,
            "states": views.STATES,
            "q": text,
            "before": None if before == views.TOP else before,
            "page": found,
            "live": "queue_live.html",
            "title": f"Queue {name}",
        }
        return dash.render(request, "queue.html", context, access)

    @page("read")
    def job_page(request: Request, access: Access) -> Response:
        job_id = request.path_params["job_id"]
        job = views.handle(dash.store, views.LOOKUP_QUEUE).get_job(job_id)
        if job is None:
            return dash.problem(
                request,
                404,
                "No such job",
                f"No job has id {job_id} (acked, cancelled, purged or never issued).",
            )
        context = {
            "job": job,
            "graph": views.job_graph(dash.store, job),
            "live": "job_live.html",
            "title": f"Job {job.id}",
        }
        return dash.render(request, "job.html", context, access)

    @page("read")
    def dead_page(request: Request, access: Access) -> Response:
        name = _queue_name(request.query_params.get("queue"))
        queue = views.handle(dash.store, name)
        error = request.query_params.get("error", "")
        before = _cursor(request)
        found = views.search_dead(queue, error, before)
        context = {
            "queue": name,
            "stats": dash.queue_stats(request, queue),
            "error": error,
            "page": found,
            "before": None if before == views.TOP else before,
            "notice": request.query_params.get("notice", ""),
            "live": "dead_live.html",
            "title": f"Dead letters of {name}",
        }
        return dash.render(request, "dead.html", context, access)

    @page("write")
    def confirm_page(request: Request, access: Access) -> Response:
        name = _queue_name(request.query_params.get("queue"))
        action = request.query_params.get("action", "")
        if action not in ("redrive", "purge"):
            raise InvalidOptions(f"action must be redrive or purge, got {action!r}")
        queue = views.handle(dash.store, name)
        error = request.query_params.get("error", "")
        raw_ids = request.query_params.getlist("id")
        if raw_ids:
            selection = views.named_dead(queue, [_int(value, "id") for value in raw_ids])
        else:
            selection = views.dead_selection(queue, error)
        context = {
            "queue": name,
            "action": action,
            "error": error,
            "selection": selection,
            "title": f"{action.capitalize()} dead jobs of {name}?",
        }
        return dash.render(request, "confirm.html", context, access)

    @page("write")
    def act_dead(request: Request, access: Access) -> Response:
        form = request.state.form
        name = _queue_name(form.get("queue"))
        action = request.path_params["action"]
        if action not in ("redrive", "purge"):
            raise HTTPException(404, f"No action {action!r}: redrive or purge.")
        queue = views.handle(dash.store, name)
        ids = [_int(value, "id") for value in str(form.get("ids", "")).split()]
        selection = views.named_dead(queue, ids)
        if action == "redrive":
            result = carry_out(queue, RedrivePlan(jobs=selection.jobs))
            notice = f"Redrove {len(result.moves)} dead job(s)"
            if result.moves and len(result.moves) == 1:
                notice += f": the new job is {result.moves[0][1]}"
            if result.raced:
                notice += f"; {len(result.raced)} were taken by another process meanwhile"
        else:
            purged = queue.purge_dead(selection.ids) if selection.ids else 0
            notice = f"Purged {purged} dead job(s)"
        skipped = len(ids) - len(selection.ids)
        if skipped:
            notice += f"; {skipped} named job(s) were no longer dead jobs of {name}"
        dash.pulse.shared.forget()
        target = dash.path(request, "dead", {"queue": name, "notice": notice})
        return RedirectResponse(target, status_code=303)

    @page("write")
    def pause_resume(request: Request, access: Access) -> Response:
        name = _queue_name(request.state.form.get("queue"))
        queue = views.handle(dash.store, name)
        if request.url.path.endswith("/pause"):
            queue.pause()
        else:
            queue.resume()
        dash.pulse.shared.forget()
        back = str(request.state.form.get("back", ""))
        if not _own_path(back, request.scope.get("root_path", "")):
            back = dash.path(request, "overview")  # never an open redirect
        return RedirectResponse(back, status_code=303)

    @page("read")
    def schedules_page(request: Request, access: Access) -> Response:
        found = dash.store.schedules()
        rows = [(schedule, views.next_fires(schedule)) for schedule in found]
        context = {"rows": rows, "live": "schedules_live.html", "title": "Schedules"}
        return dash.render(request, "schedules.html", context, access)

    @page("read")
    def workers_page(request: Request, access: Access) -> Response:
        rows = views.live_workers(dash.store)
        context = {"rows": rows, "live": "workers_live.html", "title": "Workers"}
        return dash.render(request, "workers.html", context, access)

    async def events(request: Request) -> Response:
        dash.require(request, "read")
        listener = dash.pulse.listen()

        async def stream() -> AsyncIterator[str]:
            try:
                yield "retry: 3000\n\n"
                while True:
                    try:
                        await asyncio.wait_for(listener.changed.wait(), KEEPALIVE_S)
                    except TimeoutError:
                        yield ": keepalive\n\n"
                        continue
                    listener.changed.clear()
                    yield "event: change\ndata: {}\n\n"
            finally:
                dash.pulse.forget(listener)

        headers = {"cache-control": "no-store", "x-accel-buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    async def http_problem(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        titles = {401: "Sign-in needed", 403: "Not allowed", 404: "Not found", 405: "Not allowed"}
        response = dash.problem(
            request, exc.status_code, titles.get(exc.status_code, "Refused"), exc.detail
        )
        for key, value in (exc.headers or {}).items():
            response.headers[key] = value
        return response

    async def crash(request: Request, exc: Exception) -> Response:
        # The trace goes to the log, never to the page.
        log.exception("dashboard error on %s", request.url.path)
        return dash.problem(
            request, 500, "Something went wrong", "The error was logged on the server."
        )

    routes = [
        Route("/", overview, name="overview"),
        # Queue names may hold any character (a slash too): they travel as parameters.
        Route("/queue", queue_page, name="queue"),
        Route("/dead", dead_page, name="dead"),
        Route("/dead/confirm", confirm_page, name="confirm"),
        Route("/dead/{action:str}", act_dead, methods=["POST"], name="act"),
        Route("/pause", pause_resume, methods=["POST"], name="pause"),
        Route("/resume", pause_resume, methods=["POST"], name="resume"),
        Route("/jobs/{job_id:int}", job_page, name="job"),
        Route("/schedules", schedules_page, name="schedules"),
        Route("/workers", workers_page, name="workers"),
        Route("/events", events, name="events"),
        Mount("/static", StaticFiles(packages=[("alkstore.dashboard", "static")]), name="static"),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: http_problem, Exception: crash},
    )
    app.state.dashboard = dash
    return app


async def _form(request: Request) -> dict[str, str]:
    """A POST's urlencoded form, each field's first value (the only encoding the
    pages send; no multipart parser needed)."""
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise HTTPException(415, "The dashboard's forms are sent urlencoded.")
    body = (await request.body()).decode("utf-8", errors="replace")
    return {key: values[0] for key, values in parse_qs(body, keep_blank_values=True).items()}


def _own_path(target: str, root: str) -> bool:
    """Whether ``target`` is a path of this dashboard: no scheme, no host, and none of
    the backslashes or doubled slashes a browser reads as another host."""
    parts = urlsplit(target)
    return (
        not parts.scheme
        and not parts.netloc
        and "\\" not in target
        and target.startswith(root + "/")
        and not target[len(root) :].startswith("//")
        and all(ord(ch) > 0x20 for ch in target)
    )


def _queue_name(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidOptions("which queue? the request names none")
    return value


def _cursor(request: Request) -> int:
    """The ``before`` cursor of a newest-first listing (its top when absent)."""
    before = _int(request.query_params.get("before", str(views.TOP)), "before")
    if not 1 <= before <= views.TOP:
        raise InvalidOptions(f"before must be within 1..{views.TOP}, got {before}")
    return before


def _int(value: str, field: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise InvalidOptions(f"{field} must be an integer, got {value!r}") from None
