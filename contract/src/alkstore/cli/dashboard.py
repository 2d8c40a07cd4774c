"""``alkstore dashboard``: the web dashboard of the store ``--url`` names, served by
uvicorn (needs the ``dashboard`` extra as well as ``cli``).

Closed by default: it refuses to start without credentials (``--user`` with
``--password`` or ``$ALKSTORE_DASHBOARD_PASSWORD``, or a bearer token in
``$ALKSTORE_DASHBOARD_TOKEN``), unless it is explicitly ``--read-only`` on a
loopback address, where anyone who can reach it may look but not act.
"""

from __future__ import annotations

from typing import Any

import click

from .settings import Settings, open_store

DEFAULT_PORT = 8790
PASSWORD_ENV = "ALKSTORE_DASHBOARD_PASSWORD"
TOKEN_ENV = "ALKSTORE_DASHBOARD_TOKEN"
GRACEFUL_STOP_S = 2


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="The port.")
@click.option("--user", metavar="NAME", help="The HTTP Basic user (with a password).")
@click.option(
    "--password",
    envvar=PASSWORD_ENV,
    metavar="SECRET",
    help=f"The user's password (default: ${PASSWORD_ENV}; prefer it to the flag, "
    "which other users may see in the process list).",
)
@click.option(
    "--token",
    envvar=TOKEN_ENV,
    metavar="SECRET",
    help=f"A bearer token granting the same access (default: ${TOKEN_ENV}).",
)
@click.option(
    "--read-only",
    is_flag=True,
    help="No actions for anyone. Without credentials this is the only way to start, "
    "and only on a loopback address.",
)
@click.option(
    "--root-path",
    default="",
    metavar="PATH",
    help="The path prefix a reverse proxy serves it under (e.g. /alkstore).",
)
@click.option(
    "--poll",
    "poll_s",
    type=click.FloatRange(min=0.1, max=60),
    default=2.0,
    show_default=True,
    help="Seconds between re-reads of the store for open pages, besides its wakes.",
)
@click.pass_context
def dashboard(
    ctx: click.Context,
    host: str,
    port: int,
    user: str | None,
    password: str | None,
    token: str | None,
    read_only: bool,
    root_path: str,
    poll_s: float,
) -> None:
    """Serve the web dashboard: queues, jobs, dead letters, schedules."""
    try:
        import uvicorn

        from ..dashboard import Credentials, create_app, is_loopback
    except ImportError as exc:
        raise click.UsageError(
            f"the dashboard needs the 'dashboard' extra ({exc.name} is missing): "
            "pip install 'alkstore[dashboard]'"
        ) from None
    if (user is None) != (password is None):
        raise click.UsageError("--user and --password go together")
    if user is None and token is None:
        if not read_only:
            raise click.UsageError(
                "refusing to serve the dashboard without credentials: pass --user NAME "
                f"with ${PASSWORD_ENV} (or --password), or set ${TOKEN_ENV}; or run it "
                "--read-only on a loopback address"
            )
        if not is_loopback(host):
            raise click.UsageError(
                f"refusing to serve a dashboard without credentials on {host}: without "
                "them --read-only is allowed on a loopback address only (127.0.0.1, ::1)"
            )
    try:
        credentials = (
            None
            if user is None and token is None
            else Credentials(
                user=user, password=password, token=token, access="read" if read_only else "write"
            )
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    settings = ctx.find_object(Settings)
    assert settings is not None
    store = open_store(ctx)

    def authorize(request: Any) -> Any:
        if credentials is None:
            return "read"  # --read-only on loopback, checked above
        return credentials(request.headers)

    app = create_app(
        store,
        authorize=authorize,
        read_only=read_only,
        url=settings.url,
        poll_s=poll_s,
        challenge=None if credentials is None else credentials.challenge,
    )
    mode = "read-only" if read_only else "read & write"
    click.echo(f"alkstore dashboard ({mode}) on http://{host}:{port}{root_path}/", err=True)
    # Open pages hold their event streams open: a stop cuts them after a moment
    # instead of waiting for every browser tab to close.
    uvicorn.run(
        app,
        host=host,
        port=port,
        root_path=root_path,
        log_level="warning",
        timeout_graceful_shutdown=GRACEFUL_STOP_S,
    )
