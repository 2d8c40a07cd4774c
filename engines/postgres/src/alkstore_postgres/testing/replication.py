"""A primary and a streaming standby: two throwaway clusters on loopback, for failover runs.

``ReplicatedPostgres`` starts a primary (a ``LocalPostgres``) and a hot standby
cloned from it with ``pg_basebackup -R`` (so the clone starts in standby mode
and streams from the primary), both as the ``postgres`` system user when run as
root, each on a free loopback port with its unix socket in its own temp dir.
With ``synchronous=True`` the primary lists the standby in
``synchronous_standby_names``, so a commit returns only once the standby has
flushed it; otherwise replication is asynchronous. ``fail_over()`` is the
scripted failover: the primary stopped hard (``pg_ctl stop -m immediate``: no
checkpoint, every client cut off) and the standby promoted (``pg_ctl
promote``). Leaving the ``with`` block -- also on an exception or a failed
start -- stops both clusters and deletes both temp dirs.

``url`` names both servers in libpq's multi-host form with
``target_session_attrs=read-write``: a client reaches whichever accepts writes.

With ``cuttable=True`` the standby streams through a loopback ``CuttableProxy``;
``cut_replication()`` cuts it, so the standby falls behind: with asynchronous
replication the primary goes on committing, and what it commits from then on is
the tail a failover loses.
"""

from __future__ import annotations

import os
import tempfile
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from .proxy import CuttableProxy
from .server import HOST, SUPERUSER, LocalPostgres, PostgresStartError, _run, _teardown

__all__ = ["STANDBY_NAME", "ReplicatedPostgres", "StandbyPostgres"]

STANDBY_NAME = "alkstore_standby"
"""The standby's ``application_name``: what ``synchronous_standby_names`` lists."""


class StandbyPostgres(LocalPostgres):
    """A hot standby of ``primary``: its data dir is a ``pg_basebackup -R`` of the
    primary's (``standby.signal`` and ``primary_conninfo`` written by ``-R``)."""

    def __init__(
        self, primary: LocalPostgres, *, upstream_port: int | None = None, timeout: float = 60.0
    ) -> None:
        """``upstream_port``: where the standby reaches the primary (a proxy in front of
        it), by default the primary's own port."""
        # pg_basebackup copies the primary's postgresql.conf: once promoted, a server that
        # kept its synchronous_standby_names would wait forever for a standby of its own
        # at every commit (a real failover's trap: the new primary has no standby yet).
        super().__init__(
            bindir=primary.bindir,
            timeout=timeout,
            settings={"hot_standby": True, "synchronous_standby_names": ""},
        )
        self._primary = primary
        self._upstream_port = upstream_port

    def _init_cluster(self) -> None:
        # As LocalPostgres does for initdb: the temp dir and its finalizer first, so a
        # failed clone leaves nothing behind either.
        tmp = Path(tempfile.mkdtemp(prefix="alkstore-pg-standby-"))
        self._tmp = tmp
        self._cleanup = weakref.finalize(
            self, _teardown, self.bindir / "pg_ctl", self.data_dir, tmp, self._run_as
        )
        if self._run_as is not None:
            os.chown(tmp, self._run_as.uid, self._run_as.gid)
        port = self._upstream_port or self._primary.port
        conninfo = f"host={HOST} port={port} user={SUPERUSER} application_name={STANDBY_NAME}"
        result = _run(
            [
                str(self.bindir / "pg_basebackup"),
                "-D", str(self.data_dir),
                "-d", conninfo,
                "-R",  # standby.signal + primary_conninfo (with the application_name)
                "-X", "stream",
                "--checkpoint=fast",
                "--no-sync",  # throwaway, like initdb --no-sync
            ],
            run_as=self._run_as,
            cwd=tmp,
            timeout=max(self._timeout, 120.0),
        )  # fmt: skip
        if result.returncode:
            raise PostgresStartError(
                f"pg_basebackup of {HOST}:{port} into {tmp} failed "
                f"(exit {result.returncode}):\n{result.stdout}{result.stderr}"
            )

    def promote(self) -> None:
        """``pg_ctl promote -w``: returns once the server accepts writes."""
        result = self._pg_ctl("-w", "-t", str(int(self._timeout)), "promote")
        if result.returncode:
            raise PostgresStartError(
                f"pg_ctl promote failed (exit {result.returncode}): "
                f"{result.stdout}{result.stderr}".strip()
                + self._log_tail()
            )


class ReplicatedPostgres:
    """A primary and its streaming standby, started on ``__enter__`` and deleted --
    both -- on ``__exit__`` (see the module's doc)."""

    def __init__(
        self,
        *,
        synchronous: bool,
        cuttable: bool = False,
        fsync: bool = True,
        settings: Mapping[str, str | int | bool] | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.synchronous = synchronous
        primary_settings: dict[str, str | int | bool] = {
            # Short enough that a standby cut off notices soon; harmless otherwise.
            "wal_sender_timeout": "10s",
            **(settings or {}),
        }
        if synchronous:
            # With synchronous_commit's default (on), a commit returns once the standby
            # has flushed it; a promotion replays everything flushed first.
            primary_settings["synchronous_standby_names"] = STANDBY_NAME
        self.primary = LocalPostgres(fsync=fsync, settings=primary_settings, timeout=timeout)
        self.standby = StandbyPostgres(self.primary, timeout=timeout)
        self._cuttable = cuttable
        self._proxy: CuttableProxy | None = None
        self._timeout = timeout
        self.stopped_at: float | None = None
        """``time.time()`` when the primary was stopped (by ``fail_over``): wall-clock
        time, so other processes' records can be compared with it."""
        self.promoted_at: float | None = None
        """``time.time()`` when ``pg_ctl promote -w`` returned."""

    @property
    def url(self) -> str:
        """Both servers, libpq's multi-host URL: the one that accepts writes is used."""
        return (
            f"postgresql://{SUPERUSER}@{HOST}:{self.primary.port},{HOST}:{self.standby.port}"
            "/postgres?target_session_attrs=read-write"
        )

    def __enter__(self) -> ReplicatedPostgres:
        try:
            self.primary.start()
            if self._cuttable:
                self._proxy = CuttableProxy((HOST, self.primary.port))
                self.standby = StandbyPostgres(
                    self.primary, upstream_port=self._proxy.port, timeout=self._timeout
                )
            self.standby.start()
            self.wait_streaming()
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

    def close(self) -> None:
        """Stop both clusters and delete their temp dirs; idempotent."""
        try:
            self.standby.close()
        finally:
            try:
                self.primary.close()
            finally:
                if self._proxy is not None:
                    self._proxy.close()

    def cut_replication(self) -> None:
        """Cut the standby off its primary (``cuttable=True`` only): it stops receiving
        WAL, and keeps retrying in vain until the primary is gone."""
        if self._proxy is None:
            raise RuntimeError("cut_replication() needs ReplicatedPostgres(cuttable=True)")
        self._proxy.cut()

    def wait_streaming(self) -> None:
        """Wait until the primary's WAL sender reports the standby streaming (and, when
        synchronous, as the ``sync`` standby): before that, a synchronous primary's
        commits would wait for it."""
        want = "sync" if self.synchronous else "async"
        query = (
            "SELECT sync_state FROM pg_stat_replication "
            f"WHERE application_name = '{STANDBY_NAME}' AND state = 'streaming'"
        )
        deadline = time.monotonic() + self._timeout
        seen = ""
        while time.monotonic() < deadline:
            seen = self._psql(self.primary, query)
            if seen == want:
                return
            time.sleep(0.05)
        raise PostgresStartError(
            f"the standby is not streaming ({want}) after {self._timeout:g} s "
            f"(pg_stat_replication says {seen!r})" + self.standby._log_tail()
        )

    def replay_lag_bytes(self) -> int:
        """How far the standby's replay is behind the primary's WAL, in bytes."""
        query = (
            "SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), -1)::bigint "
            f"FROM pg_stat_replication WHERE application_name = '{STANDBY_NAME}'"
        )
        text = self._psql(self.primary, query)
        return int(text) if text else -1

    def fail_over(self) -> None:
        """The scripted failover: stop the primary hard, then promote the standby."""
        self.primary.stop("immediate")
        self.stopped_at = time.time()
        self.standby.promote()
        self.promoted_at = time.time()

    def _psql(self, server: LocalPostgres, query: str) -> str:
        # psql, not psycopg: like server.py, this fixture needs nothing but the server's
        # binaries. A client, so it does not need to run as the server's user.
        result = _run(
            [
                str(server.bindir / "psql"),
                "-X", "-A", "-t", "-q",
                "-h", HOST, "-p", str(server.port), "-U", SUPERUSER, "-d", "postgres",
                "-c", query,
            ],
            run_as=None,
            cwd=Path(tempfile.gettempdir()),
            timeout=30,
        )  # fmt: skip
        return "" if result.returncode else result.stdout.strip()
