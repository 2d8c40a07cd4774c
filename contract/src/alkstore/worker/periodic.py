"""``Worker.periodic``: schedules declared with the worker (contract 1.2 §5.11).

A worker declares its schedules when it starts, before it claims anything
(``store.declare_schedule``: an unchanged declaration keeps its boundary, so a
fleet starting at once declares each schedule once), leads the scheduler so they
fire, and renews their lease every third of ``DECLARATION_LEASE_S`` while it
runs. A schedule no running worker declares any more lapses and the next tick
removes it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from ..api import Store
from ..constants import DECLARATION_LEASE_S
from ..engine import Capabilities
from ..errors import AlkstoreError, InvalidOptions, ProfileUnavailable
from ..names import validate_name
from ..options import ScheduleOpts, check_type
from ..payload import encode_payload
from ..spec import parse_spec
from ..stop import StopToken
from .maintenance import lead_schedules

log = logging.getLogger("alkstore.worker")

RENEW_EVERY_S = DECLARATION_LEASE_S / 3
"""How often a running worker renews the lease of the schedules it declares."""


@dataclass(frozen=True, slots=True)
class Declaration:
    """One schedule a worker declares (``Worker.periodic``).

    Attributes:
        name: the schedule's name.
        spec: its spec (contract §5.2).
        queue: the queue each fire enqueues into.
        payload: what each fire enqueues.
        opts: the ``ScheduleOpts`` it is declared with.
    """

    name: str
    spec: str
    queue: str
    payload: Any
    opts: ScheduleOpts


def make_declaration(
    name: object, spec: object, queue: object, payload: object, opts: object
) -> Declaration:
    """A checked ``Declaration``: everything ``declare_schedule`` would refuse, bar the
    store's own payload bound and profiles, is refused here, before anything runs."""
    checked_name = validate_name(name, "schedule name")
    checked_queue = checked_name if queue is None else validate_name(queue, "queue name")
    checked_opts = ScheduleOpts() if opts is None else opts
    check_type(checked_opts, ScheduleOpts, "opts")
    assert isinstance(checked_opts, ScheduleOpts)
    cadence = parse_spec(spec, checked_opts.timezone)
    encode_payload(payload)
    return Declaration(checked_name, cadence.spec, checked_queue, payload, checked_opts)


def require_periodic(store: Store) -> None:
    """``ProfileUnavailable`` before anything is written, on an engine without the
    periodic profile."""
    capabilities = getattr(store, "capabilities", None)
    if isinstance(capabilities, Capabilities) and not (capabilities.periodic and capabilities.cron):
        raise ProfileUnavailable(getattr(store, "engine_name", ""), "periodic")


class Periodic:
    """The declared schedules of one worker: declared at start, renewed while it runs,
    and (unless the maintenance thread already does) the scheduler led so they fire."""

    def __init__(
        self,
        store: Store,
        worker_id: str,
        declarations: list[Declaration],
        *,
        lead: bool,
        renew_every_s: float = RENEW_EVERY_S,
    ) -> None:
        self._store = store
        self._worker_id = worker_id
        self._declarations = {d.name: d for d in declarations}
        self._renew_every_s = renew_every_s
        self._stop = StopToken()
        self._threads = [
            threading.Thread(target=self._renew, name="alkstore-periodic", daemon=True)
        ]
        if lead:
            self._threads.append(
                threading.Thread(target=self._lead, name="alkstore-scheduler", daemon=True)
            )

    def start(self) -> None:
        """Declare every schedule (before the worker claims anything), then renew
        them and lead the scheduler on threads of their own."""
        for declaration in self._declarations.values():
            self._declare(declaration)
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        """Stop renewing. The leases stay: another worker of the fleet may still
        declare these schedules, and a schedule none renews lapses on its own."""
        self._stop.stop()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=10.0)

    def renew_once(self) -> None:
        """Renew every declared schedule's lease; declare again the ones that are gone
        (a lapse removed them while this worker could not renew, or someone
        unscheduled them). One that ``store.schedule`` took over is left to it."""
        renewed = set(self._store.renew_schedules(sorted(self._declarations)))
        for name, declaration in self._declarations.items():
            if name not in renewed and self._store.get_schedule(name) is None:
                log.warning("declared schedule %r was gone; declaring it again", name)
                self._declare(declaration)

    def _declare(self, declaration: Declaration) -> None:
        self._store.declare_schedule(
            declaration.name,
            declaration.spec,
            declaration.queue,
            declaration.payload,
            declaration.opts,
        )

    def _renew(self) -> None:
        while not self._stop.wait(self._renew_every_s):
            try:
                self.renew_once()
            except AlkstoreError as exc:
                log.error("renewing declared schedules failed: %s; retrying later", exc)

    def _lead(self) -> None:
        lead_schedules(self._store, self._worker_id, self._stop)


def check_new(declarations: dict[str, Declaration], declaration: Declaration) -> None:
    if declaration.name in declarations:
        raise InvalidOptions(f"schedule {declaration.name!r} is already declared")
