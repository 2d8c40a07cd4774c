"""Throwaway PostgreSQL servers for tests and benchmarks.

* ``LocalPostgres`` -- a private cluster (initdb + pg_ctl) in a temp dir,
  reachable only over loopback TCP and a unix socket inside that temp dir.
* ``provision_server()`` -- picks a server: ``$ALKSTORE_PG_DSN``, else a Docker
  container via testcontainers, else ``LocalPostgres``.

Standard library only: psycopg, docker and testcontainers are never required.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import importlib.util
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

__all__ = [
    "BINDIR_ENV",
    "DSN_ENV",
    "LocalPostgres",
    "PostgresNotFoundError",
    "PostgresStartError",
    "ProvisionedServer",
    "find_bindir",
    "provision_server",
]

BINDIR_ENV = "ALKSTORE_PG_BINDIR"
DSN_ENV = "ALKSTORE_PG_DSN"
HOST = "127.0.0.1"
SUPERUSER = "postgres"
DOCKER_IMAGE = "postgres:15"

StopMode = Literal["smart", "fast", "immediate"]
Route = Literal["env", "docker", "local"]

_SERVER_BINARIES = ("initdb", "pg_ctl", "postgres")
_NO_SERVER_HELP = (
    "no PostgreSQL server available: set ALKSTORE_PG_DSN to a server, "
    "or run a Docker daemon with testcontainers installed (pip install testcontainers), "
    "or install PostgreSQL server binaries (apt-get install postgresql; "
    "set ALKSTORE_PG_BINDIR if they are not found)"
)


class PostgresNotFoundError(RuntimeError):
    """No usable PostgreSQL server binaries were found."""


class PostgresStartError(RuntimeError):
    """initdb or server start-up failed; the message carries the output/log tail."""


# --------------------------------------------------------------------------- binaries


def find_bindir() -> Path:
    """Return the directory holding ``initdb``, ``pg_ctl`` and ``postgres``.

    Order: ``$ALKSTORE_PG_BINDIR``; ``pg_config --bindir``; the directory of
    ``initdb`` on PATH; the newest ``/usr/lib/postgresql/*/bin`` (Debian keeps
    server binaries off PATH).
    """
    override = os.environ.get(BINDIR_ENV)
    if override:
        # An explicit override is authoritative: quietly using some other
        # install would hide a typo and test the wrong server version.
        if _is_bindir(Path(override)):
            return Path(override)
        raise PostgresNotFoundError(
            f"{BINDIR_ENV}={override!r} does not contain {', '.join(_SERVER_BINARIES)}"
        )
    for candidate in _bindir_candidates():
        if _is_bindir(candidate):
            return candidate
    raise PostgresNotFoundError(
        "no PostgreSQL server binaries found (tried pg_config --bindir, initdb on PATH, "
        "/usr/lib/postgresql/*/bin)"
    )


def _is_bindir(path: Path) -> bool:
    return all((path / name).is_file() for name in _SERVER_BINARIES)


def _bindir_candidates() -> Iterator[Path]:
    pg_config = shutil.which("pg_config")
    if pg_config:
        bindir = ""
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            bindir = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
        if bindir:
            yield Path(bindir)
    initdb = shutil.which("initdb")
    if initdb:
        # Resolve symlinks (/usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb)
        # so pg_ctl, postgres and pg_isready are found next to the real binary.
        yield Path(os.path.realpath(initdb)).parent
        yield Path(initdb).parent
    yield from sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version_key, reverse=True)


def _version_key(bindir: Path) -> tuple[int, ...]:
    # "/usr/lib/postgresql/9.6/bin" -> (9, 6); numeric so 15 sorts above 9.6.
    return tuple(int(part) for part in re.findall(r"\d+", bindir.parent.name))


def _parse_version(text: str) -> str:
    # "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)" -> "15.18"
    match = re.search(r"\(PostgreSQL\)\s+(\S+)", text)
    return match.group(1) if match else text.strip()


# --------------------------------------------------------------------------- processes


@dataclasses.dataclass(frozen=True)
class _RunAs:
    uid: int
    gid: int


def _run(
    cmd: list[str], *, run_as: _RunAs | None, cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    # user/group/extra_groups is what `runuser -u postgres --` does, minus PAM and
    # the dependency on util-linux (PATH may be stripped). extra_groups=[] drops
    # root's supplementary groups. cwd must be reachable by that user, otherwise
    # initdb/pg_ctl fail with "could not identify current directory".
    return subprocess.run(
        cmd,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        user=run_as.uid if run_as else None,
        group=run_as.gid if run_as else None,
        extra_groups=[] if run_as else None,
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _conf_value(value: str | int | bool) -> str:
    # Every GUC accepts a quoted value, so quoting everything is always safe.
    if isinstance(value, bool):
        return "on" if value else "off"
    return "'" + str(value).replace("'", "''") + "'"


def _teardown(pg_ctl: Path, data_dir: Path, tmp_dir: Path, run_as: _RunAs | None) -> None:
    """Kill the server if up and delete the temp dir.

    Runs from ``weakref.finalize`` (explicit close, garbage collection or
    interpreter exit), so it must not reference the ``LocalPostgres`` itself.
    """
    if (data_dir / "postmaster.pid").exists():
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            # immediate: no checkpoint, the data is about to be deleted anyway.
            _run(
                [str(pg_ctl), "-D", str(data_dir), "-m", "immediate", "-w", "-t", "30", "stop"],
                run_as=run_as,
                cwd=tmp_dir,
                timeout=40,
            )
    shutil.rmtree(tmp_dir, ignore_errors=True)


# --------------------------------------------------------------------------- LocalPostgres


class LocalPostgres:
    """A throwaway PostgreSQL cluster, started on ``__enter__``, deleted on ``__exit__``.

    Listens on 127.0.0.1 (a free port) and on a unix socket in ``socket_dir``;
    authentication is ``trust`` for superuser ``postgres``. When running as
    root the server runs as the ``run_as`` system user (PostgreSQL refuses root).
    """

    host = HOST

    def __init__(
        self,
        *,
        fsync: bool = True,
        max_connections: int = 200,
        settings: Mapping[str, str | int | bool] | None = None,
        timeout: float = 60.0,
        bindir: str | Path | None = None,
        run_as: str = "postgres",
    ) -> None:
        """``fsync`` stays on by default so benchmark numbers are honest.

        ``settings`` are extra postgresql.conf parameters (e.g. shared_buffers);
        they cannot override the loopback-only network settings.
        """
        self.bindir = Path(bindir) if bindir is not None else find_bindir()
        self._run_as: _RunAs | None = None
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam(run_as)
            except KeyError:
                raise PostgresStartError(
                    f"running as root but there is no {run_as!r} user to run PostgreSQL as"
                ) from None
            self._run_as = _RunAs(entry.pw_uid, entry.pw_gid)
        self._settings: dict[str, str | int | bool] = {
            "max_connections": max_connections,
            "fsync": fsync,
            **(settings or {}),
        }
        self._timeout = timeout
        self._tmp: Path | None = None
        self._port: int | None = None
        self._cleanup: Callable[[], object] | None = None
        self._closed = False

    # ----------------------------------------------------------------- properties

    @property
    def socket_dir(self) -> Path:
        """Directory of the unix socket (usable as libpq ``host``); also the temp dir."""
        if self._tmp is None:
            raise RuntimeError("LocalPostgres has not been started")
        return self._tmp

    @property
    def data_dir(self) -> Path:
        return self.socket_dir / "data"

    @property
    def log_file(self) -> Path:
        return self.socket_dir / "postgres.log"

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("LocalPostgres has not been started")
        return self._port

    @property
    def dsn(self) -> str:
        return f"postgresql://{SUPERUSER}@{HOST}:{self.port}/postgres"

    @functools.cached_property
    def version(self) -> str:
        """Server version from ``postgres --version``, e.g. ``"15.18"`` (allowed as root)."""
        out = subprocess.run(
            [str(self.bindir / "postgres"), "--version"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
        return _parse_version(out)

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start the server (creating the cluster on first use); no-op if running."""
        if self._closed:
            raise RuntimeError("LocalPostgres is closed")
        if self._tmp is None:
            self._init_cluster()
        if self._is_running():
            return
        if self._port is not None:
            self._pg_ctl_start()  # restart: the port is already in postgresql.conf
        else:
            for attempt in range(3):
                # The probed port is only free until someone else binds it;
                # on a lost race pick another one rather than fail the run.
                port = _free_port()
                self._write_settings(port)
                try:
                    self._pg_ctl_start()
                except PostgresStartError as exc:
                    if attempt < 2 and "Address already in use" in str(exc):
                        continue
                    raise
                self._port = port
                break
        self._wait_ready()

    def stop(self, mode: StopMode = "fast") -> None:
        """Stop the server, keeping the data dir; no-op if not running."""
        if self._tmp is None or not self._is_running():
            return
        result = self._pg_ctl("-m", mode, "-w", "-t", str(int(self._timeout)), "stop")
        if result.returncode and self._is_running():
            raise RuntimeError(f"pg_ctl stop failed: {result.stdout}{result.stderr}".strip())

    def restart(self) -> None:
        """Fast stop, then start on the same port and data dir; drops all connections."""
        self.stop("fast")
        self.start()

    def close(self) -> None:
        """Kill the server and delete the temp dir. Idempotent."""
        self._closed = True
        if self._cleanup is not None:
            self._cleanup()  # a weakref.finalize only ever runs once

    def __enter__(self) -> LocalPostgres:
        try:
            self.start()
        except BaseException:
            # A failed or interrupted (Ctrl-C) start must not leak a server or temp dir.
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

    def _init_cluster(self) -> None:
        tmp = Path(tempfile.mkdtemp(prefix="alkstore-pg-"))
        self._tmp = tmp
        # Registered before anything can fail, so the temp dir (and later the
        # server) is cleaned up on close, garbage collection or interpreter exit.
        self._cleanup = weakref.finalize(
            self, _teardown, self.bindir / "pg_ctl", self.data_dir, tmp, self._run_as
        )
        if self._run_as is not None:
            os.chown(tmp, self._run_as.uid, self._run_as.gid)
        result = _run(
            [
                str(self.bindir / "initdb"),
                "-D", str(self.data_dir),
                "-U", SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",  # throwaway: nothing to make durable
            ],
            run_as=self._run_as,
            cwd=tmp,
            timeout=max(self._timeout, 120.0),
        )  # fmt: skip
        if result.returncode:
            hint = " (the server user must be able to reach it)" if self._run_as else ""
            raise PostgresStartError(
                f"initdb in {tmp}{hint} failed (exit {result.returncode}):\n"
                f"{result.stdout}{result.stderr}"
            )

    def _write_settings(self, port: int) -> None:
        settings = {
            **self._settings,
            # Applied last so `settings` can never open the server beyond loopback.
            "listen_addresses": HOST,
            "port": port,
            "unix_socket_directories": str(self.socket_dir),
        }
        # Appending keeps the file's owner (root may be writing a postgres-owned
        # file) and later lines win, so a retried port simply overrides.
        with open(self.data_dir / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write("\n# alkstore throwaway server\n")
            conf.writelines(f"{key} = {_conf_value(val)}\n" for key, val in settings.items())

    def _pg_ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _run(
            [str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), *args],
            run_as=self._run_as,
            cwd=self.socket_dir,
            timeout=self._timeout + 10,
        )

    def _pg_ctl_start(self) -> None:
        # -l is required, not just handy: without it the postmaster inherits
        # our captured stdout pipe and subprocess.run would never return.
        result = self._pg_ctl(
            "-l", str(self.log_file), "-w", "-t", str(int(self._timeout)), "start"
        )
        if result.returncode:
            raise PostgresStartError(
                f"pg_ctl start failed (exit {result.returncode}): "
                f"{result.stdout}{result.stderr}".strip()
                + self._log_tail()
            )

    def _wait_ready(self) -> None:
        # pg_ctl -w already waited for the postmaster; this confirms the TCP
        # listener answers the protocol. pg_isready is a client, so no run_as.
        pg_isready = self.bindir / "pg_isready"
        deadline = time.monotonic() + self._timeout
        while True:
            if pg_isready.is_file():
                ready = subprocess.run(
                    [str(pg_isready), "-q", "-h", HOST, "-p", str(self.port),
                     "-U", SUPERUSER, "-d", "postgres", "-t", "2"],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=10,
                ).returncode == 0  # fmt: skip
            else:
                try:
                    socket.create_connection((HOST, self.port), timeout=1).close()
                    ready = True
                except OSError:
                    ready = False
            if ready:
                return
            if time.monotonic() > deadline:
                raise PostgresStartError(
                    f"server did not accept connections on {HOST}:{self.port} "
                    f"within {self._timeout}s" + self._log_tail()
                )
            time.sleep(0.05)

    def _is_running(self) -> bool:
        return (self.data_dir / "postmaster.pid").exists()

    def _log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return f"\n(no server log at {self.log_file})"
        tail = "\n".join(text.splitlines()[-lines:])
        return f"\n--- last lines of {self.log_file} ---\n{tail}"


# --------------------------------------------------------------------------- provisioning


@dataclasses.dataclass(frozen=True)
class ProvisionedServer:
    dsn: str  # libpq URL, usable by psycopg.connect()
    route: Route
    server_version: str | None = None  # unknown for "env" (we never connect)


@contextlib.contextmanager
def provision_server() -> Iterator[ProvisionedServer]:
    """Yield a PostgreSQL server for the duration of the ``with`` block.

    Order: ``$ALKSTORE_PG_DSN`` as is (nothing started); a ``postgres:15``
    container if testcontainers and a Docker daemon are available; a
    ``LocalPostgres`` from local server binaries; else ``RuntimeError``.
    """
    dsn = os.environ.get(DSN_ENV)
    if dsn:
        yield ProvisionedServer(dsn, "env")
        return

    container = _start_container() if _docker_available() else None
    if container is not None:
        try:
            yield ProvisionedServer(
                _libpq_url(container.get_connection_url()), "docker", _container_version(container)
            )
        finally:
            container.stop()
        return

    try:
        local = LocalPostgres()
    except PostgresNotFoundError as exc:
        raise RuntimeError(f"{_NO_SERVER_HELP} [{exc}]") from exc
    with local:
        yield ProvisionedServer(local.dsn, "local", local.version)


def _docker_available() -> bool:
    """Cheap check: testcontainers importable and a Docker daemon answering a ping."""
    if importlib.util.find_spec("testcontainers") is None:
        return False
    # Don't even import the docker SDK (slow) when there is clearly no daemon.
    if not os.environ.get("DOCKER_HOST") and not Path("/var/run/docker.sock").exists():
        return False
    try:
        client = importlib.import_module("docker").from_env(timeout=5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # any failure means "no usable docker": fall through
        return False


def _start_container() -> Any:
    """Start a postgres container, or return None (e.g. image pull fails offline)."""
    container: Any = None
    try:
        module = importlib.import_module("testcontainers.postgres")
        container = module.PostgresContainer(DOCKER_IMAGE)
        container.start()
    except Exception:
        if container is not None:
            with contextlib.suppress(Exception):
                container.stop()
        return None
    return container


def _container_version(container: Any) -> str | None:
    with contextlib.suppress(Exception):
        exit_code, output = container.exec(["postgres", "--version"])
        if exit_code == 0:
            return _parse_version(output.decode())
    return None


def _libpq_url(url: str) -> str:
    # testcontainers returns SQLAlchemy URLs ("postgresql+psycopg2://...");
    # libpq only understands the plain scheme.
    return re.sub(r"^postgres(?:ql)?\+[^:]*://", "postgresql://", url)
