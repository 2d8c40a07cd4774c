"""The web dashboard (alkstore.dashboard) through Starlette's TestClient, on the
memory engine: access, CSRF, escaping, hidden secrets, missing profiles, and what
each page shows and does."""

from __future__ import annotations

import asyncio
import base64
import itertools
import re
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

import alkstore
from alkstore import ScheduleOpts, Store
from alkstore.cli.app import cli
from alkstore.constants import MAX_JOBS_PAGE
from alkstore.dashboard import Credentials, create_app, redact_url, views
from alkstore.dashboard.pulse import MIN_INTERVAL_S, Pulse, SharedStats
from alkstore.dashboard.security import CSRF_FIELD
from alkstore.testing import FakeClock

XSS = "<script>alert('x')</script>"


@pytest.fixture
def store() -> Iterator[Store]:
    with alkstore.open(f"memory://dash-{uuid.uuid4().hex}") as opened:
        yield opened


def client(store: Store, access: str | None = "write", **kwargs: Any) -> TestClient:
    app = create_app(store, authorize=lambda request: access, **kwargs)
    return TestClient(app, raise_server_exceptions=False)


def csrf_of(page: str) -> str:
    found = re.search(rf'name="{CSRF_FIELD}" value="([0-9a-f]+)"', page)
    assert found is not None, "the page has no form with a CSRF token"
    return found.group(1)


def dead_job(store: Store, queue: str, error: str, payload: Any = None) -> int:
    q = store.queue(queue)
    job_id = q.enqueue(payload if payload is not None else {"n": 1})
    handle = q.claim("w")
    assert handle is not None
    assert handle.id == job_id
    handle.fail(error)
    return int(job_id)


# -- access ----------------------------------------------------------------------
def test_a_request_the_hook_refuses_gets_403_and_sees_nothing_of_the_store(store: Store) -> None:
    store.queue("secret-queue").enqueue({"n": 1})
    response = client(store, access=None, url="memory://hidden-name").get("/")
    assert response.status_code == 403
    assert "secret-queue" not in response.text
    assert "hidden-name" not in response.text


def test_a_refusal_with_a_challenge_is_401_asking_for_basic_credentials(store: Store) -> None:
    response = client(store, access=None, challenge=Credentials.challenge).get("/")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Basic ")


def test_credentials_grant_their_access_to_the_right_password_only() -> None:
    creds = Credentials(user="op", password="pw", access="write")

    def basic(user: str, password: str) -> dict[str, str]:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        return {"authorization": f"Basic {token}"}

    assert creds(basic("op", "pw")) == "write"
    assert creds(basic("op", "wrong")) is None
    assert creds({}) is None


def test_a_bearer_token_grants_its_access_and_a_wrong_one_nothing() -> None:
    creds = Credentials(token="t0ken", access="read")
    assert creds({"authorization": "Bearer t0ken"}) == "read"
    assert creds({"authorization": "Bearer other"}) is None


def test_empty_credentials_are_refused_as_letting_anyone_in() -> None:
    with pytest.raises(ValueError, match="anyone"):
        Credentials(user="op", password="")


def test_read_access_shows_no_action_and_refuses_a_post(store: Store) -> None:
    store.queue("q").enqueue({"n": 1})
    c = client(store, access="read")
    page = c.get("/")
    assert page.status_code == 200
    assert "Pause" not in page.text
    refused = c.post("/pause", data={"queue": "q", CSRF_FIELD: "x"})
    assert refused.status_code == 403
    assert not store.queue("q").paused()


def test_read_only_mode_caps_write_access_to_read(store: Store) -> None:
    store.queue("q").enqueue({"n": 1})
    c = client(store, access="write", read_only=True)
    assert "Pause" not in c.get("/").text
    assert c.post("/pause", data={"queue": "q"}).status_code == 403
    assert not store.queue("q").paused()


# -- CSRF ------------------------------------------------------------------------
def test_a_post_without_a_csrf_token_is_refused_and_changes_nothing(store: Store) -> None:
    store.queue("q").enqueue({"n": 1})
    c = client(store)
    c.get("/")  # the CSRF cookie
    response = c.post("/pause", data={"queue": "q"})
    assert response.status_code == 403
    assert not store.queue("q").paused()


def test_a_post_with_a_token_for_another_cookie_is_refused(store: Store) -> None:
    store.queue("q").enqueue({"n": 1})
    other = client(store)
    forged = csrf_of(other.get("/").text)
    c = client(store)
    c.get("/")
    response = c.post("/pause", data={"queue": "q", CSRF_FIELD: forged})
    assert response.status_code == 403
    assert not store.queue("q").paused()


def test_a_post_with_the_pages_csrf_token_pauses_the_queue(store: Store) -> None:
    store.queue("q").enqueue({"n": 1})
    c = client(store)
    token = csrf_of(c.get("/").text)
    response = c.post("/pause", data={"queue": "q", CSRF_FIELD: token}, follow_redirects=False)
    assert response.status_code == 303
    assert store.queue("q").paused()


@pytest.mark.parametrize(
    "back", ["//evil.example/", "/\\evil.example/", "https://evil.example/", "/\t/evil.example"]
)
def test_pause_never_redirects_off_the_dashboard(store: Store, back: str) -> None:
    store.queue("q").enqueue({"n": 1})
    c = client(store)
    token = csrf_of(c.get("/").text)
    data = {"queue": "q", CSRF_FIELD: token, "back": back}
    response = c.post("/pause", data=data, follow_redirects=False)
    assert response.headers["location"] == "/"


def test_pause_goes_back_to_the_page_it_came_from(store: Store) -> None:
    store.queue("q").enqueue({"n": 1})
    c = client(store)
    token = csrf_of(c.get("/").text)
    data = {"queue": "q", CSRF_FIELD: token, "back": "/queue?name=q&state=all"}
    response = c.post("/pause", data=data, follow_redirects=False)
    assert response.headers["location"] == "/queue?name=q&state=all"


# -- escaping and secrets --------------------------------------------------------
def test_a_payload_with_a_script_renders_as_text(store: Store) -> None:
    job_id = store.queue("q").enqueue({"html": XSS})
    for path in (f"/jobs/{job_id}", "/queue?name=q"):
        page = client(store).get(path).text
        assert "<script>alert" not in page
        assert "&lt;script&gt;alert" in page


def test_an_error_with_a_script_renders_as_text(store: Store) -> None:
    job_id = dead_job(store, "q", XSS)
    for path in (f"/jobs/{job_id}", "/dead?queue=q"):
        page = client(store).get(path).text
        assert "<script>alert" not in page
        assert "&lt;script&gt;alert" in page


def test_a_queue_name_with_html_renders_as_text(store: Store) -> None:
    store.queue("<b>q</b>").enqueue({"n": 1})
    page = client(store).get("/").text
    assert "<b>q</b>" not in page
    assert "&lt;b&gt;q&lt;/b&gt;" in page


def test_pages_forbid_inline_scripts(store: Store) -> None:
    policy = client(store).get("/").headers["content-security-policy"]
    assert "script-src 'self'" in policy


def test_the_store_urls_password_is_never_shown(store: Store) -> None:
    url = "postgresql://alk:s3cr3t-pw@db.internal:5432/jobs?sslmode=require&password=qp-s3cret"
    page = client(store, url=url).get("/").text
    assert "s3cr3t-pw" not in page
    assert "qp-s3cret" not in page
    assert "db.internal" in page


def test_redact_url_hides_the_password_and_secret_parameters() -> None:
    assert redact_url("postgresql://u:pw@h/db") == "postgresql://u:***@h/db"
    assert redact_url("postgresql://h/db?password=pw&sslmode=require") == (
        "postgresql://h/db?password=***&sslmode=require"
    )
    assert redact_url("sqlite:///var/lib/jobs.db") == "sqlite:///var/lib/jobs.db"


# -- what a store cannot serve ---------------------------------------------------
def test_a_store_without_the_ops_profile_shows_what_is_missing() -> None:
    engine = alkstore.load_engine("alkstore_memory.without:ops")
    with engine.open(f"memory://dash-{uuid.uuid4().hex}") as lacking:
        response = client(lacking).get("/")
    assert response.status_code == 501
    assert "ops" in response.text
    assert "Traceback" not in response.text


def test_a_store_without_the_scheduler_shows_what_is_missing() -> None:
    engine = alkstore.load_engine("alkstore_memory.without:scheduler+cron")
    with engine.open(f"memory://dash-{uuid.uuid4().hex}") as lacking:
        response = client(lacking).get("/schedules")
    assert response.status_code == 501
    assert "scheduler" in response.text


def test_an_unexpected_error_is_a_page_without_a_trace(store: Store) -> None:
    def broken(request: Any) -> Any:
        raise RuntimeError("internal detail 42")

    app = create_app(store, authorize=broken)
    response = TestClient(app, raise_server_exceptions=False).get("/")
    assert response.status_code == 500
    assert "internal detail 42" not in response.text
    assert "Traceback" not in response.text


# -- pages -----------------------------------------------------------------------
def test_the_overview_shows_every_queues_counts(store: Store) -> None:
    store.queue("a").enqueue_many([{"n": 1}, {"n": 2}])
    dead_job(store, "b", "boom")
    page = client(store).get("/").text
    row_a = re.search(r'data-queue="a">(.*?)</tr>', page, re.S)
    row_b = re.search(r'data-queue="b">(.*?)</tr>', page, re.S)
    assert row_a is not None
    assert row_b is not None
    assert '<td class="ready">2</td>' in row_a.group(1)
    assert 'class="dead"><a' in row_b.group(1)


def test_the_queue_page_pages_newest_first_by_keyset(store: Store) -> None:
    ids = store.queue("q").enqueue_many([{"n": n} for n in range(60)])
    c = client(store)
    first = c.get("/queue?name=q").text
    assert first.count('class="job"') == 50
    following = re.search(r'class="next" href="([^"]+)"', first)
    assert following is not None
    assert f'data-id="{ids[-1]}"' in first  # newest first
    second = c.get(following.group(1).replace("&amp;", "&")).text
    assert second.count('class="job"') == 10
    assert f'data-id="{ids[0]}"' in second
    assert f'data-id="{ids[-1]}"' not in second


def test_the_queue_page_finds_a_job_by_payload_text(store: Store) -> None:
    q = store.queue("q")
    q.enqueue({"order": "A-1"})
    wanted = q.enqueue({"order": "B-2"})
    page = client(store).get("/queue?name=q&state=all&q=b-2").text
    assert page.count('class="job"') == 1
    assert f'data-id="{wanted}"' in page


def test_the_queue_page_finds_a_job_by_id(store: Store) -> None:
    q = store.queue("q")
    wanted = q.enqueue({"n": 1})
    q.enqueue({"n": 2})
    page = client(store).get(f"/queue?name=q&state=all&q={wanted}").text
    assert page.count('class="job"') == 1
    assert f'data-id="{wanted}"' in page


def test_the_queue_page_finds_a_job_by_error_text(store: Store) -> None:
    dead_job(store, "q", "connection reset")
    wanted = dead_job(store, "q", "disk full")
    page = client(store).get("/queue?name=q&state=dead&q=DISK").text
    assert page.count('class="job"') == 1
    assert f'data-id="{wanted}"' in page


def test_the_job_page_shows_payload_stamps_and_error_history(store: Store) -> None:
    q = store.queue("q")
    job_id = q.enqueue({"n": 1}, alkstore.EnqueueOpts(unique=alkstore.Unique(key="k-1")))
    handle = q.claim("w")
    assert handle is not None
    handle.retry("Traceback (most recent call last):\n  first failure", delay=0)
    page = client(store).get(f"/jobs/{job_id}").text
    assert "k-1" in page
    assert "first failure" in page
    assert "attempt 1" in page


def test_the_dead_letter_filter_keeps_the_matching_errors(store: Store) -> None:
    dead_job(store, "q", "timeout talking to smtp")
    wanted = dead_job(store, "q", "invalid address")
    page = client(store).get("/dead?queue=q&error=invalid").text
    assert page.count('class="job"') == 1
    assert f'data-id="{wanted}"' in page


def test_a_bulk_redrive_shows_its_count_then_redrives_those_jobs(store: Store) -> None:
    matching = [dead_job(store, "q", "smtp down") for _ in range(3)]
    other = dead_job(store, "q", "bad input")
    c = client(store)
    confirm = c.get("/dead/confirm?queue=q&action=redrive&error=smtp").text
    assert "<strong>3</strong>" in confirm
    assert store.queue("q").stats().dead == 4  # nothing happens before the POST
    ids = re.search(r'name="ids" value="([^"]*)"', confirm)
    assert ids is not None
    done = c.post(
        "/dead/redrive",
        data={"queue": "q", "ids": ids.group(1), CSRF_FIELD: csrf_of(confirm)},
        follow_redirects=False,
    )
    assert done.status_code == 303
    q = store.queue("q")
    assert [job.id for job in q.jobs("dead")] == [other]
    assert sorted(job.redriven_from for job in q.jobs("pending")) == matching


def test_a_bulk_purge_deletes_only_the_confirmed_jobs(store: Store) -> None:
    gone = dead_job(store, "q", "purge me")
    kept = dead_job(store, "q", "keep me")
    c = client(store)
    confirm = c.get("/dead/confirm?queue=q&action=purge&error=purge").text
    assert "<strong>1</strong>" in confirm
    c.post("/dead/purge", data={"queue": "q", "ids": str(gone), CSRF_FIELD: csrf_of(confirm)})
    assert [job.id for job in store.queue("q").jobs("dead")] == [kept]


def test_the_schedules_page_shows_the_next_fire_in_its_zone(store: Store) -> None:
    store.schedule("nightly", "0 3 * * *", "q", {"n": 1}, ScheduleOpts(timezone="Asia/Kolkata"))
    page = client(store).get("/schedules").text
    assert "Asia/Kolkata" in page
    assert "03:00:00 IST (UTC+0530)" in page


def test_the_schedules_page_shows_a_declared_schedule_s_lease(store: Store) -> None:
    declared = store.declare_schedule("heartbeat", "@every 1h", "q", {})
    store.schedule("plain", "@every 1h", "q", {})
    assert declared.declared_until is not None
    page = client(store).get("/schedules").text
    until = datetime.fromtimestamp(declared.declared_until, UTC)
    assert f"{until:%Y-%m-%d %H:%M:%S} UTC</td>" in page
    assert "never lapses" in page


def test_a_mounted_dashboard_links_under_its_path(store: Store) -> None:
    store.queue("q").enqueue({"n": 1})
    host = Starlette(
        routes=[Mount("/ops/jobs", create_app(store, authorize=lambda request: "read"))]
    )
    page = TestClient(host).get("/ops/jobs/").text
    assert 'href="/ops/jobs/queue?name=q"' in page
    assert 'src="/ops/jobs/static/live.js"' in page


def test_a_partial_request_renders_only_the_live_part(store: Store) -> None:
    store.queue("q").enqueue({"n": 1})
    response = client(store).get("/", headers={"x-alkstore-partial": "1"})
    assert "<html" not in response.text
    assert 'data-queue="q"' in response.text


# -- searching -------------------------------------------------------------------
class _CountedReads:
    """A queue whose ``jobs`` calls record the page size they asked for."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue
        self.limits: list[int] = []

    def jobs(self, state: Any, *, before_id: int, limit: int) -> Any:
        self.limits.append(limit)
        return self._queue.jobs(state, before_id=before_id, limit=limit)


def test_a_search_whose_matches_are_at_the_top_reads_one_small_page(store: Store) -> None:
    queue = store.queue("q")
    queue.enqueue_many([{"word": "needle", "n": n} for n in range(3 * views.PAGE)])
    counted = _CountedReads(queue)
    found = views.search(counted, "all", "needle", views.TOP)  # type: ignore[arg-type]
    assert len(found.jobs) == views.PAGE
    assert counted.limits == [views.FIRST_SCAN_PAGE]


def test_a_search_reads_ever_larger_pages_up_to_the_largest(store: Store) -> None:
    queue = store.queue("q")
    queue.enqueue_many([{"n": n} for n in range(3_000)])
    counted = _CountedReads(queue)
    found = views.search(counted, "all", "absent", views.TOP)  # type: ignore[arg-type]
    assert found.jobs == ()
    largest = min(16 * views.FIRST_SCAN_PAGE, MAX_JOBS_PAGE)
    assert counted.limits[:3] == [views.FIRST_SCAN_PAGE, 4 * views.FIRST_SCAN_PAGE, largest]
    assert found.scanned == 3_000


# -- live updates ----------------------------------------------------------------
def test_the_pulse_tells_a_listener_when_a_job_is_enqueued(store: Store) -> None:
    store.queue("q").enqueue({"n": 1})
    pulse = Pulse(store, poll_s=30.0)  # the wake, not the poll, must deliver it

    async def watch() -> bool:
        listener = pulse.listen()
        try:
            while pulse.wakes < 2:  # the watcher has read the store and waits on its wake
                await asyncio.sleep(0.01)
            await asyncio.to_thread(store.queue("q").enqueue, {"n": 2})
            await asyncio.wait_for(listener.changed.wait(), 10)
            return True
        finally:
            pulse.forget(listener)

    assert asyncio.run(watch())


def _told_after(pulse: Pulse, change: Any) -> bool:
    """Whether a listener of ``pulse`` is told of a change once ``change()`` ran (after
    the watcher's first read)."""

    async def watch() -> bool:
        listener = pulse.listen()
        try:
            while pulse.wakes < 2:  # the watcher has read the store once and polls on
                await asyncio.sleep(0.01)
            await asyncio.to_thread(change)
            await asyncio.wait_for(listener.changed.wait(), 10)
            return True
        finally:
            pulse.forget(listener)

    return asyncio.run(watch())


def test_the_pulse_tells_a_listener_when_a_worker_registers(store: Store) -> None:
    store.queue("q").enqueue({"n": 1})
    pulse = Pulse(store, poll_s=0.05, min_interval_s=0.01)
    worker = alkstore.WorkerInfo("w-1", "host-a", 1, ("idle",), 1_000)

    assert _told_after(pulse, lambda: store.register_worker(worker))


def test_the_pulse_tells_a_listener_when_a_worker_deregisters(store: Store) -> None:
    store.register_worker(alkstore.WorkerInfo("w-1", "host-a", 1, ("idle",), 1_000))
    pulse = Pulse(store, poll_s=0.05, min_interval_s=0.01)

    assert _told_after(pulse, lambda: store.deregister_worker("w-1"))


def test_the_pulse_reads_the_registry_no_more_without_the_workers_profile(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[int] = []

    def refuse() -> list[alkstore.WorkerInfo]:
        asked.append(1)
        raise alkstore.ProfileUnavailable("memory", "workers")

    monkeypatch.setattr(store, "workers", refuse)
    pulse = Pulse(store, poll_s=0.01, min_interval_s=0.01)

    async def watch() -> None:
        listener = pulse.listen()
        try:
            while pulse.wakes < 4:
                await asyncio.sleep(0.01)
        finally:
            pulse.forget(listener)

    asyncio.run(watch())
    assert asked == [1]


class _Storm:
    """A wake watcher that is always woken: a store enqueued to without pause."""

    def __enter__(self) -> _Storm:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def wait(self, timeout: float | None = None) -> bool:
        return True


def _count_stats(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record when ``store.stats`` is called (monotonic), and still read the store."""
    calls: list[float] = []
    read = store.stats

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(time.monotonic())
        return read(*args, **kwargs)

    monkeypatch.setattr(store, "stats", counted)
    return calls


def test_the_pulse_reads_at_most_once_per_interval_however_often_the_store_wakes_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.queue("q").enqueue({"n": 1})
    monkeypatch.setattr(store, "wake_watcher", lambda queues: _Storm())
    calls = _count_stats(store, monkeypatch)
    pulse = Pulse(store, poll_s=30.0, min_interval_s=0.2)

    async def watch() -> None:
        listener = pulse.listen()
        try:
            while len(calls) < 4:
                await asyncio.sleep(0.01)
        finally:
            pulse.forget(listener)

    asyncio.run(watch())
    gaps = [later - earlier for earlier, later in itertools.pairwise(calls)]
    assert min(gaps) >= 0.2, gaps


def _stopped_clock(pages: TestClient) -> FakeClock:
    """A clock the dashboard's shared read is aged by that moves only when told: a
    loaded machine takes longer than a shared read's age between two requests."""
    clock = FakeClock()
    dash = pages.app.state.dashboard  # type: ignore[attr-defined]
    dash.pulse.shared.clock = clock.now
    return clock


def test_pages_told_of_a_change_refresh_from_the_pulses_read(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.queue("q").enqueue({"n": 1})
    app = create_app(store, authorize=lambda request: "read")
    pages = TestClient(app)
    _stopped_clock(pages)
    pages.get("/")  # a whole page reads the store, and shares that read
    calls = _count_stats(store, monkeypatch)
    for _ in range(5):
        live = pages.get("/", headers={"x-alkstore-partial": "1"})
        assert 'data-queue="q"' in live.text
        queue_live = pages.get("/queue?name=q", headers={"x-alkstore-partial": "1"})
        assert queue_live.status_code == 200
    assert calls == []


def test_a_pages_live_part_reads_again_once_the_shared_read_is_older_than_its_age(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.queue("q").enqueue({"n": 1})
    pages = TestClient(create_app(store, authorize=lambda request: "read"))
    clock = _stopped_clock(pages)
    pages.get("/")
    calls = _count_stats(store, monkeypatch)
    clock.advance(MIN_INTERVAL_S * 2)
    live = pages.get("/", headers={"x-alkstore-partial": "1"})
    assert 'data-queue="q"' in live.text
    assert len(calls) == 1


def test_a_whole_page_reads_the_store_afresh(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    store.queue("q").enqueue({"n": 1})
    pages = TestClient(create_app(store, authorize=lambda request: "read"))
    pages.get("/")
    calls = _count_stats(store, monkeypatch)
    store.queue("q").enqueue({"n": 2})
    assert pages.get("/").status_code == 200
    assert len(calls) == 1
    dash = pages.app.state.dashboard  # type: ignore[attr-defined]
    assert [stats.ready for stats in dash.pulse.shared.read()] == [2]  # the page's read


def test_a_shared_read_older_than_its_age_is_read_again(store: Store) -> None:
    shared = SharedStats(store, max_age_s=0.0)
    store.queue("q").enqueue({"n": 1})
    shared.offer((), time.monotonic() - 1.0)
    (stats,) = shared.read()
    assert (stats.queue, stats.ready) == ("q", 1)
    assert shared.reads == 1


def test_a_pause_from_the_dashboard_drops_the_shared_read(store: Store) -> None:
    store.queue("q").enqueue({"n": 1})
    pages = client(store)
    page = pages.get("/").text
    form = {"queue": "q", CSRF_FIELD: csrf_of(page), "back": "/"}
    assert pages.post("/pause", data=form, follow_redirects=False).status_code == 303
    app_state = pages.app.state.dashboard  # type: ignore[attr-defined]
    live = pages.get("/", headers={"x-alkstore-partial": "1"}).text
    assert store.queue("q").stats().paused
    assert app_state.pulse.shared.reads == 1
    assert '<td class="paused">paused</td>' in live


# -- the standalone command ------------------------------------------------------
def test_the_command_refuses_to_serve_without_credentials(tmp_path: Any) -> None:
    result = CliRunner().invoke(cli, ["--url", f"sqlite:///{tmp_path}/s.db", "dashboard"])
    assert result.exit_code == 2
    assert "without credentials" in result.output


def test_the_command_refuses_read_only_without_credentials_off_loopback(tmp_path: Any) -> None:
    args = ["--url", f"sqlite:///{tmp_path}/s.db", "dashboard", "--read-only", "--host", "0.0.0.0"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "loopback" in result.output


# -- workers -----------------------------------------------------------------------
def test_the_workers_page_shows_each_live_worker_with_the_job_it_holds(store: Store) -> None:
    store.register_worker(alkstore.WorkerInfo("w-1", "host-a", 4242, ("q", "idle"), 1_000))
    store.register_worker(alkstore.WorkerInfo("w-2", "host-b", 7, ("idle",), 1_000))
    queue = store.queue("q")
    queue.enqueue({"n": 1})
    held = queue.claim("w-1")
    assert held is not None
    page = client(store, "read").get("/workers").text
    rows = dict(re.findall(r'<tr class="worker" data-worker="([^"]+)">(.*?)</tr>', page, re.S))
    assert set(rows) == {"w-1", "w-2"}
    assert "host-a" in rows["w-1"]
    assert "4242" in rows["w-1"]
    assert f'data-job="{held.id}"' in rows["w-1"]
    assert 'class="held-job"' not in rows["w-2"]
    assert "no job" in rows["w-2"]


def test_the_workers_page_escapes_what_a_worker_registered(store: Store) -> None:
    store.register_worker(alkstore.WorkerInfo("w-1", XSS, 1, (), 1_000))
    page = client(store, "read").get("/workers").text
    assert XSS not in page
    assert "&lt;script&gt;" in page


def test_the_workers_page_without_the_workers_profile_shows_what_is_missing() -> None:
    engine = alkstore.load_engine("alkstore_memory.without:workers")
    with engine.open(f"memory://dash-{uuid.uuid4().hex}") as lacking:
        response = client(lacking).get("/workers")
    assert response.status_code == 501
    assert "workers" in response.text


def test_the_overview_shows_each_queues_throughput_over_the_last_hour(store: Store) -> None:
    store.queue("busy").enqueue({"n": 1})
    store.queue("quiet").enqueue({"n": 1})
    store.register_worker(alkstore.WorkerInfo("w-1", "host-a", 1, ("busy",), 1_000))
    assert store.heartbeat_worker("w-1", {"busy": 120})
    page = client(store, "read").get("/").text
    rows = dict(re.findall(r'<tr class="queue" data-queue="([^"]+)">(.*?)</tr>', page, re.S))
    assert "120 (2.0/min)" in rows["busy"]
    assert views.sparkline((0,) * 59 + (120,)) in rows["busy"]
    assert '<td class="throughput">-</td>' in rows["quiet"]


def test_a_sparkline_has_one_block_per_five_minutes_the_busiest_tallest() -> None:
    hour = (0,) * 50 + (1,) * 5 + (4,) * 5
    assert views.sparkline(hour) == "▁" * 10 + "▂█"
    assert views.sparkline((0,) * 60) == "▁" * 12


# -- dependencies on the job page (contract 1.2 §18.7) -----------------------------
def test_a_waiting_jobs_page_links_the_jobs_it_waits_for_with_their_states(store: Store) -> None:
    charges, ships = store.queue("charges"), store.queue("ships")
    charge = int(charges.enqueue({"order": 7}))
    ship = int(ships.enqueue({"order": 7}, alkstore.EnqueueOpts(after=[charge])))

    page = client(store).get(f"/jobs/{ship}").text

    waits = page[page.index('id="waits-for"') :]
    assert f'href="/jobs/{charge}"' in waits
    assert f"charges #{charge}" in waits
    assert '<span class="state pending">pending</span>' in waits


def test_a_dependencys_page_lists_the_jobs_waiting_for_it(store: Store) -> None:
    queue = store.queue("q")
    root = int(queue.enqueue("root"))
    first, second = (
        int(i) for i in queue.enqueue_many(["a", "b"], alkstore.EnqueueOpts(after=[root]))
    )

    page = client(store).get(f"/jobs/{root}").text

    listed = re.findall(r'class="linked" data-job="(\d+)"', page)
    assert listed == [str(first), str(second)]
    assert 'id="waits-for"' not in page


def test_a_job_without_edges_shows_no_dependencies(store: Store) -> None:
    job = int(store.queue("q").enqueue("alone"))

    page = client(store).get(f"/jobs/{job}").text

    assert "<h2>Dependencies</h2>" not in page


def test_the_dependencies_are_escaped(store: Store) -> None:
    queue_name = "a<b>&c"
    root = int(store.queue(queue_name).enqueue("root"))
    waiting = int(store.queue("q").enqueue("w", alkstore.EnqueueOpts(after=[root])))

    page = client(store).get(f"/jobs/{waiting}").text

    assert "a&lt;b&gt;&amp;c #" in page
    assert "a<b>&c" not in page
