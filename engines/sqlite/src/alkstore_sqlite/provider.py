"""The ``alkstore.EngineProvider`` registered under the entry point ``sqlite``."""

from __future__ import annotations

import os
import secrets
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from alkstore import Capabilities, EngineSpec, Store
from alkstore.clock import Clock
from alkstore.constants import CONTRACT_VERSION
from alkstore.core import CoreStore
from alkstore.driver import Driver

from . import contention
from .driver import SqliteDriver
from .leftovers import database_files
from .options import parse_options
from .url import database_path, database_url

__version__ = "0.1.0"

ENGINE_NAME = "sqlite"
PROVISIONED_FILE = "store.db"


class SqliteEngine:
    name = ENGINE_NAME
    version = __version__
    contract_version = CONTRACT_VERSION
    capabilities = Capabilities(
        scheduler=True,
        streams=True,
        pubsub=True,
        ops=True,
        snooze=True,
        cron=True,
        unique=True,
        periodic=True,
        limits=True,
        key_limits=True,
        results=True,
        workers=True,
        dependencies=True,
        metadata=True,
    )

    def open(self, url: str, *, clock: Clock | None = None, **opts: Any) -> Store:
        """Open ``sqlite:///relative.db`` or ``sqlite:////abs/path.db``, creating the
        file and migrating the engine's tables as needed.

        Options: ``synchronous`` (``"NORMAL"`` default, or ``"FULL"``),
        ``busy_timeout_s`` (5), ``wake_poll_s`` (0.0003), ``repoll_s`` (the core's
        safety-net re-poll, 1), ``notifications_keep`` (10,000: opening prunes
        pub/sub's transport table to that many newest rows), ``page_size`` (2048),
        ``max_payload_bytes`` (the contract's ``MAX_PAYLOAD_BYTES``; only lower). Raises
        ``InvalidOptions`` for a bad URL or option, ``EngineUnavailable`` when the
        file cannot be opened as a database.
        """
        return self.open_with_driver_wrapper(url, _unwrapped, clock=clock, **opts)

    def open_with_driver_wrapper(
        self,
        url: str,
        wrap: Callable[[Driver[Any]], Driver[Any]],
        *,
        clock: Clock | None = None,
        **opts: Any,
    ) -> Store:
        """The conformance kit's fault-injection hook: ``open`` over ``wrap(driver)``."""
        path = database_path(url)
        options = parse_options(opts)
        driver = SqliteDriver(path, options)
        try:
            return CoreStore(
                wrap(driver),
                clock=clock,
                repoll_s=options.repoll_s,
                capabilities=self.capabilities,
                engine_name=self.name,
                max_payload_bytes=options.max_payload_bytes,
            )
        except BaseException:
            driver.close()
            raise

    @contextmanager
    def provision(self) -> Iterator[EngineSpec]:
        """A fresh database file in a new temp dir; the dir is removed afterwards."""
        directory = tempfile.mkdtemp(prefix="alkstore-sqlite-")
        try:
            yield EngineSpec(url=database_url(f"{directory}/{PROVISIONED_FILE}"), opts={})
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    @contextmanager
    def provision_beside(self, spec: EngineSpec) -> Iterator[EngineSpec]:
        """The conformance kit's hook for isolation between stores on one server: a
        fresh database file in the directory of ``spec``'s, removed afterwards with
        the files SQLite and the engine make beside it."""
        directory = os.path.dirname(database_path(spec.url))
        path = os.path.join(directory, f"beside-{secrets.token_hex(8)}.db")
        try:
            yield EngineSpec(url=database_url(path), opts=dict(spec.opts))
        finally:
            for name in database_files(path):
                try:
                    os.remove(name)
                except FileNotFoundError:
                    pass

    def native_connection_factory(self, spec: EngineSpec) -> Callable[[], sqlite3.Connection]:
        """The conformance kit's hook for ``attach``: each call opens a caller-owned
        connection to ``spec``'s file with a transaction already begun."""
        path = database_path(spec.url)

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(path, isolation_level=None)
            conn.execute("BEGIN")
            return conn

        return connect

    def hold_write_path(self, spec: EngineSpec, seconds: float) -> AbstractContextManager[None]:
        """The conformance kit's contention hook: a connection outside alkstore holds
        ``spec``'s write lock (``BEGIN IMMEDIATE``) until exit, ``seconds`` at most."""
        return contention.hold_write_path(spec, seconds)

    @contextmanager
    def outage_switch(self, spec: EngineSpec) -> Iterator[contention.OutageSwitch]:
        """The conformance kit's outage hook: stores opened on the switch's spec (a
        short ``busy_timeout_s``) can be cut off from writing: its ``unavailable``
        holds the writer gate and the write lock, as a stopped writer would."""
        yield contention.outage_switch(spec)

    def describe_backend(self, spec: EngineSpec) -> dict[str, Any]:
        """The conformance kit's hook for its report: what backs the store ``spec`` names."""
        return {
            "sqlite_version": sqlite3.sqlite_version,
            "driver": "sqlite3 (stdlib)",
            "journal_mode": "wal",
            "provisioned": "a database file in a fresh temp dir, removed afterwards",
        }

    def __repr__(self) -> str:
        return f"<alkstore engine {self.name!r} {self.version}>"


def _unwrapped(driver: Driver[Any]) -> Driver[Any]:
    return driver


provider = SqliteEngine()
