"""The conformance kit's pytest plugin (entry point ``pytest11``).

Inert unless ``--engine NAME`` is given: then it loads the engine
(``alkstore.load_engine``), registers the suite's fixtures, checks every
suite test against the manifest at collection, pins one Hypothesis seed for
the whole run (every xdist worker included), repeats the concurrency tests
as the mode asks (``modes``, ``trials``), and ends with a per-property table,
the verdict and, with ``--alkstore-report PATH``, a JSON report
(``reporting``). ``--alkstore-certify`` certifies (``--alkstore-reduced``
for the short form); ``--alkstore-property ID`` runs only some properties.
Every suite test runs within a time budget (``budget``: the manifest's, or
``--alkstore-time-budget SECONDS`` for all), past which it fails instead of
hanging the run.
"""

from __future__ import annotations

import math
import os
import random
from pathlib import Path
from typing import Any

import pytest

from alkstore import CONTRACT_VERSION, ENGINE_GROUP, Capabilities, load_engine

from .. import SUITE_PACKAGE, __version__
from ..helpers import fixtures
from ..helpers.processes import preload_for_children
from ..helpers.trials import TRIAL_FIXTURE, trial_ids
from ..helpers.via_aio import VIA_AIO, VIA_SYNC, VIAS, not_applicable_via_aio, reaches_aio
from ..hooks import SERVER_ENV, conformance_server
from .budget import DEFAULT_TIME_BUDGET_S, BudgetKeeper, TimeBudgets
from .crosscheck import declaration_problems, dependency_problems
from .examples import ExampleCounter
from .guide import CAPABILITIES, see
from .manifest import PROFILES, Manifest, ManifestError, load_manifest
from .modes import ModeError, register_hypothesis_profiles, resolve_mode
from .reporting import Reporter
from .requirements import masked, notes
from .results import NEEDS_KEY, PROPERTY_KEY, SEED_KEY
from .state import KIT_STATE, KitState, kit_state, not_applicable_reason

_WORKER_SEED_KEY = "alkstore_hypothesis_seed"
_SUITE_DIR = Path(__file__).parents[1] / "suite"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("alkstore", "alkstore conformance kit")
    group.addoption(
        "--engine",
        dest="alkstore_engine",
        default=None,
        metavar="NAME",
        help="run the alkstore conformance suite against this engine: an entry-point name "
        "in the engine group, or module:object",
    )
    group.addoption(
        "--engine-group",
        dest="alkstore_engine_group",
        default=ENGINE_GROUP,
        metavar="GROUP",
        help=f"entry-point group to find --engine in (default {ENGINE_GROUP})",
    )
    group.addoption(
        "--alkstore-server",
        dest="alkstore_server",
        default=None,
        metavar="URL",
        help=f"the server a server engine's provision() uses: exported as ${SERVER_ENV} "
        "to every test process (its meaning is the engine's to document)",
    )
    group.addoption(
        "--alkstore-report",
        dest="alkstore_report",
        default=None,
        metavar="PATH",
        help="write the JSON conformance report to PATH",
    )
    group.addoption(
        "--alkstore-certify",
        dest="alkstore_certify",
        action="store_true",
        default=False,
        help="certify: the long Hypothesis profile, repeated concurrency trials, no skips "
        "but not_applicable ones; the report says certified: true only if all hold",
    )
    group.addoption(
        "--alkstore-reduced",
        dest="alkstore_reduced",
        action="store_true",
        default=False,
        help="with --alkstore-certify: the short profile and the minimum trials (for CI)",
    )
    group.addoption(
        "--alkstore-trials",
        dest="alkstore_trials",
        type=int,
        default=None,
        metavar="N",
        help="trials of each concurrency test (at least the mode's minimum: 2, 2 reduced, 3)",
    )
    group.addoption(
        "--alkstore-property",
        dest="alkstore_properties",
        action="append",
        default=None,
        metavar="ID",
        help="run only the tests of this manifest property (repeatable)",
    )
    group.addoption(
        "--alkstore-profile",
        dest="alkstore_profiles",
        action="append",
        default=None,
        metavar="NAME",
        help="run only the tests of this profile's properties (repeatable; with "
        "--alkstore-property, a test runs if either selects it)",
    )
    group.addoption(
        "--alkstore-time-budget",
        dest="alkstore_time_budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"every suite test's time budget, past which it fails instead of hanging "
        f"(default: the manifest's time_budget_s for the long properties, else "
        f"{DEFAULT_TIME_BUDGET_S} s; 0: no budget)",
    )
    group.addoption(
        "--alkstore-via",
        dest="alkstore_via",
        choices=VIAS,
        default=VIA_SYNC,
        help="reach the engine through its sync stores (default) or through alkstore.aio: "
        "the store fixtures then hand tests a sync facade over an AsyncStore (via_aio)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # Markers are registered always, so --strict-markers accepts the suite's marks.
    config.addinivalue_line("markers", "property(id): the manifest property this test checks")
    config.addinivalue_line(
        "markers", "requires(*profiles): not_applicable unless the engine has these profiles"
    )
    config.addinivalue_line(
        "markers", "unopened_store: the test's store is one nobody has opened (first opens)"
    )
    name = config.getoption("alkstore_engine")
    if name is None:
        return  # inert
    server = config.getoption("alkstore_server")
    if server is not None:
        # Before the engine loads; xdist workers and spawned children inherit it.
        os.environ[SERVER_ENV] = server
    group = config.getoption("alkstore_engine_group")
    try:
        provider = load_engine(name, group)
    except Exception as exc:
        raise pytest.UsageError(f"--engine {name}: {exc}") from exc
    if not isinstance(provider.capabilities, Capabilities):
        # Capabilities are data the kit reads to decide what applies: nothing else will do.
        raise pytest.UsageError(
            f"--engine {name}: capabilities must be an alkstore.Capabilities, "
            f"got {type(provider.capabilities).__name__}; {see(CAPABILITIES)}"
        )
    try:
        manifest = load_manifest()
    except ManifestError as exc:  # pragma: no cover - a packaging bug
        raise pytest.UsageError(f"alkstore conformance manifest: {exc}") from exc
    try:
        mode = resolve_mode(
            certify=config.getoption("alkstore_certify"),
            reduced=config.getoption("alkstore_reduced"),
            trials=config.getoption("alkstore_trials"),
            profile=config.getoption("hypothesis_profile", None),
        )
    except ModeError as exc:
        raise pytest.UsageError(f"alkstore conformance: {exc}") from exc
    selected = _selected_properties(config, manifest)
    selected_profiles = _selected_profiles(config)
    budgets = _time_budgets(config)
    register_hypothesis_profiles()
    is_worker = hasattr(config, "workerinput")
    seed = _run_seed(config, is_worker)
    # Hypothesis's own pytest_configure (after ours) applies these two options.
    config.option.hypothesis_seed = seed
    config.option.hypothesis_profile = mode.hypothesis_profile
    report = config.getoption("alkstore_report")
    state = config.stash[KIT_STATE] = KitState(
        engine_name=name,
        engine_group=group,
        provider=provider,
        manifest=manifest,
        seed=seed,
        mode=mode,
        is_worker=is_worker,
        report_path=Path(report) if report else None,
        selected=selected,
        selected_profiles=selected_profiles,
        via=config.getoption("alkstore_via"),
        budgets=budgets,
    )
    named = name.partition(":")[0] if ":" in name else None
    preload_for_children(filter(None, (type(provider).__module__, named)))
    config.pluginmanager.register(BudgetKeeper(budgets, manifest), "alkstore_conformance.budget")
    if not config.pluginmanager.is_registered(fixtures):
        config.pluginmanager.register(fixtures, "alkstore_conformance.fixtures")
    config.pluginmanager.register(ExampleCounter(), "alkstore_conformance.examples")
    if not is_worker:
        # Under xdist the controller receives every worker's reports.
        config.pluginmanager.register(Reporter(state), "alkstore_conformance.reporter")


def _selected_properties(config: pytest.Config, manifest: Manifest) -> frozenset[str] | None:
    chosen = config.getoption("alkstore_properties")
    if not chosen:
        return None
    unknown = sorted(set(chosen) - set(manifest))
    if unknown:
        raise pytest.UsageError(
            f"alkstore conformance: --property names no manifest property: {', '.join(unknown)}"
        )
    return frozenset(chosen)


def _selected_profiles(config: pytest.Config) -> frozenset[str] | None:
    chosen = config.getoption("alkstore_profiles")
    if not chosen:
        return None
    unknown = sorted(set(chosen) - PROFILES)
    if unknown:
        raise pytest.UsageError(
            f"alkstore conformance: --profile names no profile: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(PROFILES))})"
        )
    return frozenset(chosen)


def _time_budgets(config: pytest.Config) -> TimeBudgets:
    seconds = config.getoption("alkstore_time_budget")
    if seconds is not None and not 0 <= seconds < math.inf:
        raise pytest.UsageError(
            f"alkstore conformance: --time-budget is a number of seconds >= 0, got {seconds}"
        )
    return TimeBudgets(override_s=seconds)


def _run_seed(config: pytest.Config, is_worker: bool) -> str:
    """One seed per run: given, or drawn once by the controller and sent to workers."""
    given = config.getoption("hypothesis_seed", None)
    if given is not None:
        return str(given)
    if is_worker:
        seed = config.workerinput.get(_WORKER_SEED_KEY)  # type: ignore[attr-defined]
        if seed is not None:
            return str(seed)
    return str(random.SystemRandom().randrange(2**32))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist (controller side): hand every worker the run's seed."""
    state = kit_state(node.config)
    if state is not None:
        node.workerinput[_WORKER_SEED_KEY] = state.seed


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = kit_state(config)
    if state is None:
        return None
    provider = state.provider
    mode = state.mode
    profiles = ", ".join(sorted(state.engine_profiles()))
    lacking = ", ".join(state.not_applicable_profiles()) or "none"
    server = conformance_server()
    about_engine = [
        *(
            [f"alkstore-conformance: server for provision() (${SERVER_ENV}): {masked(server)}"]
            if server is not None
            else []
        ),
        *(f"alkstore-conformance: note: {note}" for note in notes(provider, state.manifest)),
    ]
    return [
        f"alkstore-conformance {__version__} (contract {CONTRACT_VERSION}): engine "
        f"{provider.name} {provider.version} (contract {provider.contract_version}) "
        f"via --engine {state.engine_name}; profiles: {profiles}; not_applicable: {lacking}",
        f"alkstore-conformance: mode {mode.name}{' (reduced)' if mode.reduced else ''}, "
        f"{mode.trials} trial(s) per concurrency test",
        f"alkstore-conformance: hypothesis profile {state.hypothesis_profile}, seed {state.seed} "
        f"(reproduce with --hypothesis-seed={state.seed})",
        f"alkstore-conformance: via {state.via}"
        + (
            " (the suite's stores are alkstore.aio AsyncStores; tests that open no store "
            "through the fixtures are left to the ordinary run)"
            if state.via == VIA_AIO
            else ""
        ),
        *about_engine,
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every suite test that asks for ``trial`` runs once per trial the mode demands."""
    state = kit_state(metafunc.config)
    if state is None or TRIAL_FIXTURE not in metafunc.fixturenames:
        return
    if not Path(metafunc.definition.path).resolve().is_relative_to(_SUITE_DIR.resolve()):
        return
    count = state.mode.trials
    metafunc.parametrize(TRIAL_FIXTURE, range(1, count + 1), indirect=True, ids=trial_ids(count))


def _in_suite(item: pytest.Item) -> bool:
    return Path(item.path).resolve().is_relative_to(_SUITE_DIR.resolve())


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    # tryfirst: we see the whole collection before -k/-m deselect anything.
    suite_items = [item for item in items if _in_suite(item)]
    if not suite_items:
        return
    state = kit_state(config)
    if state is None:
        raise pytest.UsageError(
            f"the alkstore conformance suite ({SUITE_PACKAGE}) runs against an engine: "
            "pass --engine NAME"
        )
    declared = {
        item.nodeid: [_property_id(item, mark.args) for mark in item.iter_markers("property")]
        for item in suite_items
    }
    problems = declaration_problems(
        declared, state.manifest, complete=_whole_suite_collected(suite_items)
    )
    if problems:
        raise pytest.UsageError(
            "alkstore conformance: the suite and the manifest disagree:\n  " + "\n  ".join(problems)
        )
    profiles = state.engine_profiles()
    needs: dict[str, list[str]] = {}
    for item in suite_items:
        (property_id,) = declared[item.nodeid]
        needed = list(state.manifest[property_id].profiles)
        for mark in item.iter_markers("requires"):
            needed.extend(_profile_name(item, arg) for arg in mark.args)
        needs[item.nodeid] = needed
    if _whole_suite_collected(suite_items):
        problems = dependency_problems(declared, needs, state.manifest)
        if problems:
            raise pytest.UsageError(
                "alkstore conformance: the suite and the manifest disagree:\n  "
                + "\n  ".join(problems)
            )
    for item in suite_items:
        (property_id,) = declared[item.nodeid]
        item.user_properties.append((PROPERTY_KEY, property_id))
        item.user_properties.append((SEED_KEY, state.seed))
        needed = needs[item.nodeid]
        item.user_properties.append((NEEDS_KEY, tuple(dict.fromkeys(needed))))
        missing = [p for p in needed if p not in profiles]
        if missing:
            item.add_marker(pytest.mark.skip(reason=not_applicable_reason(missing[0])))
        elif state.via == VIA_AIO:
            reason = not_applicable_via_aio(needed, state.provider)
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=reason))
    if state.selected is not None or state.selected_profiles is not None:
        _keep_selected(config, items, declared, state)
    if state.via == VIA_AIO:
        _keep_reaching_aio(config, items)
    _long_first(items, declared, state.manifest, _worker_count(config))


def _long_first(
    items: list[pytest.Item],
    declared: dict[str, list[str]],
    manifest: Manifest,
    workers: int,
) -> None:
    """The tests of the properties whose manifest entry gives them a time budget of their
    own (the long ones: the stateful model's shards) each at the head of one worker's
    share, longest budget first, and every other test in collection order after them.

    The kit's runs schedule work-stealing (``cli``): xdist first deals each of its
    ``workers`` an equal, consecutive share of the collection (the first worker the
    first), and idle workers then take from the tail of a busy one's. So every worker
    starts on one long test at once, and none waits behind another (as one test in
    front, the model held back the rest of its worker's share: about a minute of a
    reduced certification's wall time)."""

    def budget(item: pytest.Item) -> int:
        ids = declared.get(item.nodeid)
        return 0 if ids is None else manifest[ids[0]].time_budget_s or 0

    ordered = sorted(items, key=lambda item: -budget(item))  # stable: the rest keep order
    long_ones = [item for item in ordered if budget(item)]
    rest = iter(ordered[len(long_ones) :])
    shares: list[list[pytest.Item]] = [[] for _ in range(max(1, workers))]
    for number, item in enumerate(long_ones):
        shares[number % len(shares)].append(item)
    left = len(items)
    for number, share in enumerate(shares):
        size = left // (len(shares) - number)  # as xdist's work-stealing deals them out
        share.extend(next(rest) for _ in range(max(0, size - len(share))))
        left -= len(share)
    share.extend(rest)  # what rounding left over, if anything
    items[:] = [item for share in shares for item in share]


def _worker_count(config: pytest.Config) -> int:
    """How many xdist workers share the run (1 without xdist)."""
    workerinput = getattr(config, "workerinput", None)
    return int(workerinput["workercount"]) if workerinput is not None else 1


def _keep_reaching_aio(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--alkstore-via aio``: deselect suite tests that open no store through the
    fixtures (they never reach ``alkstore.aio``; the ordinary run has them)."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        reaches = not _in_suite(item) or reaches_aio(getattr(item, "fixturenames", ()))
        (kept if reaches else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _keep_selected(
    config: pytest.Config,
    items: list[pytest.Item],
    declared: dict[str, list[str]],
    state: KitState,
) -> None:
    """``--alkstore-property`` / ``--alkstore-profile``: deselect suite tests of every
    other property."""
    ids_chosen = state.selected or frozenset()
    profiles_chosen = state.selected_profiles or frozenset()

    def chosen(property_id: str) -> bool:
        return property_id in ids_chosen or state.manifest[property_id].profile in profiles_chosen

    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        ids = declared.get(item.nodeid)
        (dropped if ids is not None and not chosen(ids[0]) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _property_id(item: pytest.Item, args: tuple[Any, ...]) -> str:
    if len(args) != 1 or not isinstance(args[0], str):
        raise pytest.UsageError(f"{item.nodeid}: use @pytest.mark.property('ID') with one id")
    return args[0]


def _profile_name(item: pytest.Item, arg: Any) -> str:
    if arg not in PROFILES:
        raise pytest.UsageError(
            f"{item.nodeid}: requires({arg!r}) names no profile (known: {sorted(PROFILES)})"
        )
    return str(arg)


def _whole_suite_collected(suite_items: list[pytest.Item]) -> bool:
    modules = {Path(item.path).resolve() for item in suite_items}
    return all(path.resolve() in modules for path in _SUITE_DIR.glob("test_*.py"))
