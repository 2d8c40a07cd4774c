"""``alkstore worker MODULE:OBJECT``, in-process: loading the app's worker, the flags,
the store it gets, and the usage errors (exit 2).

Each test writes a small app module into its own directory and runs the command
from there (the command puts the current directory on ``sys.path``); the store
is the contract's core over the fake driver. ``scenarios/test_worker_cli.py``
runs the installed script against the real engines.
"""

from __future__ import annotations

import logging
import socket
import sys
import textwrap
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeDriver, FakeOpsDriver

import alkstore
from alkstore.core import CoreStore
from alkstore.worker import Worker

testing = pytest.importorskip("click.testing")  # the cli extra

from alkstore.cli.app import cli  # noqa: E402

USAGE_EXIT = 2
APP_PREFIX = "cli_worker_app_"
_modules = count()

Invoke = Callable[..., Any]


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The directory the command runs in; modules written there are forgotten afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command prepends the cwd
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield tmp_path
    for name in [name for name in sys.modules if name.startswith(APP_PREFIX)]:
        del sys.modules[name]
    root.handlers[:], root.level = handlers, level  # the command's logging setup


def write_app(directory: Path, source: str) -> str:
    """Write ``source`` as a fresh module (a name no earlier test imported); its name."""
    name = f"{APP_PREFIX}{next(_modules)}"
    header = "from alkstore.worker import Fail, Retry, Worker\n"
    (directory / f"{name}.py").write_text(header + textwrap.dedent(source), encoding="utf-8")
    return name


STORELESS_APP = """
    worker = Worker(name="app-worker")

    @worker.task("emails", concurrency=4)
    def send(job):
        pass

    @worker.task("thumbnails")
    async def render(job):
        pass
    """


@pytest.fixture
def opened(store: CoreStore, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """What ``alkstore.open`` was called with; every call returns the fake store."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def open_fake(url: str, **opts: Any) -> CoreStore:
        calls.append((url, opts))
        return store

    monkeypatch.setattr(alkstore, "open", open_fake)
    return calls


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[Worker]:
    """The workers ``run`` was called on, in place of running them."""
    workers: list[Worker] = []
    monkeypatch.setattr(Worker, "run", lambda self: workers.append(self))
    return workers


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    # The caller's shell may export the store: only what a test says counts.
    unset: dict[str, str | None] = {"ALKSTORE_URL": None, "ALKSTORE_OPTS": None}
    return testing.CliRunner().invoke(cli, list(args), env={**unset, **(env or {})})


# -- MODULE:OBJECT ------------------------------------------------------------------
@pytest.mark.parametrize("target", ["app", "app:", ":worker"])
def test_a_target_without_module_and_object_is_a_usage_error(app_dir: Path, target: str) -> None:
    result = invoke("worker", target, "--url", "fake://")

    assert result.exit_code == USAGE_EXIT
    assert "expected MODULE:OBJECT" in result.output


def test_a_file_name_is_a_usage_error_naming_the_module(app_dir: Path) -> None:
    result = invoke("worker", "apps/mail.py:worker", "--url", "fake://")

    assert result.exit_code == USAGE_EXIT
    assert "did you mean 'apps.mail'?" in result.output


def test_a_module_that_is_not_there_is_a_usage_error(app_dir: Path) -> None:
    result = invoke("worker", "no_such_app_module:worker", "--url", "fake://")

    assert result.exit_code == USAGE_EXIT
    assert "no module named 'no_such_app_module'" in result.output


def test_an_object_that_is_not_there_is_a_usage_error(app_dir: Path) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke("worker", f"{module}:wroker", "--url", "fake://")

    assert result.exit_code == USAGE_EXIT
    assert f"module {module!r} has no attribute 'wroker'" in result.output


def test_an_object_that_is_not_a_worker_is_a_usage_error(app_dir: Path) -> None:
    module = write_app(app_dir, "settings = {'debug': True}\n")

    result = invoke("worker", f"{module}:settings", "--url", "fake://")

    assert result.exit_code == USAGE_EXIT
    assert "is a dict, not an alkstore Worker" in result.output


def test_a_factory_returning_something_else_is_a_usage_error(app_dir: Path) -> None:
    module = write_app(app_dir, "def make():\n    return 42\n")

    result = invoke("worker", f"{module}:make", "--url", "fake://")

    assert result.exit_code == USAGE_EXIT
    assert "returned int, not an alkstore Worker" in result.output


def test_a_module_that_raises_shows_its_traceback_and_is_a_usage_error(
    app_dir: Path, opened: list[Any]
) -> None:
    module = write_app(app_dir, "raise RuntimeError('SMTP_HOST is not set')\n")

    result = invoke("worker", f"{module}:worker", "--url", "fake://")

    assert result.exit_code == USAGE_EXIT
    assert "Traceback" in result.output
    assert f"importing module {module!r} failed: RuntimeError: SMTP_HOST is not set" in (
        result.output
    )
    assert opened == []  # nothing was opened for a worker that never loaded


def test_a_worker_object_is_loaded_from_the_current_directory(
    app_dir: Path, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke("worker", f"{module}:worker", "--url", "fake://")

    assert result.exit_code == 0, result.output
    assert [w.name for w in ran] == ["app-worker"]
    assert [t.queue for t in ran[0].tasks] == ["emails", "thumbnails"]


def test_a_factory_returning_a_worker_is_called(
    app_dir: Path, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(
        app_dir,
        """
        def make_worker():
            worker = Worker(name="made")
            worker.task("emails")(lambda job: None)
            return worker
        """,
    )

    result = invoke("worker", f"{module}:make_worker", "--url", "fake://")

    assert result.exit_code == 0, result.output
    assert [w.name for w in ran] == ["made"]


# -- flags ----------------------------------------------------------------------------
def test_the_flags_reach_the_worker(app_dir: Path, opened: list[Any], ran: list[Worker]) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke(
        "worker",
        f"{module}:worker",
        "--url",
        "fake://",
        "--queues",
        "emails",
        "--concurrency",
        "7",
        "--maintenance",
        "--name",
        "mailer-1",
        "--shutdown-grace",
        "5",
        "--snooze-on-stop",
        "--ack-window",
        "0.002",
    )

    assert result.exit_code == 0, result.output
    (worker,) = ran
    assert [(t.queue, t.concurrency) for t in worker.tasks] == [("emails", 7)]
    assert worker.maintenance is True
    assert worker.name == "mailer-1"
    assert worker.shutdown_grace_s == 5.0
    assert worker.snooze_on_stop is True
    assert worker.ack_window_s == 0.002


def test_async_acks_reaches_the_worker(app_dir: Path, opened: list[Any], ran: list[Worker]) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke("worker", f"{module}:worker", "--url", "fake://", "--async-acks")

    assert result.exit_code == 0, result.output
    (worker,) = ran
    assert worker.durable_acks is False


def test_without_async_acks_the_worker_acks_durably(
    app_dir: Path, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke("worker", f"{module}:worker", "--url", "fake://")

    assert result.exit_code == 0, result.output
    (worker,) = ran
    assert worker.durable_acks is True


def test_without_flags_the_worker_keeps_its_own_settings(
    app_dir: Path, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke("worker", f"{module}:worker", "--url", "fake://")

    assert result.exit_code == 0, result.output
    (worker,) = ran
    assert [(t.queue, t.concurrency) for t in worker.tasks] == [("emails", 4), ("thumbnails", 1)]
    assert worker.maintenance is False
    assert worker.shutdown_grace_s == 30.0
    assert worker.snooze_on_stop is False
    assert worker.ack_window_s is None  # its own default, resolved against the engine at run()


def test_a_queue_without_a_task_is_a_usage_error(
    app_dir: Path, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke("worker", f"{module}:worker", "--url", "fake://", "--queues", "emails,sms")

    assert result.exit_code == USAGE_EXIT
    assert "no task is registered for queue(s) 'sms'" in result.output
    assert ran == []


@pytest.mark.parametrize(
    "flags",
    [
        ["--concurrency", "0"],
        ["--concurrency", "1001"],
        ["--queues", " , "],
        ["--shutdown-grace", "-1"],
        ["--ack-window", "2"],
        ["--log-level", "loud"],
        ["--name", ""],
    ],
)
def test_a_bad_flag_value_is_a_usage_error(
    app_dir: Path, opened: list[Any], ran: list[Worker], flags: list[str]
) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke("worker", f"{module}:worker", "--url", "fake://", *flags)

    assert result.exit_code == USAGE_EXIT, result.output
    assert ran == []


# -- the store ------------------------------------------------------------------------
def test_a_storeless_worker_gets_the_url_and_options_after_the_command(
    app_dir: Path, store: CoreStore, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke("worker", f"{module}:worker", "--url", "fake://a", "--opt", "schema=jobs")

    assert result.exit_code == 0, result.output
    assert opened == [("fake://a", {"schema": "jobs"})]
    assert ran[0].store is store


def test_a_storeless_worker_gets_the_groups_url(
    app_dir: Path, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke("--url", "fake://b", "--opt", "schema=jobs", "worker", f"{module}:worker")

    assert result.exit_code == 0, result.output
    assert opened == [("fake://b", {"schema": "jobs"})]


def test_a_storeless_worker_gets_alkstore_url(
    app_dir: Path, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke("worker", f"{module}:worker", env={"ALKSTORE_URL": "fake://env"})

    assert result.exit_code == 0, result.output
    assert opened == [("fake://env", {})]


def test_the_store_the_command_opened_is_closed_when_the_worker_returns(
    app_dir: Path, store: CoreStore, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke("worker", f"{module}:worker", "--url", "fake://")

    assert result.exit_code == 0, result.output
    assert ran  # it ran first
    assert store.closed


def test_a_storeless_worker_without_a_url_is_a_usage_error(
    app_dir: Path, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke("worker", f"{module}:worker")

    assert result.exit_code == USAGE_EXIT
    assert "no store URL" in result.output
    assert ran == []


def test_a_url_before_and_after_the_command_is_a_usage_error(
    app_dir: Path, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke("--url", "fake://a", "worker", f"{module}:worker", "--url", "fake://b")

    assert result.exit_code == USAGE_EXIT
    assert "--url is given twice" in result.output
    assert opened == []


def test_an_option_before_and_after_the_command_is_a_usage_error(
    app_dir: Path, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(app_dir, STORELESS_APP)

    result = invoke(
        "--opt", "schema=a", "worker", f"{module}:worker", "--url", "fake://", "--opt", "schema=b"
    )

    assert result.exit_code == USAGE_EXIT
    assert "'schema' given twice" in result.output


OWN_STORE_APP = """
    import alkstore

    worker = Worker(alkstore.open("fake://own"), name="own")
    worker.task("emails")(lambda job: None)
    """


def test_a_worker_with_its_own_store_refuses_a_url(
    app_dir: Path, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(app_dir, OWN_STORE_APP)

    result = invoke("worker", f"{module}:worker", "--url", "fake://other")

    assert result.exit_code == USAGE_EXIT
    assert "already has a store" in result.output
    assert ran == []


def test_a_worker_with_its_own_store_runs_on_it_whatever_alkstore_url_says(
    app_dir: Path, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(app_dir, OWN_STORE_APP)

    result = invoke("worker", f"{module}:worker", env={"ALKSTORE_URL": "fake://env"})

    assert result.exit_code == 0, result.output
    assert opened == [("fake://own", {})]  # the module's own open only
    assert [w.name for w in ran] == ["own"]


# -- running --------------------------------------------------------------------------
def test_the_command_runs_the_worker_until_it_stops_and_exits_0(
    app_dir: Path, store: CoreStore, driver: FakeDriver, opened: list[Any]
) -> None:
    job_id = store.queue("emails").enqueue({"to": "a@example.com"})
    module = write_app(
        app_dir,
        """
        worker = Worker(name="once")
        handled = []

        @worker.task("emails")
        def send(job):
            handled.append(job.payload)
            worker.stop()  # what a SIGTERM does; the job still finishes and is acked
        """,
    )

    result = invoke("worker", f"{module}:worker", "--url", "fake://")

    assert result.exit_code == 0, result.output
    assert sys.modules[module].handled == [{"to": "a@example.com"}]
    assert [call.args[1] for call in driver.calls if call.name == "ack"] == [job_id]
    assert store.closed


@pytest.mark.parametrize("driver", [FakeOpsDriver()])
def test_metrics_port_serves_the_worker_s_series_while_it_runs(
    app_dir: Path, store: CoreStore, opened: list[Any]
) -> None:
    port = free_loopback_port()
    store.queue("emails").enqueue({"to": "a@example.com"})
    module = write_app(
        app_dir,
        f"""
        import urllib.request

        worker = Worker(name="metered")
        scraped = []

        @worker.task("emails")
        def send(job):
            url = "http://127.0.0.1:{port}/metrics"
            with urllib.request.urlopen(url, timeout=30) as response:
                scraped.append(response.read().decode("utf-8"))
            worker.stop()
        """,
    )

    result = invoke("worker", f"{module}:worker", "--url", "fake://", "--metrics-port", str(port))

    assert result.exit_code == 0, result.output
    (text,) = sys.modules[module].scraped
    assert 'alkstore_worker_jobs_in_flight{queue="emails"} 1.0' in text
    assert 'alkstore_queue_processing{queue="emails"} 1.0' in text
    with pytest.raises(OSError):  # the server stopped with the worker
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_a_metrics_port_in_use_is_refused_before_the_worker_runs(
    app_dir: Path, opened: list[Any], ran: list[Worker]
) -> None:
    module = write_app(app_dir, STORELESS_APP)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        result = invoke(
            "worker", f"{module}:worker", "--url", "fake://", "--metrics-port", str(port)
        )

    assert result.exit_code == 1
    assert f"127.0.0.1:{port}" in result.output
    assert ran == []


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
