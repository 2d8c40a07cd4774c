"""Check and certify: what each mode demands, and when a run certifies."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest
from kit_engines import stub

from alkstore_conformance.certify.manifest import parse_manifest
from alkstore_conformance.certify.modes import (
    CERTIFY_PROFILE,
    CERTIFY_TRIALS,
    CI_PROFILE,
    DEV_PROFILE,
    PROFILES,
    REDUCED_TRIALS,
    ModeError,
    RunMode,
    resolve_mode,
)
from alkstore_conformance.certify.reporting import verdict
from alkstore_conformance.certify.results import PROPERTY_KEY, SEED_KEY
from alkstore_conformance.certify.state import KitState

MANIFEST = parse_manifest(
    '[[property]]\nid = "QUEUE-A"\ntitle = "a"\ncontract = "§2"\nprofile = "queues"\n'
    '[[property]]\nid = "LOCK-B"\ntitle = "b"\ncontract = "§6"\nprofile = "locks"\n'
)
SEED = "7"


def test_a_plain_run_is_a_check_with_the_dev_profile_and_two_trials() -> None:
    # Two, so a developer's ordinary check repeats every race as a certification does.
    mode = resolve_mode(certify=False, reduced=False, trials=None, profile=None)
    assert mode == RunMode(certify=False, reduced=False, trials=2, hypothesis_profile=DEV_PROFILE)
    assert mode.name == "check"


def test_certify_runs_the_long_profile_and_three_trials() -> None:
    mode = resolve_mode(certify=True, reduced=False, trials=None, profile=None)
    assert (mode.name, mode.hypothesis_profile, mode.trials) == (
        "certify",
        CERTIFY_PROFILE,
        CERTIFY_TRIALS,
    )
    assert CERTIFY_TRIALS >= 3


def test_reduced_certify_runs_the_dev_profile_and_two_trials() -> None:
    mode = resolve_mode(certify=True, reduced=True, trials=None, profile=None)
    assert (mode.hypothesis_profile, mode.trials, mode.reduced) == (
        DEV_PROFILE,
        REDUCED_TRIALS,
        True,
    )
    assert REDUCED_TRIALS >= 2
    ci = resolve_mode(certify=True, reduced=True, trials=None, profile=CI_PROFILE)
    assert ci.hypothesis_profile == CI_PROFILE


def test_more_trials_than_the_minimum_may_be_asked_for() -> None:
    assert resolve_mode(certify=True, reduced=False, trials=5, profile=None).trials == 5


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"certify": False, "reduced": True}, "only applies to a certification"),
        ({"certify": True, "profile": DEV_PROFILE}, "add --reduced"),
        ({"certify": True, "reduced": True, "profile": "default"}, "a reduced certification"),
        ({"certify": True, "trials": 2}, "at least 3 trials"),
        ({"certify": True, "reduced": True, "trials": 1}, "at least 2 trials"),
        ({"trials": 1}, "at least 2 trials"),
        ({"trials": 0}, "at least 2 trials"),
    ],
    ids=[
        "reduced-alone",
        "short-profile",
        "unknown-profile",
        "few-trials",
        "few-reduced",
        "one",
        "zero",
    ],
)
def test_a_run_the_kit_cannot_honour_is_refused(options: dict[str, Any], complaint: str) -> None:
    arguments: dict[str, Any] = {
        "certify": False,
        "reduced": False,
        "trials": None,
        "profile": None,
    }
    with pytest.raises(ModeError, match=complaint):
        resolve_mode(**{**arguments, **options})


# -- the verdict ---------------------------------------------------------------------


@dataclass
class Report:
    nodeid: str
    when: str
    outcome: str
    property_id: str
    duration: float = 0.1
    longrepr: Any = None
    longreprtext: str = ""
    user_properties: list[tuple[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.user_properties = [(PROPERTY_KEY, self.property_id), (SEED_KEY, SEED)]


NOT_APPLICABLE = "Skipped: not_applicable: engine lacks profile locks"


def _state(certify: bool, *outcomes: tuple[str, str, str] | tuple[str, str, str, str]) -> KitState:
    mode = resolve_mode(certify=certify, reduced=False, trials=None, profile=None)
    state = KitState(
        engine_name="stub",
        engine_group="g",
        provider=stub,
        manifest=MANIFEST,
        seed=SEED,
        mode=mode,
        is_worker=False,
        report_path=None,
    )
    for property_id, when, outcome, *reason in outcomes:
        longrepr = ("x.py", 1, reason[0] if reason else NOT_APPLICABLE)
        report = Report(f"t_{property_id}", when, outcome, property_id, longrepr=longrepr)
        state.results.record(report)
    return state


PASSED_A = ("QUEUE-A", "call", "passed")
NOT_APPLICABLE_B = ("LOCK-B", "setup", "skipped")


def test_certify_with_every_property_pass_or_not_applicable_is_certified() -> None:
    state = _state(True, PASSED_A, NOT_APPLICABLE_B)
    decided = verdict(state, state.results.results(), [], 0)
    assert (decided.certified, decided.failed, decided.reasons) == (True, False, [])


def test_the_same_run_as_a_check_is_not_certified_and_not_failed() -> None:
    state = _state(False, PASSED_A, NOT_APPLICABLE_B)
    decided = verdict(state, state.results.results(), [], 0)
    assert (decided.certified, decided.failed) == (False, False)
    assert decided.reasons == ["a check, not a certification: run with --certify"]


def test_a_property_that_did_not_run_blocks_certification() -> None:
    state = _state(True, PASSED_A)
    decided = verdict(state, state.results.results(), [], 0)
    assert (decided.certified, decided.failed) == (False, True)
    assert decided.reasons == ["1 manifest properties did not run: LOCK-B"]


def test_an_unexpected_skip_is_an_error_that_fails_even_a_check() -> None:
    skipped = ("QUEUE-A", "setup", "skipped", "Skipped: the fixture gave up")
    state = _state(False, skipped, NOT_APPLICABLE_B)
    decided = verdict(state, state.results.results(), [], 0)
    assert decided.failed
    assert decided.reasons[0] == "1 properties failed or errored: QUEUE-A"


def test_a_failure_or_a_collection_error_blocks_certification() -> None:
    state = _state(True, ("QUEUE-A", "call", "failed"), NOT_APPLICABLE_B)
    decided = verdict(state, state.results.results(), [], 1)
    assert decided.reasons == ["1 properties failed or errored: QUEUE-A"]
    state = _state(True, PASSED_A, NOT_APPLICABLE_B)
    decided = verdict(state, state.results.results(), [{"nodeid": "m.py", "message": "x"}], 2)
    assert not decided.certified
    assert "1 suite modules failed to collect" in decided.reasons
    assert "pytest exited with status 2" in decided.reasons


def test_tests_run_under_another_seed_block_certification() -> None:
    state = _state(True, PASSED_A, NOT_APPLICABLE_B)
    state.results.seeds.add("8")
    assert not verdict(state, state.results.results(), [], 0).certified


_PROFILES_UNDER_CI = f"""
import json
from hypothesis import settings
from alkstore_conformance.certify.modes import register_hypothesis_profiles
register_hypothesis_profiles()
print(json.dumps({{
    "default": settings.default.derandomize,
    "profiles": [settings.get_profile(p).derandomize for p in {list(PROFILES)!r}],
}}))
"""


def test_every_profile_runs_the_seed_it_reports_where_hypothesis_would_derandomize() -> None:
    # With a CI variable set, Hypothesis's own defaults derandomize: a run would then
    # draw other examples than the seed in its report names, and never vary in CI.
    env = {"CI": "true", "PATH": "/usr/bin:/bin"}
    shown = subprocess.run(
        [sys.executable, "-c", _PROFILES_UNDER_CI],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    derandomized = json.loads(shown.stdout)
    assert derandomized["default"] is True
    assert derandomized["profiles"] == [False] * len(PROFILES)
