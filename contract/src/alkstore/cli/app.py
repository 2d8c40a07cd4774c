"""The click commands of ``alkstore`` (needs the ``cli`` extra: click and rich).

Exit codes: 0 success; 1 a refused operation (one line on stderr: an unknown
job, nothing to redrive among the named ids, an engine without the ops profile,
an unreachable database); 2 a usage error (click's own, or a value the
contract refuses: a malformed queue name, a bad engine option, a ``worker``
MODULE:OBJECT that does not load). ``worker`` (``worker.py``) exits 0 once a
signal has stopped it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO, Any, NoReturn

import click
from rich.console import RenderableType

from .. import metrics
from ..api import QueueConsumer
from ..constants import MAX_JOBS_PAGE
from ..errors import (
    AlkstoreError,
    EngineUnavailable,
    InvalidName,
    InvalidOptions,
    InvalidSpec,
    PayloadError,
)
from ..options import EnqueueOpts, Limits
from ..values import JobState
from . import documents, tables
from .arguments import DURATION_FORMAT, engine_options, parse_duration, parse_instant, parse_payload
from .dashboard import dashboard
from .selection import (
    LOOKUP_QUEUE,
    RedrivePlan,
    carry_out,
    plan_all,
    plan_matching,
    plan_named,
    queue_handle,
)
from .settings import Settings, open_store
from .worker import worker

REFUSED_EXIT = 1


class Refused(click.ClickException):
    """An operation the store (or the command) refused: exit 1, one line on stderr."""

    exit_code = REFUSED_EXIT

    def show(self, file: IO[Any] | None = None) -> None:
        # One line, so a script's log keeps the whole reason together.
        click.echo(f"alkstore: error: {' '.join(self.format_message().split())}", err=True)


class AlkstoreGroup(click.Group):
    """Turns the contract's errors into the command line's exit codes."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (InvalidName, InvalidOptions, InvalidSpec, PayloadError) as exc:
            raise click.UsageError(str(exc), ctx) from None
        except AlkstoreError as exc:
            raise Refused(str(exc)) from None


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """``7d``, ``12h``, ``30m``, ``90s`` as seconds; anything else is a usage error."""
    if value is None:
        return None
    try:
        return parse_duration(value)
    except InvalidOptions as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def _json_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print one JSON document instead of a table (shapes: docs/operations.md).",
    )(command)


def _emit(as_json: bool, document: dict[str, Any], view: Callable[[], RenderableType]) -> None:
    if as_json:
        click.echo(documents.dumps(document))
    else:
        tables.console().print(view())


def _say(message: str) -> None:
    tables.console().print(message, markup=False, highlight=False)


def _refuse(message: str) -> NoReturn:
    raise Refused(message)


@click.group(cls=AlkstoreGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="ALKSTORE_URL",
    metavar="URL",
    help="The store, as alkstore.open takes it (default: $ALKSTORE_URL).",
)
@click.option(
    "--opt",
    "options",
    multiple=True,
    envvar="ALKSTORE_OPTS",
    metavar="NAME=VALUE",
    help="An engine option (repeatable; $ALKSTORE_OPTS holds several, space-separated), "
    "e.g. --opt schema=jobs. VALUE is a JSON number, true, false or null when it reads "
    "as one, else text.",
)
@click.version_option(package_name="alkstore", prog_name="alkstore")
@click.pass_context
def cli(ctx: click.Context, url: str | None, options: tuple[str, ...]) -> None:
    """Look into and operate an alkstore store: stats, jobs, redrive, purge, pause;
    run an app's worker."""
    ctx.obj = Settings(url=url, options=engine_options(options))


cli.add_command(worker)
cli.add_command(dashboard)


@cli.command()
@click.option(
    "--format",
    "output",
    type=click.Choice(["table", "json", "prometheus"]),
    help="table (default), json (as --json) or prometheus (text exposition format 0.0.4).",
)
@_json_option
@click.option("--watch", is_flag=True, help="Repeat every --interval seconds until Ctrl-C.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.5),
    default=2.0,
    show_default=True,
    help="Seconds between refreshes with --watch.",
)
@click.pass_context
def stats(
    ctx: click.Context, output: str | None, as_json: bool, watch: bool, interval: float
) -> None:
    """Every queue's ready, scheduled, processing, lapsed and dead counts, the age
    of its oldest ready job, whether it is paused, and (with the workers profile)
    how many jobs workers acked in the current minute and the last hour."""
    if as_json and output not in (None, "json"):
        raise click.UsageError("--json and --format are two ways to say one thing: pick one")
    output = "json" if as_json else (output or "table")
    if watch and output == "prometheus":
        raise click.UsageError("--watch cannot repeat --format prometheus: scrape it instead")
    store = open_store(ctx)
    console = tables.console()

    def show() -> None:
        found = store.stats()  # one call: the counts come from the claim indexes
        # The workers profile's acked counts (contract 1.2 §19.6); None without it. A
        # queue with acked jobs in the hour is listed even when it holds none now.
        throughput = metrics.read_throughput(store)
        found = metrics.QueueMemory().fill(found, throughput or ())
        if output == "prometheus":
            click.echo(metrics.render_stats(found, throughput), nl=False)
        elif output == "json":
            click.echo(documents.dumps(documents.stats_document(found, throughput)))
        else:
            if watch:
                console.clear()  # only a terminal is cleared
            console.print(tables.stats_table(found, int(store.clock.now()), throughput))

    if not watch:
        show()
        return
    try:
        while True:
            try:
                show()
            except EngineUnavailable as exc:
                # A watch outlives a database restart: say so and keep polling.
                click.echo(f"alkstore: warning: {' '.join(str(exc).split())}", err=True)
            time.sleep(interval)
    except KeyboardInterrupt:
        return  # Ctrl-C is how a watch ends


@cli.command()
@click.argument("queue")
@click.option(
    "--state",
    type=click.Choice([state.value for state in JobState]),
    help="Only jobs in this state (default: all).",
)
@click.option(
    "--after",
    "after_id",
    type=click.IntRange(min=0),
    default=0,
    metavar="ID",
    help="Only jobs with ids greater than ID: the next page starts after the last id shown.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_JOBS_PAGE),
    default=100,
    show_default=True,
    help=f"The most jobs to show (1..{MAX_JOBS_PAGE}).",
)
@_json_option
@click.pass_context
def jobs(
    ctx: click.Context, queue: str, state: str | None, after_id: int, limit: int, as_json: bool
) -> None:
    """A page of QUEUE's jobs in id order."""
    handle = queue_handle(open_store(ctx), queue)
    page = handle.jobs(state, after_id=after_id, limit=limit)
    next_after = page[-1].id if len(page) == limit else None
    _emit(
        as_json,
        documents.jobs_document(handle.name, state, page, next_after),
        lambda: tables.jobs_table(handle.name, page, next_after),
    )


@cli.command()
@click.argument("job_id", metavar="ID", type=click.IntRange(min=0))
@_json_option
@click.pass_context
def job(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """One job, whatever its queue, with its error history."""
    found = open_store(ctx).queue(LOOKUP_QUEUE).get_job(job_id)
    if found is None:
        _refuse(f"no job {job_id}: acked, cancelled, purged, or never enqueued")
    _emit(as_json, documents.job_document(found), lambda: tables.job_view(found))


@cli.command()
@click.argument("queue")
@click.argument("job_ids", metavar="ID...", nargs=-1, required=True, type=click.IntRange(min=0))
@_json_option
@click.pass_context
def cancel(ctx: click.Context, queue: str, job_ids: tuple[int, ...], as_json: bool) -> None:
    """Delete pending or processing jobs of QUEUE, whoever holds them (a claim of a
    cancelled job can no longer ack). Dead jobs are left to redrive and purge."""
    handle = queue_handle(open_store(ctx), queue)
    named = tuple(dict.fromkeys(job_ids))  # a repeated id names one job
    cancelled = tuple(job_id for job_id in named if handle.cancel(job_id))
    if not cancelled:
        _refuse(f"none of the named jobs is a pending or processing job of queue {handle.name!r}")
    missed = tuple(job_id for job_id in named if job_id not in cancelled)
    _emit(
        as_json,
        documents.cancel_document(handle.name, cancelled, missed),
        lambda: f"cancelled {len(cancelled)} job(s) of {handle.name}",
    )
    if missed and not as_json:
        _say(f"not cancelled (not live jobs of {handle.name}): {', '.join(map(str, missed))}")


def _error_contains_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--error-contains",
        metavar="TEXT",
        callback=_nonempty,
        help="The dead jobs whose errors contain TEXT (ignoring case).",
    )(command)


def _nonempty(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise click.BadParameter("must not be empty: it would match every dead job", ctx, param)
    return value


def _dead_plan(
    handle: QueueConsumer, ids: tuple[int, ...], error_contains: str | None
) -> RedrivePlan:
    if ids:
        return plan_named(handle, ids)
    if error_contains is not None:
        return plan_matching(handle, error_contains)
    return plan_all(handle)


@cli.command()
@click.argument("queue")
@click.option("--id", "ids", multiple=True, type=click.IntRange(min=0), help="A dead job's id.")
@click.option("--all", "every", is_flag=True, help="Every dead job of QUEUE.")
@_error_contains_option
@click.option("--dry-run", is_flag=True, help="Show which dead jobs would go; change nothing.")
@_json_option
@click.pass_context
def redrive(
    ctx: click.Context,
    queue: str,
    ids: tuple[int, ...],
    every: bool,
    error_contains: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Give dead jobs of QUEUE another life: each becomes a new pending job (same
    payload, priority and stamps; attempts 0; due now) and its dead row goes."""
    if sum((bool(ids), every, error_contains is not None)) != 1:
        raise click.UsageError(
            "name the dead jobs: --id N (repeatable), --all, or --error-contains TEXT"
        )
    handle = queue_handle(open_store(ctx), queue)
    handle.stats()  # an engine without the ops profile refuses here, dry run or not
    plan = _dead_plan(handle, ids, error_contains)
    if dry_run:
        moves: tuple[tuple[int | None, int | None], ...] = tuple((j.id, None) for j in plan.jobs)
        skipped = plan.skipped
    else:
        result = carry_out(handle, plan)
        moves, skipped = result.moves, plan.skipped + result.raced
    if ids and not moves:
        _refuse(f"none of the named jobs is a dead job of queue {handle.name!r}")
    new_ids = {old: new for old, new in moves if old is not None and new is not None}
    verb = "would redrive" if dry_run else "redrove"
    title = f"{verb} {len(moves)} dead job(s) of {handle.name}"
    if dry_run:
        title += " (dry run: nothing changed)"

    def view() -> RenderableType:
        return tables.dead_jobs_table(title, plan.jobs, new_ids)

    _emit(as_json, documents.redrive_document(handle.name, dry_run, moves, skipped), view)
    if skipped and not as_json:
        _say(f"skipped (not dead jobs of {handle.name}): {', '.join(map(str, skipped))}")


@cli.command()
@click.argument("queue")
@click.option("--id", "ids", multiple=True, type=click.IntRange(min=0), help="A dead job's id.")
@click.option(
    "--older-than",
    callback=_duration,
    metavar="DURATION",
    help=f"Dead jobs that died longer ago than this: {DURATION_FORMAT}.",
)
@click.option("--all", "every", is_flag=True, help="Every dead job of QUEUE.")
@_error_contains_option
@_json_option
@click.pass_context
def purge(
    ctx: click.Context,
    queue: str,
    ids: tuple[int, ...],
    older_than: int | None,
    every: bool,
    error_contains: str | None,
    as_json: bool,
) -> None:
    """Delete dead jobs of QUEUE for good."""
    if sum((bool(ids), older_than is not None, every, error_contains is not None)) != 1:
        raise click.UsageError(
            "say which dead jobs: --id N (repeatable), --older-than, --all, "
            "or --error-contains TEXT"
        )
    handle = queue_handle(open_store(ctx), queue)
    if error_contains is not None:
        matching = [job.id for job in plan_matching(handle, error_contains).jobs]
        purged = handle.purge_dead(matching) if matching else 0
    elif ids:
        purged = handle.purge_dead(list(ids))
        if not purged:
            _refuse(f"none of the named jobs is a dead job of queue {handle.name!r}")
    else:
        purged = handle.purge_dead(older_than_s=older_than)
    _emit(
        as_json,
        documents.purge_document(handle.name, purged),
        lambda: f"purged {purged} dead job(s) of {handle.name}",
    )


@cli.command()
@click.argument("queue")
@_json_option
@click.pass_context
def pause(ctx: click.Context, queue: str, as_json: bool) -> None:
    """Stop handing out QUEUE's jobs, in every process, until resume. Enqueues,
    sweeps and jobs already claimed carry on."""
    handle = queue_handle(open_store(ctx), queue)
    changed = handle.pause()
    message = f"paused {handle.name}" if changed else f"{handle.name} was already paused"
    _emit(as_json, documents.pause_document(handle.name, True, changed), lambda: message)


@cli.command()
@click.argument("queue")
@click.option(
    "--concurrency",
    type=int,
    default=None,
    help="At most N of QUEUE's jobs processing at once, in every process.",
)
@click.option("--rate", type=int, default=None, help="At most R claims start per --per window.")
@click.option(
    "--per",
    "per",
    default=None,
    help=f"The rate's sliding window, a duration ({DURATION_FORMAT}).",
)
@click.option(
    "--concurrency-per-key",
    "per_key",
    type=int,
    default=None,
    help="At most N jobs of each limit key processing at once; the keys served in turn.",
)
@click.option(
    "--rate-per-key",
    "rate_per_key",
    type=int,
    default=None,
    help="At most R claims of each limit key start per --per window.",
)
@click.option("--clear", is_flag=True, help="Remove QUEUE's limits.")
@_json_option
@click.pass_context
def limits(
    ctx: click.Context,
    queue: str,
    concurrency: int | None,
    rate: int | None,
    per: str | None,
    per_key: int | None,
    rate_per_key: int | None,
    clear: bool,
    as_json: bool,
) -> None:
    """Show QUEUE's limits, set them (--concurrency N, --rate R --per DURATION,
    --concurrency-per-key N, --rate-per-key R --per DURATION) or remove them (--clear).
    Every process's claims honour them from their next claim."""
    given = (concurrency, rate, per, per_key, rate_per_key)
    setting = any(value is not None for value in given)
    if clear and setting:
        raise click.UsageError("--clear removes the limits: give it no limit to set")
    wanted = None
    if setting:
        try:
            window = None if per is None else parse_duration(per)
            wanted = Limits(
                concurrency,
                rate=rate,
                per=window,
                concurrency_per_key=per_key,
                rate_per_key=rate_per_key,
            )
        except (InvalidOptions, ValueError) as exc:
            raise click.BadParameter(
                str(exc),
                ctx,
                param_hint="--concurrency/--rate/--per/--concurrency-per-key/--rate-per-key",
            ) from None
    handle = queue_handle(open_store(ctx), queue)
    changed: bool | None = None
    if wanted is not None:
        changed = handle.set_limits(wanted)
    elif clear:
        changed = handle.clear_limits()
    stored = handle.limits()
    shown = f"{handle.name}: {tables.limits_text(stored) or 'no limit'}"
    if changed is False:
        shown += " (unchanged)"
    _emit(as_json, documents.limits_document(handle.name, stored, changed), lambda: shown)


@cli.command()
@click.argument("queue")
@_json_option
@click.pass_context
def resume(ctx: click.Context, queue: str, as_json: bool) -> None:
    """Hand out QUEUE's jobs again; waiting workers wake at once."""
    handle = queue_handle(open_store(ctx), queue)
    changed = handle.resume()
    message = f"resumed {handle.name}" if changed else f"{handle.name} was not paused"
    _emit(as_json, documents.pause_document(handle.name, False, changed), lambda: message)


@cli.command()
@_json_option
@click.pass_context
def schedules(ctx: click.Context, as_json: bool) -> None:
    """Every schedule with its next fire time."""
    found = open_store(ctx).schedules()
    _emit(as_json, documents.schedules_document(found), lambda: tables.schedules_table(found))


@cli.command()
@click.argument("queue")
@click.argument("payload", metavar="PAYLOAD")
@click.option(
    "--delay",
    callback=_duration,
    metavar="DURATION",
    help=f"Due this long from now: {DURATION_FORMAT}.",
)
@click.option(
    "--run-at",
    metavar="WHEN",
    help="Due at this instant: ISO 8601 with a UTC offset (2026-12-24T09:00:00+01:00) "
    "or epoch seconds.",
)
@click.option("--priority", type=int, default=0, show_default=True, help="Higher runs first.")
@click.option("--max-attempts", type=int, help="Override the queue's attempt budget.")
@click.option(
    "--expires",
    callback=_duration,
    metavar="DURATION",
    help=f"Expire this long after enqueue if not done: {DURATION_FORMAT}.",
)
@click.option(
    "--unique",
    "unique_key",
    metavar="KEY",
    help="A unique key (contract §15): while a pending or processing job of QUEUE "
    "holds KEY, print that job's id and enqueue nothing.",
)
@_json_option
@click.pass_context
def enqueue(
    ctx: click.Context,
    queue: str,
    payload: str,
    delay: int | None,
    run_at: str | None,
    priority: int,
    max_attempts: int | None,
    expires: int | None,
    unique_key: str | None,
    as_json: bool,
) -> None:
    """Enqueue one job into QUEUE and print its id (for cron jobs and scripts).

    PAYLOAD is JSON text ('{"to": "ada@example.com"}', '42', '"text"'), or - to
    read it from standard input. The job is stamped as store.queue(QUEUE) stamps
    it (DEFAULT_QUEUE_OPTS; an outbox's backing queue, OUTBOX_QUEUE_OPTS).
    """
    if delay is not None and run_at is not None:
        raise click.UsageError("give --delay or --run-at, not both")
    value = parse_payload(sys.stdin.read() if payload == "-" else payload)
    opts = EnqueueOpts(
        delay=delay,
        priority=priority,
        max_attempts=max_attempts,
        expires=expires,
        run_at=None if run_at is None else parse_instant(run_at),
        unique=unique_key,
    )
    handle = queue_handle(open_store(ctx), queue)
    job_id = handle.enqueue(value, opts)
    _emit(
        as_json,
        documents.enqueue_document(handle.name, job_id, job_id.duplicate),
        lambda: str(job_id),
    )
