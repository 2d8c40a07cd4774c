"""A throwaway PgBouncer on loopback, in front of a PostgreSQL server, for tests.

``LocalPgBouncer(server_dsn)`` writes a private configuration into a temp dir
(``pool_mode = transaction`` by default; every database name is passed through
to the server the DSN names, as that DSN's user and password), starts
``pgbouncer`` on ``127.0.0.1`` and a free port, and stops it (SIGTERM, then
SIGKILL) and deletes the temp dir on ``close()``, on ``__exit__``, on garbage
collection and at interpreter exit. ``url_for(dsn)`` is the same database
reached through the pooler.

The binary is ``$ALKSTORE_PGBOUNCER`` when set, else ``pgbouncer`` on PATH,
else ``/usr/sbin/pgbouncer`` (Debian's package); none of them:
``PgBouncerNotFoundError`` saying how to install it. Running as root, it runs as
the ``postgres`` system user (PgBouncer refuses to run as root).

Standard library only, like ``server``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Literal
from urllib.parse import quote, unquote, urlsplit, urlunsplit

__all__ = [
    "PGBOUNCER_ENV",
    "LocalPgBouncer",
    "PgBouncerNotFoundError",
    "PgBouncerStartError",
    "find_pgbouncer",
]

PGBOUNCER_ENV = "ALKSTORE_PGBOUNCER"
HOST = "127.0.0.1"
DEBIAN_PATH = Path("/usr/sbin/pgbouncer")
PoolMode = Literal["session", "transaction", "statement"]

DEFAULT_POOL_SIZE = 40
"""Server connections per database and user: more than the transactions the kit's
tests keep open at once (each store's pool is ``pool_max_size`` = 10 client
connections, most of them idle between statements)."""


class PgBouncerNotFoundError(RuntimeError):
    """No ``pgbouncer`` binary was found."""


class PgBouncerStartError(RuntimeError):
    """PgBouncer did not start or did not accept connections; the message has its log."""


def find_pgbouncer() -> Path:
    """``$ALKSTORE_PGBOUNCER``, else ``pgbouncer`` on PATH, else ``/usr/sbin/pgbouncer``."""
    override = os.environ.get(PGBOUNCER_ENV)
    if override:
        if Path(override).is_file():
            return Path(override)
        raise PgBouncerNotFoundError(f"{PGBOUNCER_ENV}={override!r} is not a file")
    on_path = shutil.which("pgbouncer")
    if on_path:
        return Path(on_path)
    if DEBIAN_PATH.is_file():
        return DEBIAN_PATH
    raise PgBouncerNotFoundError(
        "pgbouncer not found (tried $ALKSTORE_PGBOUNCER, PATH and /usr/sbin/pgbouncer): "
        "install it (apt-get install pgbouncer) or set ALKSTORE_PGBOUNCER to the binary"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _server_of(dsn: str) -> dict[str, str]:
    """Host, port, user and password of a ``postgresql://`` DSN (the server PgBouncer
    connects to)."""
    parts = urlsplit(dsn)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"LocalPgBouncer needs a postgresql:// URL, got {parts.scheme!r}")
    server = {"host": parts.hostname or HOST, "port": str(parts.port or 5432)}
    server["user"] = unquote(parts.username or "postgres")
    if parts.password is not None:
        server["password"] = unquote(parts.password)
    return server


def _ini_value(value: str) -> str:
    # A libpq-style value inside PgBouncer's [databases] line: quoted, quotes doubled.
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _stop(process: subprocess.Popen[bytes], tmp_dir: Path) -> None:
    """Stop PgBouncer and delete its temp dir (a ``weakref.finalize`` callback: it must
    not reference the ``LocalPgBouncer``)."""
    if process.poll() is None:
        with contextlib.suppress(OSError):
            process.send_signal(signal.SIGTERM)  # immediate shutdown
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    shutil.rmtree(tmp_dir, ignore_errors=True)


class LocalPgBouncer:
    """A PgBouncer on ``127.0.0.1:port`` in front of the server ``server_dsn`` names."""

    host = HOST

    def __init__(
        self,
        server_dsn: str,
        *,
        pool_mode: PoolMode = "transaction",
        pool_size: int = DEFAULT_POOL_SIZE,
        settings: Mapping[str, str | int] | None = None,
        timeout: float = 30.0,
        run_as: str = "postgres",
    ) -> None:
        self.binary = find_pgbouncer()
        self.pool_mode = pool_mode
        self._server = _server_of(server_dsn)
        self._settings: dict[str, str | int] = {
            "pool_mode": pool_mode,
            "default_pool_size": pool_size,
            "max_client_conn": 2000,
            **(settings or {}),
        }
        self._timeout = timeout
        self._uid_gid: tuple[int, int] | None = None
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam(run_as)
            except KeyError:
                raise PgBouncerStartError(
                    f"running as root but there is no {run_as!r} user to run PgBouncer as"
                ) from None
            self._uid_gid = (entry.pw_uid, entry.pw_gid)
        self._tmp: Path | None = None
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._cleanup: Callable[[], object] | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("LocalPgBouncer has not been started")
        return self._port

    @property
    def log_file(self) -> Path:
        if self._tmp is None:
            raise RuntimeError("LocalPgBouncer has not been started")
        return self._tmp / "pgbouncer.log"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def url_for(self, dsn: str) -> str:
        """``dsn`` (a ``postgresql://`` URL of the server behind) through the pooler: the
        same user, password, database and parameters, this pooler's host and port."""
        parts = urlsplit(dsn)
        auth = ""
        if parts.username is not None:
            auth = quote(unquote(parts.username), safe="")
            if parts.password is not None:
                auth += ":" + quote(unquote(parts.password), safe="")
            auth += "@"
        return urlunsplit(("postgresql", f"{auth}{HOST}:{self.port}", parts.path, parts.query, ""))

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        if self._process is not None:
            return
        tmp = Path(tempfile.mkdtemp(prefix="alkstore-pgbouncer-"))
        self._tmp = tmp
        if self._uid_gid is not None:
            os.chown(tmp, *self._uid_gid)
        for attempt in range(3):
            port = _free_port()
            self._write_config(tmp, port)
            process = subprocess.Popen(
                [str(self.binary), str(tmp / "pgbouncer.ini")],
                cwd=tmp,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                user=self._uid_gid[0] if self._uid_gid else None,
                group=self._uid_gid[1] if self._uid_gid else None,
                extra_groups=[] if self._uid_gid else None,
                # Its own process group is ours: a Ctrl-C or a kill of the run's group
                # stops it too, even when no finalizer gets to run.
            )
            self._process = process
            self._cleanup = weakref.finalize(self, _stop, process, tmp)
            try:
                self._wait_ready(port)
            except PgBouncerStartError as exc:
                process.kill()
                process.wait(10)
                self._process = None
                if attempt < 2 and "Address already in use" in str(exc):
                    self._cleanup.detach()  # the temp dir serves the next attempt
                    continue  # the probed port was taken meanwhile: try another
                self.close()
                raise
            self._port = port
            return

    def close(self) -> None:
        """Stop PgBouncer and delete its temp dir. Idempotent."""
        if self._cleanup is not None:
            self._cleanup()  # a weakref.finalize runs once
        self._process = None

    def __enter__(self) -> LocalPgBouncer:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ----------------------------------------------------------------- internals

    def _write_config(self, tmp: Path, port: int) -> None:
        server = self._server
        target = " ".join(
            f"{key}={_ini_value(value)}"
            for key, value in server.items()
            if key in ("host", "port", "user", "password")
        )
        settings = {
            **self._settings,
            # Last, so ``settings`` never opens it beyond loopback.
            "listen_addr": HOST,
            "listen_port": port,
            "unix_socket_dir": "",
            "auth_type": "trust",
            "auth_file": str(tmp / "userlist.txt"),
            "logfile": str(tmp / "pgbouncer.log"),
            "pidfile": str(tmp / "pgbouncer.pid"),
            "admin_users": server["user"],
        }
        lines = ["[databases]", f"* = {target}", "", "[pgbouncer]"]
        lines += [f"{key} = {value}" for key, value in settings.items()]
        (tmp / "pgbouncer.ini").write_text("\n".join(lines) + "\n", encoding="utf-8")
        # auth_type = trust still needs the user listed; the server checks the password.
        user = server["user"].replace('"', '""')
        (tmp / "userlist.txt").write_text(f'"{user}" ""\n', encoding="utf-8")
        if self._uid_gid is not None:
            for name in ("pgbouncer.ini", "userlist.txt"):
                os.chown(tmp / name, *self._uid_gid)

    def _wait_ready(self, port: int) -> None:
        deadline = time.monotonic() + self._timeout
        process = self._process
        assert process is not None
        while True:
            if process.poll() is not None:
                raise PgBouncerStartError(
                    f"pgbouncer exited with {process.returncode}" + self._log_tail()
                )
            try:
                socket.create_connection((HOST, port), timeout=1).close()
                return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise PgBouncerStartError(
                    f"pgbouncer did not listen on {HOST}:{port} within {self._timeout}s"
                    + self._log_tail()
                )
            time.sleep(0.05)

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        tail = "\n".join(text.splitlines()[-lines:])
        return f"\n--- last lines of {self.log_file} ---\n{tail}"
