"""The conformance kit's pytest plugin (entry point ``pytest11``).

Inert unless ``--engine NAME`` is given: then it loads the engine
(``alkstore.load_engine``), registers the suite's fixtures, checks every
suite test against the manifest at collection, pins one Hypothesis seed for
the whole run (every xdist worker included), and ends with a per-property
table and, with ``--alkstore-report PATH``, a JSON report (``reporting``).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from alkstore import CONTRACT_VERSION, ENGINE_GROUP, load_engine

from . import SUITE_PACKAGE, __version__, fixtures
from .crosscheck import declaration_problems
from .manifest import PROFILES, ManifestError, load_manifest
from .reporting import Reporter
from .results import PROPERTY_KEY, SEED_KEY
from .state import KIT_STATE, KitState, kit_state, not_applicable_reason

DEV_PROFILE = "alkstore-dev"
CI_PROFILE = "alkstore-ci"
_WORKER_SEED_KEY = "alkstore_hypothesis_seed"
_SUITE_DIR = Path(__file__).parent / "suite"


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
        "--alkstore-report",
        dest="alkstore_report",
        default=None,
        metavar="PATH",
        help="write the JSON conformance report to PATH",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # Markers are registered always, so --strict-markers accepts the suite's marks.
    config.addinivalue_line("markers", "property(id): the manifest property this test checks")
    config.addinivalue_line(
        "markers", "requires(*profiles): not_applicable unless the engine has these profiles"
    )
    name = config.getoption("alkstore_engine")
    if name is None:
        return  # inert
    group = config.getoption("alkstore_engine_group")
    try:
        provider = load_engine(name, group)
    except Exception as exc:
        raise pytest.UsageError(f"--engine {name}: {exc}") from exc
    try:
        manifest = load_manifest()
    except ManifestError as exc:  # pragma: no cover - a packaging bug
        raise pytest.UsageError(f"alkstore conformance manifest: {exc}") from exc
    _register_hypothesis_profiles()
    is_worker = hasattr(config, "workerinput")
    seed = _run_seed(config, is_worker)
    # Hypothesis's own pytest_configure (after ours) applies these two options.
    config.option.hypothesis_seed = seed
    profile = config.getoption("hypothesis_profile", None) or DEV_PROFILE
    config.option.hypothesis_profile = profile
    report = config.getoption("alkstore_report")
    state = config.stash[KIT_STATE] = KitState(
        engine_name=name,
        engine_group=group,
        provider=provider,
        manifest=manifest,
        seed=seed,
        hypothesis_profile=profile,
        is_worker=is_worker,
        report_path=Path(report) if report else None,
    )
    if not config.pluginmanager.is_registered(fixtures):
        config.pluginmanager.register(fixtures, "alkstore_conformance.fixtures")
    if not is_worker:
        # Under xdist the controller receives every worker's reports.
        config.pluginmanager.register(Reporter(state), "alkstore_conformance.reporter")


def _register_hypothesis_profiles() -> None:
    from hypothesis import HealthCheck, settings

    # deadline=None: examples do real I/O, and speed is a benchmark's business.
    # database=None: a run is reproduced by its seed, not by a local example cache.
    common: dict[str, Any] = {
        "deadline": None,
        "database": None,
        "print_blob": True,
        "suppress_health_check": [HealthCheck.too_slow],
    }
    settings.register_profile(DEV_PROFILE, max_examples=25, **common)
    settings.register_profile(CI_PROFILE, max_examples=200, **common)


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
    profiles = ", ".join(sorted(state.engine_profiles()))
    return [
        f"alkstore-conformance {__version__} (contract {CONTRACT_VERSION}): engine "
        f"{provider.name} {provider.version} (contract {provider.contract_version}) "
        f"via --engine {state.engine_name}; profiles: {profiles}",
        f"alkstore-conformance: hypothesis profile {state.hypothesis_profile}, seed {state.seed} "
        f"(reproduce with --hypothesis-seed={state.seed})",
    ]


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
    for item in suite_items:
        (property_id,) = declared[item.nodeid]
        item.user_properties.append((PROPERTY_KEY, property_id))
        item.user_properties.append((SEED_KEY, state.seed))
        needed = [state.manifest[property_id].profile]
        for mark in item.iter_markers("requires"):
            needed.extend(_profile_name(item, arg) for arg in mark.args)
        missing = [p for p in needed if p not in profiles]
        if missing:
            item.add_marker(pytest.mark.skip(reason=not_applicable_reason(missing[0])))


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
