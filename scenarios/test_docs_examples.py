"""Documented examples, run as written: the README's "Using it in an app" block on
both reference engines, and the runnable programs of ``docs/guide/``.

Only the URL is swapped. On PostgreSQL the README example gets a database of
its own (its ``orders`` table and the store's default schema would otherwise
be shared with every other run on the server), dropped afterwards.
"""

from __future__ import annotations

import re
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import alkstore
from alkstore import JobState
from alkstore_postgres.testing.provisioning import dsn_as_url, shared_server_dsn

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_URL = '"sqlite:///app.db"'
EXPECTED_OUTPUT = (
    "result {'paid': 7}\n"
    "sending {'to': 'a@example.com'}\nsending {'order': 7}\nsending {'receipt': 7}\n"
)


def readme_example() -> str:
    """The first python block under the README's "Using it in an app" heading."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Using it in an app\n", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "README.md: no python block under 'Using it in an app'"
    return match.group(1)


def run_readme_example(url: str) -> None:
    code = readme_example()
    assert code.count(README_URL) == 1, f"README example no longer opens {README_URL}"
    exec(compile(code.replace(README_URL, repr(url)), str(README), "exec"), {})


@pytest.fixture
def postgres_database() -> Iterator[str]:
    """A fresh database on the shared test server, as a libpq DSN; dropped afterwards."""
    admin_dsn = shared_server_dsn()
    name = "alkstore_readme_" + secrets.token_hex(6)
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(admin_dsn, dbname=name)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def test_readme_example_runs_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    database = tmp_path / "app.db"

    run_readme_example(f"sqlite:///{database}")

    assert capsys.readouterr().out == EXPECTED_OUTPUT
    with closing(sqlite3.connect(database)) as conn:
        assert conn.execute("SELECT id, paid FROM orders").fetchall() == [(7, 1)]


def test_readme_example_runs_on_postgres(
    postgres_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_readme_example(dsn_as_url(postgres_database))

    assert capsys.readouterr().out == EXPECTED_OUTPUT
    with psycopg.connect(postgres_database) as conn:
        assert conn.execute("SELECT id, paid FROM orders").fetchall() == [(7, 1)]


def guide_block(page: str, first_line: str) -> str:
    """The python block of ``docs/guide/<page>`` that starts with ``first_line``."""
    text = (DOCS / "guide" / page).read_text(encoding="utf-8")
    blocks: list[str] = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    for block in blocks:
        if block.startswith(first_line):
            return block
    raise AssertionError(f"docs/guide/{page}: no python block starting {first_line!r}")


def wait_until(condition: Callable[[], bool], timeout_s: float = 20) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_guide_worker_handles_jobs_then_stops_cleanly_on_a_signal(
    tmp_path: Path, signum: signal.Signals
) -> None:
    script = tmp_path / "worker.py"
    script.write_text(guide_block("worker-loop.md", '"""worker.py'), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'app.db'}"
    with alkstore.open(url) as store:
        emails = store.queue("emails")
        sent = emails.enqueue({"to": "a@example.com"})
        hopeless = emails.enqueue({"subject": "no recipient"})
        worker = subprocess.Popen(
            [sys.executable, str(script), url], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            handled = wait_until(
                lambda: (
                    emails.get_job(sent) is None
                    and getattr(emails.get_job(hopeless), "state", None) is JobState.DEAD
                )
            )
            worker.send_signal(signum)
            out, err = worker.communicate(timeout=20)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        dead = emails.get_job(hopeless)

    assert handled
    assert worker.returncode == 0
    assert err == b""  # no KeyboardInterrupt traceback, nothing else either
    assert out.decode().splitlines() == ["ready", "sending {'to': 'a@example.com'}", "stopped"]
    assert dead is not None
    assert dead.last_error == "no recipient"


def test_guide_shutdown_example_stops_worker_and_leader_on_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "shutdown.py"
    url = f"sqlite:///{tmp_path / 'app.db'}"
    code = guide_block("shutdown.md", "import signal")
    assert code.count(README_URL) == 1
    script.write_text(code.replace(README_URL, repr(url)), encoding="utf-8")
    with alkstore.open(url) as store:
        sent = store.queue("emails").enqueue({"to": "a@example.com"})
        worker = subprocess.Popen(
            [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            handled = wait_until(lambda: store.queue("emails").get_job(sent) is None)
            worker.send_signal(signal.SIGTERM)
            out, err = worker.communicate(timeout=20)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()

    assert handled
    assert worker.returncode == 0
    assert err == b""
    assert out.decode().splitlines() == ["sending {'to': 'a@example.com'}"]


def test_guide_async_example_runs_on_sqlite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = guide_block("async.md", "import asyncio")
    assert code.count(README_URL) == 1, "docs/guide/async.md no longer opens sqlite:///app.db"
    url = f"sqlite:///{tmp_path / 'app.db'}"
    exec(compile(code.replace(README_URL, repr(url)), "docs/guide/async.md", "exec"), {})
    assert capsys.readouterr().out == "sending {'to': 'ada@example.com'}\n"
    with alkstore.open(url) as store:
        assert store.queue("emails").claim("checker") is None  # acked, nothing left


def test_guide_fastapi_lifespan_example_enqueues_from_a_request(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    code = guide_block("async.md", "from collections.abc import AsyncIterator")
    assert code.count(README_URL) == 1, "docs/guide/async.md no longer opens sqlite:///app.db"
    url = f"sqlite:///{tmp_path / 'app.db'}"
    namespace: dict[str, object] = {}
    exec(compile(code.replace(README_URL, repr(url)), "docs/guide/async.md", "exec"), namespace)
    with TestClient(namespace["app"]) as client:  # runs the lifespan: opens, then closes
        response = client.post("/signups", params={"email": "ada@example.com"})
    assert response.status_code == 200
    job_id = response.json()["job"]
    with alkstore.open(url) as store:
        handle = store.queue("emails").claim("checker")
        assert handle is not None
        assert (handle.id, handle.payload) == (job_id, {"to": "ada@example.com"})


def test_guide_transactional_enqueue_stamps_a_name_and_a_handle_as_it_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = guide_block(
        "transactional-enqueue.md", "import alkstore\nfrom alkstore import QueueOpts"
    )
    assert code.count(README_URL) == 1
    url = f"sqlite:///{tmp_path / 'app.db'}"
    exec(compile(code.replace(README_URL, repr(url)), "transactional-enqueue.md", "exec"), {})
    assert capsys.readouterr().out == "300 3\n900 10\n"


def test_guide_scheduling_dst_example_prints_what_the_page_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = guide_block("scheduling.md", "import alkstore\nfrom alkstore import ScheduleOpts\n")
    assert code.count(README_URL) == 1
    url = f"sqlite:///{tmp_path / 'app.db'}"
    exec(compile(code.replace(README_URL, repr(url)), "scheduling.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == [
        "01:00 CET hourly",
        "03:00 CEST hourly",
        "03:00 CEST nightly",
        "04:00 CEST hourly",
    ]


def test_guide_scheduling_runner_example_registers_leads_and_stops(tmp_path: Path) -> None:
    # (It returns: the leader thread saw its stop token and ended.)
    code = guide_block("scheduling.md", "import threading\n\nimport alkstore\n")
    assert code.count(README_URL) == 1
    url = f"sqlite:///{tmp_path / 'app.db'}"
    exec(compile(code.replace(README_URL, repr(url)), "scheduling.md", "exec"), {})
    with alkstore.open(url) as store:
        digest = store.get_schedule("digest")
        assert digest is not None
        assert (digest.spec, digest.timezone, digest.catch_up) == (
            "0 9 * * MON-FRI",
            "Europe/Berlin",
            "latest",
        )


def test_guide_scheduling_periodic_example_declares_both_schedules_with_the_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = guide_block(
        "scheduling.md", "import threading\n\nimport alkstore\nfrom alkstore import ScheduleOpts\n"
    )
    assert code.count(README_URL) == 1
    url = f"sqlite:///{tmp_path / 'app.db'}"
    exec(compile(code.replace(README_URL, repr(url)), "scheduling.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == [
        "cleanup maintenance declared",
        "digest digest declared",
    ]
    with alkstore.open(url) as store:
        digest = store.get_schedule("digest")
        assert digest is not None
        assert (digest.spec, digest.timezone) == ("0 9 * * MON-FRI", "Europe/Berlin")


UNIQUE_GUIDE = "unique-jobs.md"


def _run_guide_block(page: str, first_line: str, tmp_path: Path) -> None:
    code = guide_block(page, first_line)
    assert code.count(README_URL) == 1, f"docs/guide/{page} no longer opens sqlite:///app.db"
    url = f"sqlite:///{tmp_path / 'app.db'}"
    exec(compile(code.replace(README_URL, repr(url)), f"docs/guide/{page}", "exec"), {})


@pytest.mark.parametrize(
    ("first_line", "printed"),
    [
        (
            "import alkstore\nfrom alkstore import EnqueueOpts, Unique\n\nwith",
            "False True True\n[False, False, True] True\nsync-user-42 {'user': 42}\n",
        ),
        (
            "import alkstore\nfrom alkstore import EnqueueOpts, Unique\nfrom alkstore.testing",
            "False True\nTrue\nTrue\n",
        ),
        ("import alkstore\nfrom alkstore import EnqueueOpts\n", "False True\nTrue\n"),
    ],
    ids=["one-key", "period-and-states", "transaction"],
)
def test_guide_unique_jobs_examples_print_what_the_page_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first_line: str, printed: str
) -> None:
    _run_guide_block(UNIQUE_GUIDE, first_line, tmp_path)
    assert capsys.readouterr().out == printed


LIMITS_GUIDE = "queue-limits.md"


def test_guide_queue_limits_example_keeps_eight_workers_within_the_limit(tmp_path: Path) -> None:
    code = guide_block(LIMITS_GUIDE, "# partner_calls.py")
    assert code.count(README_URL) == 1, f"docs/guide/{LIMITS_GUIDE} no longer opens app.db"
    script = tmp_path / "partner_calls.py"
    script.write_text(code.replace(README_URL, repr(f"sqlite:///{tmp_path / 'app.db'}")))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=180, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "60 calls, at most 3 at once: True\n"


def test_guide_queue_limits_tenants_example_serves_the_customers_in_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run_guide_block(LIMITS_GUIDE, "# tenants.py", tmp_path)
    assert capsys.readouterr().out == (
        "['customer-big', 'customer-small']\n['big', 'small', 'big', 'small', 'big', 'big']\n"
    )


RESULTS_GUIDE = "results.md"
GUIDE_PG_URL = "postgresql://app@db/app"
GUIDE_SA_URL = "postgresql+psycopg://app@db/app"


@pytest.mark.parametrize(
    ("first_line", "printed"),
    [
        (
            "import alkstore\nfrom alkstore import QueueOpts\nfrom alkstore.testing",
            "completed 0 1200\nTrue\n1\n1 None\n",
        ),
        (
            "import alkstore\nfrom alkstore import QueueOpts, StaleHandle\n",
            "None False\nstale: rolled back\n[(7,)]\n",
        ),
    ],
    ids=["retention", "tx-ack"],
)
def test_guide_results_examples_print_what_the_page_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first_line: str, printed: str
) -> None:
    _run_guide_block(RESULTS_GUIDE, first_line, tmp_path)
    assert capsys.readouterr().out == printed


@pytest.mark.parametrize(
    ("first_line", "order"),
    [("import alkstore\nimport psycopg\n", 7), ("import alkstore\nimport sqlalchemy", 9)],
    ids=["psycopg", "sqlalchemy"],
)
def test_guide_results_tx_ack_examples_commit_the_charge_with_the_ack_on_postgres(
    postgres_database: str, capsys: pytest.CaptureFixture[str], first_line: str, order: int
) -> None:
    code = guide_block(RESULTS_GUIDE, first_line)
    url = dsn_as_url(postgres_database)
    assert GUIDE_PG_URL in code
    code = code.replace(GUIDE_SA_URL, repr_free(url.replace("postgresql://", GUIDE_SA_PREFIX)))
    code = code.replace(GUIDE_PG_URL, repr_free(url))
    exec(compile(code, f"docs/guide/{RESULTS_GUIDE}", "exec"), {})
    assert capsys.readouterr().out == "None\n"
    with psycopg.connect(postgres_database) as conn:
        rows = conn.execute("SELECT order_id FROM charges").fetchall()
    assert rows == [(order,)]


DEPENDENCIES_GUIDE = "dependencies.md"


def test_guide_dependencies_order_pipeline_prints_what_the_page_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run_guide_block(
        DEPENDENCIES_GUIDE, "import alkstore\nfrom alkstore import EnqueueOpts", tmp_path
    )
    assert capsys.readouterr().out == (
        "3 None\n"
        "[(7, 'completed', None), (8, 'dead', 'dependency 5 is dead'), (9, 'completed', None)]\n"
    )


GUIDE_SA_PREFIX = "postgresql+psycopg://"


def repr_free(url: str) -> str:
    """``url`` as it may stand inside the guide's string literal (no quote in it)."""
    assert '"' not in url, url
    assert "\\" not in url, url
    return url
