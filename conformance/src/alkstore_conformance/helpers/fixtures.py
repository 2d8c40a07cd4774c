"""The fixtures every suite test codes against (registered only with ``--engine``).

Stores come only from the engine's ``provision()`` and ``open()``: the kit
never reaches into an engine's internals, so it certifies third-party engines
exactly as it certifies ours.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any, Protocol

import pytest

from alkstore import Clock, EngineProvider, EngineSpec, Store
from alkstore.testing import FakeClock

from ..certify.requirements import provision_note
from ..certify.results import BACKEND_KEY, TRIAL_KEY
from ..certify.state import KitState, kit_state, not_applicable_reason
from ..hooks import (
    NATIVE_CONNECTION_HOOK,
    describe_backend,
    native_connection_factory,
    provision_unopened,
)
from .trials import Trial, trial_seed
from .via_aio import VIA_AIO, AioStore, LoopThread, as_store, attachable_via_aio

FAKE_CLOCK_START = 1_700_000_000


class StoreFactory(Protocol):
    """``open_store(clock=None, **opts)``: a NEW store on the test's provisioned spec
    (``opts``: contract options every engine takes, over the spec's own)."""

    def __call__(self, clock: Clock | None = None, **opts: Any) -> Store: ...


def _state(request: pytest.FixtureRequest) -> KitState:
    state = kit_state(request.config)
    if state is None:  # pragma: no cover - the fixtures are registered only when active
        raise pytest.UsageError("the alkstore conformance fixtures need --engine NAME")
    return state


@pytest.fixture(scope="session")
def engine_name(request: pytest.FixtureRequest) -> str:
    """The engine reference as given to ``--engine`` (picklable, for child processes)."""
    return _state(request).engine_name


@pytest.fixture(scope="session")
def engine_group(request: pytest.FixtureRequest) -> str:
    """The entry-point group ``engine_name`` is looked up in."""
    return _state(request).engine_group


@pytest.fixture(scope="session")
def engine(request: pytest.FixtureRequest) -> EngineProvider:
    return _state(request).provider


@pytest.fixture
def engine_spec(request: pytest.FixtureRequest, engine: EngineProvider) -> Iterator[EngineSpec]:
    """A fresh, empty, isolated store, removed after the test: one nobody has opened
    for a test marked ``unopened_store`` (the engine's ``provision_unopened`` hook)."""
    unopened = request.node.get_closest_marker("unopened_store") is not None
    with ExitStack() as provisioned:
        try:
            spec = provisioned.enter_context(
                provision_unopened(engine) if unopened else engine.provision()
            )
        except Exception as exc:
            exc.add_note(provision_note())
            raise
        state = _state(request)
        if not state.backend_described:
            # Once per process, on a spec provisioned anyway: the report's engine.backend.
            state.backend_described = True
            described = describe_backend(engine, spec)
            if described is not None:
                request.node.user_properties.append((BACKEND_KEY, described))
        yield spec


@pytest.fixture
def open_store(
    request: pytest.FixtureRequest, engine: EngineProvider, engine_spec: EngineSpec
) -> Iterator[StoreFactory]:
    """Opens stores on the test's spec: the engine's own, or under ``--via aio`` sync
    facades over ``alkstore.aio`` AsyncStores, all on one event loop of the test's."""
    opened: list[Store] = []
    loop = LoopThread() if _state(request).via == VIA_AIO else None

    def open_(clock: Clock | None = None, **opts: Any) -> Store:
        options = {**engine_spec.opts, **opts}
        if loop is None:
            store = engine.open(engine_spec.url, clock=clock, **options)
        else:
            store = as_store(AioStore.open(loop, engine, engine_spec.url, clock, **options))
        opened.append(store)
        return store

    try:
        yield open_
        # Close every store (close is idempotent) before the spec is removed.
        errors: list[BaseException] = []
        for store in reversed(opened):
            try:
                store.close()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
    finally:
        # After the stores: an async_native engine's connections live on this loop.
        if loop is not None:
            loop.close()


@pytest.fixture
def store(open_store: StoreFactory) -> Store:
    """A store on the system clock."""
    return open_store()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(FAKE_CLOCK_START)


@pytest.fixture
def clocked_store(open_store: StoreFactory, clock: FakeClock) -> Store:
    """A store whose time is the test's ``clock``."""
    return open_store(clock=clock)


@pytest.fixture
def trial(request: pytest.FixtureRequest) -> Trial:
    """This run of a repeated concurrency test (``alkstore_conformance.helpers.trials``):
    ``trial.number`` of ``trial.of``, and ``trial.seed`` / ``trial.random()`` to vary it."""
    state = _state(request)
    number = int(getattr(request, "param", 1))
    seed = trial_seed(state.seed, request.node.nodeid)
    this = Trial(number=number, of=state.mode.trials, seed=seed)
    request.node.user_properties.append(
        (TRIAL_KEY, {"trial": this.number, "of": this.of, "seed": this.seed})
    )
    return this


@pytest.fixture
def requires(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """``requires("locks")`` skips the test as not_applicable when the engine lacks it."""
    profiles = _state(request).engine_profiles()

    def check(profile: str) -> None:
        if profile not in profiles:
            pytest.skip(not_applicable_reason(profile))

    return check


@pytest.fixture
def native_connect(
    request: pytest.FixtureRequest, engine: EngineProvider, engine_spec: EngineSpec
) -> Callable[[], Any]:
    """The engine's factory of caller-owned connections (see ``alkstore_conformance.hooks``)."""
    factory = native_connection_factory(engine, engine_spec)
    if factory is None:
        pytest.skip(
            f"not_applicable: engine provides no {NATIVE_CONNECTION_HOOK}(spec) hook, "
            "so the kit cannot open a connection of its own to attach"
        )
    if _state(request).via == VIA_AIO:
        return attachable_via_aio(engine, factory)
    return factory
