"""``alkstore worker scenarios.worker_app:worker``, run as a deployment runs it, on
both reference engines.

Each test starts the installed console script (next to ``sys.executable``) from
the repository root, so ``scenarios.worker_app`` imports as an app module does,
against a store provisioned for it (a SQLite file; a fresh schema on the
PostgreSQL server, passed with ``--opt schema=...``). The test enqueues through
the API, watches the jobs' states, reads the worker's log on stderr and stops it
with a signal, as a supervisor does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest
import worker_app

import alkstore
from alkstore import EngineSpec, JobState, Store

ROOT = Path(__file__).resolve().parent.parent
ALKSTORE = Path(sys.executable).with_name("alkstore")
TARGET = "scenarios.worker_app:worker"
USAGE_EXIT = 2
SAFETY_NET_S = 60.0
"""Waits are bounded only so that a hung worker fails the test instead of the run."""


class WorkerProcess:
    """One ``alkstore worker`` child; its stderr is read as it comes."""

    def __init__(self, args: list[str], env: dict[str, str] | None, cwd: Path = ROOT) -> None:
        self.process = subprocess.Popen(
            [str(ALKSTORE), *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def logged(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def send(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self) -> int:
        """The exit code, once stderr is read to its end."""
        code = self.process.wait(timeout=SAFETY_NET_S)
        self._reader.join(SAFETY_NET_S)
        return code

    def stdout(self) -> str:
        """What the handlers printed (read once the process has exited)."""
        assert self.process.stdout is not None
        return self.process.stdout.read()

    def stop(self, signum: int = signal.SIGTERM) -> int:
        self.send(signum)
        return self.wait()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SAFETY_NET_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


@pytest.fixture
def spec(engine_spec: tuple[str, EngineSpec]) -> EngineSpec:
    return engine_spec[1]


@pytest.fixture
def store(spec: EngineSpec) -> Iterator[Store]:
    with closing(alkstore.open(spec.url, **spec.opts)) as opened:
        yield opened


Start = Callable[..., WorkerProcess]


@pytest.fixture
def start(spec: EngineSpec) -> Iterator[Start]:
    """``start(*flags, smtp_latency_s=None)``: the worker on the test's store."""
    started: list[WorkerProcess] = []

    def run(*flags: str, smtp_latency_s: float | None = None) -> WorkerProcess:
        store_args = ["--url", spec.url]
        for name, value in spec.opts.items():
            text = value if isinstance(value, str) else json.dumps(value)
            store_args.append(f"--opt={name}={text}")
        env = None
        if smtp_latency_s is not None:
            env = {**os.environ, "WORKER_APP_SMTP_LATENCY_S": str(smtp_latency_s)}
        child = WorkerProcess(["worker", TARGET, *store_args, *flags], env)
        started.append(child)
        return child

    yield run
    for child in started:  # a failed test must not leave a worker behind
        child.kill()


def state(store: Store, queue: str, job_id: int) -> JobState | None:
    """The job's state; ``None`` once it is acked (gone)."""
    job = store.queue(queue).get_job(job_id)
    return None if job is None else job.state


def settled(store: Store, demo: worker_app.DemoJobs) -> bool:
    """Whether every demo job reached its final outcome."""
    return (
        all(state(store, "emails", job_id) is None for job_id in demo.sent)
        and state(store, "emails", demo.greylisted) is None
        and state(store, "emails", demo.no_recipient) is JobState.DEAD
        and state(store, "thumbnails", demo.thumbnail) is None
        and state(store, "thumbnails", demo.no_image) is JobState.DEAD
    )


# -- processing ---------------------------------------------------------------------
def test_the_worker_gives_every_demo_job_its_outcome(store: Store, start: Start) -> None:
    demo = worker_app.enqueue_demo(store)
    worker = start()

    eventually(lambda: settled(store, demo), "every demo job handled")
    code = worker.stop()

    assert code == 0, worker.log
    no_recipient = store.queue("emails").get_job(demo.no_recipient)
    assert no_recipient is not None
    assert no_recipient.last_error == "no recipient"
    no_image = store.queue("thumbnails").get_job(demo.no_image)
    assert no_image is not None
    assert no_image.last_error == "no image to render"


def test_each_outcome_is_logged_with_its_queue_id_attempt_and_duration(
    store: Store, start: Start
) -> None:
    demo = worker_app.enqueue_demo(store)
    worker = start()
    eventually(lambda: settled(store, demo), "every demo job handled")

    assert worker.stop() == 0
    outcomes = {
        (m["outcome"], m["queue"], int(m["id"]), int(m["attempt"]))
        for m in re.finditer(
            r"job (?P<outcome>\w+): queue=(?P<queue>\w+) id=(?P<id>\d+) "
            r"attempt=(?P<attempt>\d+) duration=\d+\.\d{3}s",
            worker.log,
        )
    }
    assert outcomes == {
        *(("ack", "emails", job_id, 1) for job_id in demo.sent),
        ("retry", "emails", demo.greylisted, 1),
        ("ack", "emails", demo.greylisted, 2),
        ("fail", "emails", demo.no_recipient, 1),
        ("ack", "thumbnails", demo.thumbnail, 1),
        ("fail", "thumbnails", demo.no_image, 1),
    }


def test_a_handlers_own_log_line_names_its_job(store: Store, start: Start) -> None:
    demo = worker_app.enqueue_demo(store)
    worker = start()
    eventually(lambda: settled(store, demo), "every demo job handled")

    assert worker.stop() == 0
    assert worker.logged(
        f"thumbnail of uploads/cat.png ready (queue=thumbnails id={demo.thumbnail} attempt=1)"
    )


# -- stopping -----------------------------------------------------------------------
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_worker_with_exit_0_and_no_traceback(
    start: Start, signum: signal.Signals
) -> None:
    worker = start()
    eventually(lambda: worker.logged("started: emails x4, thumbnails x1"), "the worker started")

    code = worker.stop(signum)

    assert code == 0
    assert "Traceback" not in worker.log
    assert worker.logged(f"{signum.name}: stopping")
    assert worker.lines[-1].endswith("stopped")


def test_a_job_running_at_sigterm_is_finished_and_acked_before_exit(
    store: Store, start: Start
) -> None:
    job_id = store.queue("emails").enqueue({"to": "a@example.com"})
    worker = start(smtp_latency_s=2)
    eventually(lambda: state(store, "emails", job_id) is JobState.PROCESSING, "the job claimed")

    code = worker.stop()

    assert code == 0
    assert state(store, "emails", job_id) is None  # acked on the way out
    assert worker.logged(f"job ack: queue=emails id={job_id} attempt=1")


def test_a_second_signal_stops_at_once_leaving_the_job_unacked(store: Store, start: Start) -> None:
    job_id = store.queue("emails").enqueue({"to": "a@example.com"})
    worker = start("--shutdown-grace", "600", smtp_latency_s=600)
    eventually(lambda: state(store, "emails", job_id) is JobState.PROCESSING, "the job claimed")

    worker.send(signal.SIGTERM)
    # Two signals before the first is handled would read as one: wait for it.
    eventually(lambda: worker.logged("stopping (again to stop at once)"), "the first stop")
    code = worker.stop()

    assert code == 0
    assert "Traceback" not in worker.log
    assert worker.logged(f"job abandoned: queue=emails id={job_id} attempt=1")
    # Never acked: its claim lapses and another worker takes it.
    assert state(store, "emails", job_id) is JobState.PROCESSING


# -- flags --------------------------------------------------------------------------
def test_queues_restricts_the_worker_to_the_named_queues(store: Store, start: Start) -> None:
    demo = worker_app.enqueue_demo(store)
    worker = start("--queues", "emails")
    eventually(lambda: state(store, "emails", demo.greylisted) is None, "the emails handled")

    assert worker.stop() == 0
    thumbnail = store.queue("thumbnails").get_job(demo.thumbnail)
    assert thumbnail is not None
    assert thumbnail.state is JobState.PENDING
    assert thumbnail.attempts == 0  # never claimed
    assert worker.logged("started: emails x4")
    assert not worker.logged("thumbnails x")


def test_concurrency_bounds_the_jobs_running_at_once(store: Store, start: Start) -> None:
    emails = store.queue("emails")
    ids = [emails.enqueue({"to": f"user{n}@example.com"}) for n in range(8)]
    worker = start("--concurrency", "2", "--queues", "emails", smtp_latency_s=0.3)
    seen: set[int] = set()

    def drained() -> bool:
        seen.add(emails.stats().processing)
        return all(emails.get_job(job_id) is None for job_id in ids)

    eventually(drained, "every email sent")

    assert worker.stop() == 0
    assert max(seen) == 2  # the app's own concurrency is 4
    assert worker.logged("started: emails x2")


def test_name_sets_the_worker_id_its_claims_carry(store: Store, start: Start) -> None:
    job_id = store.queue("emails").enqueue({"subject": "no recipient"})
    worker = start("--name", "mailer-1")
    eventually(lambda: state(store, "emails", job_id) is JobState.DEAD, "the job failed")

    assert worker.stop() == 0
    dead = store.queue("emails").get_job(job_id)
    assert dead is not None
    assert dead.worker_id == "mailer-1"


def test_log_level_warning_leaves_out_the_acks(store: Store, start: Start) -> None:
    demo = worker_app.enqueue_demo(store)
    worker = start("--log-level", "warning")
    eventually(lambda: settled(store, demo), "every demo job handled")

    assert worker.stop() == 0
    assert worker.logged(f"job fail: queue=emails id={demo.no_recipient}")
    assert not worker.logged("job ack:")


# -- the guide's example ------------------------------------------------------------
def guide_app() -> str:
    """The ``# app.py`` block of ``docs/guide/worker.md``, as written."""
    text = (ROOT / "docs" / "guide" / "worker.md").read_text(encoding="utf-8")
    blocks: list[str] = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    for block in blocks:
        if block.startswith("# app.py\n"):
            return block
    raise AssertionError("docs/guide/worker.md: no python block starting '# app.py'")


def test_the_guides_app_runs_under_alkstore_worker_from_its_directory(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(guide_app(), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'app.db'}"
    with closing(alkstore.open(url)) as store:
        emails, thumbnails = store.queue("emails"), store.queue("thumbnails")
        sent = emails.enqueue({"to": "a@example.com", "subject": "Your order"})
        nobody = emails.enqueue({"subject": "Lost"})
        thumbnail = thumbnails.enqueue({"image": "cat.png"})
        worker = WorkerProcess(["worker", "app:worker", "--url", url], None, cwd=tmp_path)
        try:
            eventually(
                lambda: (
                    state(store, "emails", sent) is None
                    and state(store, "emails", nobody) is JobState.DEAD
                    and state(store, "thumbnails", thumbnail) is None
                ),
                "the guide's jobs handled",
            )
            code = worker.stop()
        finally:
            worker.kill()

    assert code == 0, worker.log
    assert worker.stdout() == "to a@example.com: Your order\n"
    assert worker.logged(f"thumbnail of cat.png ready (queue=thumbnails id={thumbnail} attempt=1)")


# -- usage errors -------------------------------------------------------------------
def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ALKSTORE), *args],
        cwd=ROOT,
        env={"PATH": str(ALKSTORE.parent)},  # no $ALKSTORE_URL from the caller's shell
        capture_output=True,
        text=True,
        timeout=SAFETY_NET_S,
        check=False,
    )


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("scenarios/worker_app.py:worker", "did you mean 'scenarios.worker_app'?"),
        ("scenarios.no_such_app:worker", "no module named 'scenarios.no_such_app'"),
        ("scenarios.worker_app:wroker", "has no attribute 'wroker'"),
        ("scenarios.worker_app:enqueue_demo", "calling scenarios.worker_app:enqueue_demo()"),
    ],
)
def test_a_target_that_does_not_load_exits_2(tmp_path: Path, target: str, reason: str) -> None:
    done = run_cli("worker", target, "--url", f"sqlite:///{tmp_path / 'app.db'}")

    assert done.returncode == USAGE_EXIT
    assert reason in done.stderr
    assert done.stdout == ""


def test_a_storeless_worker_without_a_url_exits_2() -> None:
    done = run_cli("worker", TARGET)

    assert done.returncode == USAGE_EXIT
    assert "no store URL" in done.stderr


def test_a_queue_the_worker_does_not_serve_exits_2(tmp_path: Path) -> None:
    done = run_cli("worker", TARGET, "--url", f"sqlite:///{tmp_path / 'app.db'}", "--queues", "sms")

    assert done.returncode == USAGE_EXIT
    assert "no task is registered for queue(s) 'sms'" in done.stderr
