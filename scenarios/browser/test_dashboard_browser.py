"""The web dashboard in a real browser: Debian's Chromium driven by Selenium through
Debian's chromedriver (``.ci/run`` installs both; nothing downloads a browser or a
driver), against a dashboard served by uvicorn, on SQLite, PostgreSQL
(``$ALKSTORE_PG_DSN`` or a throwaway server, as the engine provisions) and the
memory engine.

The SQLite run takes the screenshots docs/dashboard.md shows, into a temporary
directory; ``ALKSTORE_SCREENSHOTS=docs/images/dashboard`` refreshes the committed
ones (a test run leaves the working tree as it found it).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

import alkstore
import alkstore.worker
from alkstore import EngineSpec, ScheduleOpts, Store
from alkstore.dashboard import Credentials, create_app

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ENGINES = ("sqlite", "postgresql", "memory")
USER, PASSWORD = "operator", "correct horse battery staple"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Bounds only so that a broken page fails the test instead of hanging the run.
PAGE_WAIT_S = 20
SERVER_START_S = 20
HANG_GUARD_S = 60


@dataclass
class Served:
    """A dashboard served on loopback over one provisioned store."""

    engine: str
    spec: EngineSpec
    store: Store
    base: str
    screenshots: Path

    def url(self, path: str) -> str:
        return self.base + path


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: a temporary directory, or ``$ALKSTORE_SCREENSHOTS`` when asked."""
    asked = os.environ.get("ALKSTORE_SCREENSHOTS")
    return Path(asked) if asked else tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module", params=ENGINES)
def served(request: pytest.FixtureRequest, screenshots: Path) -> Iterator[Served]:
    provider = alkstore.load_engine(request.param)
    with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
        credentials = Credentials(user=USER, password=PASSWORD)
        app = create_app(
            store,
            authorize=lambda req: credentials(req.headers),
            url=spec.url,
            poll_s=1.0,
            challenge=credentials.challenge,
        )
        sock = _free_socket()
        # Open pages hold their event streams: a stop cuts them after a second.
        config = uvicorn.Config(
            app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + SERVER_START_S
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        port = sock.getsockname()[1]
        try:
            yield Served(request.param, spec, store, f"http://127.0.0.1:{port}", screenshots)
        finally:
            server.should_exit = True
            thread.join(HANG_GUARD_S)
            sock.close()


def _browser(authorization: str | None, scratch: Path) -> webdriver.Chrome:
    """A headless Chromium whose temporary files go to ``scratch`` (Chromium leaves
    empty ``org.chromium.Chromium.*`` directories behind in its ``TMPDIR``)."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        # Not a skip: these tests are how a broken page fails the run.
        pytest.fail(
            "needs Debian's chromium and chromium-driver: "
            "apt-get install -y chromium chromium-driver (.ci/run does)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1280,860")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    # An explicit driver path: Selenium Manager never runs, so nothing is downloaded.
    service = Service(executable_path=str(CHROMEDRIVER), env={**os.environ, "TMPDIR": str(scratch)})
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(PAGE_WAIT_S)
    if authorization is not None:
        # Every request of the page (its fetches and its event stream too) carries it.
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd(
            "Network.setExtraHTTPHeaders", {"headers": {"Authorization": authorization}}
        )
    return driver


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    driver = _browser(f"Basic {token}", tmp_path_factory.mktemp("chromium"))
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: WebDriver, condition: Callable[[WebDriver], Any], what: str) -> Any:
    """``condition``'s first true value, asked again until the page shows it. Conditions
    find their elements afresh each time (``_text``, ``find_elements``): the live part
    is swapped while the wait looks at it, so a vanished element only means "look
    again"."""
    try:
        swapped = (StaleElementReferenceException, NoSuchElementException)
        wait = WebDriverWait(driver, PAGE_WAIT_S, poll_frequency=0.1, ignored_exceptions=swapped)
        return wait.until(condition)
    except TimeoutException:
        raise AssertionError(f"the page never showed {what}") from None


def _text(driver: WebDriver, css: str) -> str:
    """The text of the element ``css`` finds now: for conditions of ``wait_for``, which
    look again when a live refresh swapped it between the find and the read."""
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def text_of(driver: WebDriver, css: str) -> str:
    """The element's text, read through a wait that finds it again when a live refresh
    swapped it meanwhile (what it says is the caller's to check, at once)."""
    # A one-element tuple: an empty text is still a read.
    (text,) = wait_for(driver, lambda d: (_text(d, css),), css)
    return str(text)


def click(driver: WebDriver, css: str) -> None:
    """Click the element ``css`` finds, found again when a live refresh swapped it
    between the find and the click (a stale element takes no click)."""

    def clicked(d: WebDriver) -> bool:
        d.find_element(By.CSS_SELECTOR, css).click()
        return True

    wait_for(driver, clicked, f"{css} to click")


def shoot(served: Served, driver: WebDriver, name: str) -> None:
    if served.engine == "sqlite":
        served.screenshots.mkdir(parents=True, exist_ok=True)
        path = served.screenshots / f"{name}.png"
        assert driver.save_screenshot(str(path))
        assert path.read_bytes().startswith(PNG_SIGNATURE)


def dead_job(store: Store, queue: str, error: str, payload: Any) -> int:
    q = store.queue(queue)
    # Top priority: claimed before any job already waiting in the queue.
    job_id = int(q.enqueue(payload, alkstore.EnqueueOpts(priority=2**31 - 1)))
    handle = q.claim("browser-test")
    assert handle is not None
    assert handle.id == job_id
    handle.fail(error)
    return job_id


def enqueue_elsewhere(served: Served, queue: str, payload: Any) -> None:
    """An enqueue from another process (the memory engine has one process: another
    thread, which its wake hub serves the same way)."""
    if served.engine == "memory":
        worker = threading.Thread(target=served.store.queue(queue).enqueue, args=(payload,))
        worker.start()
        worker.join(HANG_GUARD_S)
        return
    script = (
        "import json, sys, alkstore\n"
        "spec = json.loads(sys.argv[1])\n"
        "with alkstore.open(spec['url'], **spec['opts']) as store:\n"
        "    store.queue(spec['queue']).enqueue(spec['payload'])\n"
    )
    spec = {"url": served.spec.url, "opts": dict(served.spec.opts), "queue": queue}
    spec["payload"] = payload
    subprocess.run(
        [sys.executable, "-c", script, json.dumps(spec)], check=True, timeout=HANG_GUARD_S
    )


# -- tests -----------------------------------------------------------------------
def test_each_page_loads(served: Served, browser: WebDriver) -> None:
    store = served.store
    emails = store.queue("emails")
    emails.enqueue_many([{"to": f"user{n}@example.com", "template": "welcome"} for n in range(7)])
    emails.enqueue({"to": "later@example.com"}, alkstore.EnqueueOpts(delay=3600))
    first = emails.claim("worker-1")
    assert first is not None
    first.retry("SMTPServerDisconnected: Connection unexpectedly closed", delay=0)
    dead = dead_job(
        store,
        "emails",
        'Traceback (most recent call last):\n  File "app.py", line 12, in send\n'
        "smtplib.SMTPRecipientsRefused: {'bad@': (550, 'no such user')}",
        {"to": "bad@", "template": "welcome"},
    )
    store.queue("reports").enqueue({"report": "daily"})
    store.schedule(
        "nightly-report",
        "0 3 * * *",
        "reports",
        {"report": "nightly"},
        ScheduleOpts(timezone="Europe/Berlin"),
    )
    pages = [
        ("overview", "/", "Queues"),
        ("queue", "/queue?name=emails&state=all", "Queue emails"),
        ("job", f"/jobs/{dead}", f"Job {dead}"),
        ("dead-letters", "/dead?queue=emails", "Dead letters of emails"),
        ("confirm-redrive", "/dead/confirm?queue=emails&action=redrive", "Redrive dead jobs"),
        ("schedules", "/schedules", "Schedules"),
    ]
    for name, path, title in pages:
        browser.get(served.url(path))
        heading = text_of(browser, "h1")
        assert heading.startswith(title), f"{path}: {heading!r}"
        assert not browser.find_elements(By.ID, "problem"), f"{path} shows a problem"
        shoot(served, browser, name)
    browser.get(served.url("/schedules"))
    assert "Europe/Berlin" in text_of(browser, "table.schedules")


def test_a_job_enqueued_elsewhere_appears_without_a_reload(
    served: Served, browser: WebDriver
) -> None:
    served.store.queue("live").enqueue({"n": 1})
    browser.get(served.url("/"))
    ready = '[data-queue="live"] .ready'
    # Read through the wait: the live part may be swapped at any moment.
    wait_for(browser, lambda d: _text(d, ready) == "1", "the first job")
    wait_for(browser, lambda d: _text(d, "#live-status") == "live", "its event stream open")
    browser.execute_script("window.__notReloaded = true;")
    enqueue_elsewhere(served, "live", {"n": 2})
    wait_for(browser, lambda d: _text(d, ready) == "2", "the second job")
    assert browser.execute_script("return window.__notReloaded === true;")


def test_a_dead_job_is_redriven_through_the_page(served: Served, browser: WebDriver) -> None:
    dead = dead_job(served.store, "redrive", "boom", {"n": 1})
    browser.get(served.url(f"/jobs/{dead}"))
    click(browser, "#redrive-job")
    wait_for(browser, lambda d: "1" in _text(d, "#confirm-count strong"), "the count")
    assert served.store.queue("redrive").get_job(dead) is not None  # asked, not done
    click(browser, "#confirm")
    wait_for(browser, lambda d: d.find_elements(By.ID, "notice"), "the notice")
    assert text_of(browser, "#notice").startswith("Redrove 1 dead job")
    q = served.store.queue("redrive")
    assert q.get_job(dead) is None
    assert [job.redriven_from for job in q.jobs("pending")] == [dead]


def test_without_credentials_the_dashboard_refuses(served: Served, tmp_path: Path) -> None:
    served.store.queue("private-queue").enqueue({"n": 1})
    stranger = _browser(None, tmp_path)
    try:
        stranger.get(served.url("/"))
        assert "private-queue" not in stranger.page_source
        statuses = [
            event["params"]["response"]["status"]
            for entry in stranger.get_log("performance")  # type: ignore[no-untyped-call]
            for event in [json.loads(entry["message"])["message"]]
            if event["method"] == "Network.responseReceived"
            and event["params"]["response"]["url"] == served.url("/")
        ]
        # A headless browser asks for the user and password (the page stays empty).
        assert statuses == [401]
    finally:
        stranger.quit()


def test_a_browser_leaves_nothing_in_the_system_temporary_directory(tmp_path: Path) -> None:
    system_tmp = Path(tempfile.gettempdir())
    before = set(system_tmp.glob("org.chromium.Chromium.*"))
    _browser(None, tmp_path).quit()
    assert set(system_tmp.glob("org.chromium.Chromium.*")) - before == set()


def test_an_xss_payload_shows_as_text(served: Served, browser: WebDriver) -> None:
    # No double quote: the payload shows as JSON, which would escape it.
    attack = "<script>document.title='owned'</script><img src=x onerror=document.title='owned'>"
    dead = dead_job(served.store, "xss", attack, {"html": attack})
    browser.get(served.url(f"/jobs/{dead}"))
    assert attack in text_of(browser, "#payload")
    assert attack in text_of(browser, "#last-error")
    assert browser.title != "owned"
    assert not browser.find_elements(By.CSS_SELECTOR, "main img")
    shoot(served, browser, "xss-as-text")


_HOLDING_WORKER = (
    "import json, sys, alkstore\n"
    "from alkstore.worker import Worker\n"
    "spec = json.loads(sys.argv[1])\n"
    "with alkstore.open(spec['url'], **spec['opts']) as store:\n"
    "    worker = Worker(store, name=spec['name'], shutdown_grace_s=30)\n"
    "    @worker.task(spec['queue'])\n"
    "    def hold(job, context):\n"
    "        context.stop.wait(3600)\n"
    "    if spec['enqueue']:\n"
    "        store.queue(spec['queue']).enqueue({'held': True})\n"
    "    worker.run()\n"
)
"""A worker process that claims one job (with ``enqueue``: one it enqueues itself) and
holds it until it is told to stop."""


def _holding_worker(
    served: Served, name: str, queue: str = "held", *, enqueue: bool = True
) -> Callable[[], None]:
    """A worker of ``queue`` holding one job it enqueued (without ``enqueue``: idle, no
    job at all), in another process (a thread of this one on the memory engine); the
    function returned stops it."""
    if served.engine == "memory":
        worker = alkstore.worker.Worker(served.store, name=name, shutdown_grace_s=30)

        @worker.task(queue)
        def hold(job: Any, context: Any) -> None:
            context.stop.wait(3600)

        if enqueue:
            served.store.queue(queue).enqueue({"held": True})
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()

        def stop_thread() -> None:
            worker.stop()
            thread.join(HANG_GUARD_S)
            assert not thread.is_alive()

        return stop_thread
    spec = {
        "url": served.spec.url,
        "opts": dict(served.spec.opts),
        "queue": queue,
        "name": name,
        "enqueue": enqueue,
    }
    child = subprocess.Popen([sys.executable, "-c", _HOLDING_WORKER, json.dumps(spec)])

    def stop_child() -> None:
        child.terminate()  # SIGTERM: the worker stops, its handler told to stop too
        assert child.wait(HANG_GUARD_S) == 0

    return stop_child


def _open_live(served: Served, browser: WebDriver, path: str) -> None:
    """Open ``path``, wait for its event stream, and mark the page so that a reload
    shows (``_not_reloaded``)."""
    browser.get(served.url(path))
    wait_for(browser, lambda d: _text(d, "#live-status") == "live", "its event stream open")
    browser.execute_script("window.__notReloaded = true;")


def _not_reloaded(browser: WebDriver) -> bool:
    return bool(browser.execute_script("return window.__notReloaded === true;"))


def test_a_worker_running_elsewhere_is_listed_with_the_job_it_holds(
    served: Served, browser: WebDriver
) -> None:
    name = f"browser-worker-{served.engine}"
    row = f'tr.worker[data-worker="{name}"]'
    _open_live(served, browser, "/workers")
    stop = _holding_worker(served, name)
    try:
        wait_for(browser, lambda d: _text(d, f"{row} .held-job").startswith("held #"), name)
        (listed,) = [w for w in served.store.workers() if w.id == name]
        assert str(listed.pid) in text_of(browser, row)
        assert _not_reloaded(browser)
        shoot(served, browser, "workers")
    finally:
        stop()
    wait_for(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, row), f"{name} gone")
    assert _not_reloaded(browser)


def test_an_idle_worker_appears_and_goes_without_a_reload(
    served: Served, browser: WebDriver
) -> None:
    # No job anywhere changes: only the registry tells the page (contract 1.2 §19).
    name = f"browser-idle-worker-{served.engine}"
    row = f'tr.worker[data-worker="{name}"]'
    _open_live(served, browser, "/workers")
    stop = _holding_worker(served, name, "idle", enqueue=False)
    try:
        wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, row), f"{name} listed")
        assert "idle" in text_of(browser, row)
        assert _not_reloaded(browser)
    finally:
        stop()
    wait_for(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, row), f"{name} gone")
    assert _not_reloaded(browser)


def test_a_waiting_jobs_page_lists_its_dependency(served: Served, browser: WebDriver) -> None:
    charges, ships = served.store.queue("charges"), served.store.queue("ships")
    charge = int(charges.enqueue({"order": 7}))
    ship = int(ships.enqueue({"order": 7}, alkstore.EnqueueOpts(after=[charge])))
    browser.get(served.url(f"/jobs/{ship}"))
    assert text_of(browser, "#job-state") == "waiting"
    listed = text_of(browser, f'#waits-for li[data-job="{charge}"]')
    assert listed == f"charges #{charge} pending"
    click(browser, f'#waits-for li[data-job="{charge}"] a')
    wait_for(browser, lambda d: _text(d, "h1").startswith(f"Job {charge}"), "the dependency")
    assert text_of(browser, f'#waited-by li[data-job="{ship}"]') == f"ships #{ship} waiting"
