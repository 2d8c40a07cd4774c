"""``alkstore worker MODULE:OBJECT``: run an app's ``Worker`` (contract §12).

The app defines the worker -- its tasks and handlers -- in a module, usually
without a store::

    worker = Worker(name="emails-1")

    @worker.task("emails", concurrency=4)
    def send(job): ...

and the command imports it (the current directory first on ``sys.path``, as
an app server does), gives it the store ``--url`` names, applies the flags,
sets up logging on stderr and runs it until SIGTERM or SIGINT (a second signal
stops it at once). It exits 0 after a stop; a ``MODULE:OBJECT`` that does not
load is a usage error (exit 2).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import traceback
from typing import Any, NoReturn
from wsgiref.simple_server import WSGIServer

import click
from click.core import ParameterSource

from ..errors import InvalidOptions
from ..worker import MAX_CONCURRENCY, Worker
from ..worker.runtime import (
    DEFAULT_ACK_GROUP_MIN_SLOTS,
    DEFAULT_ACK_WINDOW_S,
    MAX_ACK_WINDOW_S,
    MAX_SHUTDOWN_GRACE_S,
)
from .arguments import engine_options
from .logs import JobFormatter, StderrHandler
from .settings import Settings, open_store

log = logging.getLogger("alkstore.worker")

TARGET = "MODULE:OBJECT"
LOG_LEVELS = ("debug", "info", "warning", "error")


def _bad_target(message: str) -> click.BadParameter:
    return click.BadParameter(message, param_hint=repr(TARGET))


def _split_target(target: str) -> tuple[str, str]:
    """``"app.workers:main"`` -> ``("app.workers", "main")``, both dotted identifiers."""
    module, sep, attribute = target.partition(":")
    if not sep or not module or not attribute:
        raise _bad_target(f"expected {TARGET}, e.g. app:worker; got {target!r}")
    if module.endswith(".py") or not all(part.isidentifier() for part in module.split(".")):
        # The usual slip: a file name or path instead of a module name.
        hint = module.removesuffix(".py").replace("/", ".").strip(".")
        raise _bad_target(
            f"{module!r} is not a module name (file app.py is module app): did you mean {hint!r}?"
        )
    if not all(part.isidentifier() for part in attribute.split(".")):
        raise _bad_target(f"{attribute!r} is not a name in the module")
    return module, attribute


def _import(module: str) -> Any:
    # As an app server does: the app lives where the command is started from, and a
    # console script's sys.path starts with its own bin directory instead.
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module == exc.name or module.startswith(exc.name + ".")):
            raise _bad_target(
                f"no module named {exc.name!r} (looked in {here} and on sys.path)"
            ) from None
        _failed(f"importing module {module!r}", exc)  # the app's own missing import
    except Exception as exc:  # whatever the app's module raised: show where
        _failed(f"importing module {module!r}", exc)


def _failed(doing: str, exc: Exception) -> NoReturn:
    # The app's traceback is what its author needs to fix it; then the one-line reason.
    click.echo(traceback.format_exc().rstrip(), err=True)
    raise _bad_target(f"{doing} failed: {type(exc).__name__}: {exc}") from None


def load_worker(target: str) -> Worker:
    """The ``Worker`` that ``MODULE:OBJECT`` names (or a zero-argument callable returns).

    Raises:
        click.BadParameter: the module does not import, has no such object, or the
            object is neither a ``Worker`` nor a callable returning one.
    """
    module_name, attribute = _split_target(target)
    found: Any = _import(module_name)
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise _bad_target(f"module {module_name!r} has no attribute {attribute!r}")
        found = getattr(found, part)
    if isinstance(found, Worker):
        return found
    if callable(found):
        try:
            made = found()
        except Exception as exc:
            _failed(f"calling {target}()", exc)
        if isinstance(made, Worker):
            return made
        raise _bad_target(f"{target}() returned {type(made).__name__}, not an alkstore Worker")
    raise _bad_target(
        f"{target} is a {type(found).__name__}, not an alkstore Worker "
        "(or a function returning one)"
    )


def _queue_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    """``--queues emails,thumbnails`` as a list; an empty list is a usage error."""
    if value is None:
        return None
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise click.BadParameter("name a queue or more, e.g. --queues emails,reports", ctx, param)
    return names


def _given(ctx: click.Context, name: str) -> bool:
    """Whether the group's option ``name`` was given on the command line."""
    return ctx.find_root().get_parameter_source(name) is ParameterSource.COMMANDLINE


def _store_settings(ctx: click.Context, url: str | None, options: tuple[str, ...]) -> Settings:
    """The group's ``--url``/``--opt`` with the command's own on top.

    ``alkstore worker app:worker --url URL`` reads as well as ``alkstore --url URL
    worker app:worker``; given in both places, an option is refused rather than
    one silently winning. The command's own replace ``$ALKSTORE_URL`` and
    ``$ALKSTORE_OPTS``, as the group's do.
    """
    group = ctx.find_object(Settings)
    assert group is not None  # the group callback always sets it
    if url is not None and _given(ctx, "url"):
        raise click.UsageError("--url is given twice: before and after 'worker'", ctx)
    own = engine_options(options)
    inherited = group.options if _given(ctx, "options") or not own else {}
    twice = sorted(set(own) & set(inherited))
    if twice:
        raise InvalidOptions(f"engine option(s) {', '.join(map(repr, twice))} given twice")
    return Settings(url=url if url is not None else group.url, options={**inherited, **own})


def _attach_store(
    ctx: click.Context, worker: Worker, target: str, settings: Settings, explicit: bool
) -> None:
    """Give a storeless worker the store the settings name; refuse two stores."""
    if worker.store is None:
        ctx.obj = settings  # what open_store reads, for this command only
        worker.store = open_store(ctx)  # closed when the command ends
        return
    # A worker built with its own store: an explicit --url/--opt would be a second
    # one. $ALKSTORE_URL is only the shell's default for every command, so it
    # yields to the app's store.
    if explicit:
        raise click.UsageError(
            f"{target} already has a store; drop --url/--opt, or define it as "
            "Worker() without one so that --url chooses",
            ctx,
        )


def _serve_metrics(loaded: Worker, host: str, port: int) -> WSGIServer:
    """Observe ``loaded`` with ``WorkerMetrics`` and serve them with its queues' gauges."""
    try:
        from prometheus_client import CollectorRegistry

        from .. import prometheus
    except ImportError as exc:
        raise click.UsageError(
            f"--metrics-port needs the 'metrics' extra ({exc.name} is missing): "
            "pip install 'alkstore[metrics]'"
        ) from None
    queues = [task.queue for task in loaded.tasks]
    registry = CollectorRegistry()  # the app's default registry is served too
    metrics = prometheus.WorkerMetrics(registry)
    metrics.declare(queues)
    loaded.observe(metrics)
    try:
        server = prometheus.serve(port, host, registry=registry, store=loaded.store, queues=queues)
    except OSError as exc:
        raise click.ClickException(f"cannot serve metrics on {host}:{port}: {exc}") from None
    log.info("metrics on http://%s:%d/metrics", host, server.server_port)
    return server


@click.command()
@click.argument("target", metavar=TARGET)
@click.option(
    "--url",
    metavar="URL",
    help="The store, when the worker has none (as the group's --url; default: $ALKSTORE_URL).",
)
@click.option(
    "--opt",
    "options",
    multiple=True,
    metavar="NAME=VALUE",
    help="An engine option, as the group's --opt (repeatable).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, MAX_CONCURRENCY),
    metavar="N",
    help="Run up to N jobs of each task at once (default: each task's own).",
)
@click.option(
    "--queues",
    callback=_queue_list,
    metavar="A,B",
    help="Serve only these of the worker's queues (comma-separated; default: all).",
)
@click.option(
    "--maintenance/--no-maintenance",
    default=None,
    help="Also lead the scheduler and sweep every queue (default: as the worker says).",
)
@click.option("--name", metavar="NAME", help="The worker id its claims carry (default: its own).")
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    help="Log on stderr from this level (info: one line per job outcome).",
)
@click.option(
    "--shutdown-grace",
    type=click.FloatRange(0, MAX_SHUTDOWN_GRACE_S),
    metavar="SECONDS",
    help="How long a stop waits for running jobs (default: the worker's own, 30).",
)
@click.option(
    "--snooze-on-stop/--no-snooze-on-stop",
    default=None,
    help="Snooze the jobs still running when the grace ends, rather than let their "
    "claims lapse (default: as the worker says).",
)
@click.option(
    "--ack-window",
    type=click.FloatRange(0, MAX_ACK_WINDOW_S),
    metavar="SECONDS",
    help="Group the acks, retries and fails of jobs finishing within SECONDS into one "
    "commit (0: each commits on its own; > 0 needs the transactions profile). Default: "
    "the worker's "
    f"own: {DEFAULT_ACK_WINDOW_S:g} where the engine has transactions and the worker "
    f"{DEFAULT_ACK_GROUP_MIN_SLOTS} slots or more, else 0.",
)
@click.option(
    "--async-acks/--durable-acks",
    default=None,
    help="Let acks commit without waiting for the disk where the engine can (PostgreSQL: "
    "an engine crash may lose the last acks, and those jobs run again; every other write "
    "stays durable; default: as the worker says, durable).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    metavar="PORT",
    help="Serve Prometheus metrics (the worker's runs and its queues) on PORT, any path "
    "(needs the metrics extra).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    metavar="HOST",
    help="The address --metrics-port listens on.",
)
@click.pass_context
def worker(
    ctx: click.Context,
    target: str,
    url: str | None,
    options: tuple[str, ...],
    concurrency: int | None,
    queues: list[str] | None,
    maintenance: bool | None,
    name: str | None,
    log_level: str,
    shutdown_grace: float | None,
    snooze_on_stop: bool | None,
    ack_window: float | None,
    async_acks: bool | None,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run the Worker that MODULE:OBJECT names (e.g. app:worker) until SIGTERM or
    Ctrl-C: running jobs finish first (up to the shutdown grace); a second
    signal stops at once. The current directory is searched for MODULE first."""
    # Before the import, so the app's own import-time logging is formatted too.
    handler = StderrHandler(sys.stderr)
    handler.setFormatter(JobFormatter())
    logging.basicConfig(level=log_level.upper(), handlers=[handler])
    loaded = load_worker(target)
    loaded.configure(
        queues=queues,
        concurrency=concurrency,
        maintenance=maintenance,
        name=name,
        shutdown_grace_s=shutdown_grace,
        snooze_on_stop=snooze_on_stop,
        ack_window_s=ack_window,
        durable_acks=None if async_acks is None else not async_acks,
    )
    settings = _store_settings(ctx, url, options)
    explicit = url is not None or bool(options) or _given(ctx, "url") or _given(ctx, "options")
    _attach_store(ctx, loaded, target, settings, explicit)
    server = None if metrics_port is None else _serve_metrics(loaded, metrics_host, metrics_port)
    try:
        loaded.run()  # blocks; SIGTERM/SIGINT end it gracefully
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
