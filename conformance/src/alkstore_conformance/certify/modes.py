"""Check and certify: what a run demands.

``check`` (the default) runs the suite and reports; it never certifies.
``certify`` demands more of the same suite: the long Hypothesis profile,
several trials of every concurrency test, and no skip but a not_applicable
one. ``certify`` with ``reduced`` keeps the short profile and the smallest
trial count that still repeats a race, for CI; its report says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CHECK = "check"
CERTIFY = "certify"

DEV_PROFILE = "alkstore-dev"
CI_PROFILE = "alkstore-ci"
CERTIFY_PROFILE = "alkstore-certify"
SELFTEST_PROFILE = "alkstore-selftest"
PROFILES = (DEV_PROFILE, CI_PROFILE, CERTIFY_PROFILE, SELFTEST_PROFILE)

DEV_EXAMPLES = 25
CI_EXAMPLES = 200
CERTIFY_EXAMPLES = 4 * DEV_EXAMPLES
CERTIFY_STATEFUL_STEPS = 100
"""Twice Hypothesis's default of 50 steps per stateful example."""

CHECK_TRIALS = 2
REDUCED_TRIALS = 2
CERTIFY_TRIALS = 3
"""Minimum trials of every concurrency test: a race must show up across fresh runs."""

REDUCED_PROFILES = (DEV_PROFILE, CI_PROFILE, CERTIFY_PROFILE)
"""What a reduced certification may run with (the default is the first)."""


class ModeError(ValueError):
    """The options ask for a run the kit cannot honour (a usage error)."""


@dataclass(frozen=True, slots=True)
class RunMode:
    certify: bool
    reduced: bool
    trials: int
    hypothesis_profile: str

    @property
    def name(self) -> str:
        return CERTIFY if self.certify else CHECK

    @property
    def minimum_trials(self) -> int:
        return minimum_trials(self.certify, self.reduced)


def minimum_trials(certify: bool, reduced: bool) -> int:
    if not certify:
        return CHECK_TRIALS
    return REDUCED_TRIALS if reduced else CERTIFY_TRIALS


def resolve_mode(
    *, certify: bool, reduced: bool, trials: int | None, profile: str | None
) -> RunMode:
    """The run the options ask for, or ``ModeError`` saying why it cannot be had."""
    if reduced and not certify:
        raise ModeError("--reduced only applies to a certification: add --certify")
    if certify and not reduced and profile not in (None, CERTIFY_PROFILE):
        raise ModeError(
            f"--certify runs the {CERTIFY_PROFILE} Hypothesis profile, not {profile}; "
            "add --reduced for a shorter certification"
        )
    if certify and reduced and profile not in (None, *REDUCED_PROFILES):
        raise ModeError(
            f"a reduced certification runs one of {', '.join(REDUCED_PROFILES)}, not {profile}"
        )
    if profile is None:
        profile = CERTIFY_PROFILE if certify and not reduced else DEV_PROFILE
    least = minimum_trials(certify, reduced)
    if trials is None:
        trials = least
    if trials < least:
        mode = "a reduced certification" if reduced else "a certification" if certify else "a run"
        raise ModeError(f"{mode} runs at least {least} trials of each concurrency test")
    return RunMode(certify=certify, reduced=reduced, trials=trials, hypothesis_profile=profile)


def register_hypothesis_profiles() -> None:
    from hypothesis import HealthCheck, Phase, settings

    # deadline=None: examples do real I/O, and speed is a benchmark's business.
    # database=None: a run is reproduced by its seed, not by a local example cache.
    # derandomize=False: Hypothesis's own "ci" profile (loaded when a CI variable is
    # set) derandomizes, which would run other examples than the reported seed names.
    common: dict[str, Any] = {
        "deadline": None,
        "database": None,
        "derandomize": False,
        "print_blob": True,
        "suppress_health_check": [HealthCheck.too_slow],
    }
    settings.register_profile(DEV_PROFILE, max_examples=DEV_EXAMPLES, **common)
    settings.register_profile(CI_PROFILE, max_examples=CI_EXAMPLES, **common)
    settings.register_profile(
        CERTIFY_PROFILE,
        max_examples=CERTIFY_EXAMPLES,
        stateful_step_count=CERTIFY_STATEFUL_STEPS,
        **common,
    )
    # The kit's own mutant runs only need *a* counterexample, fast: no shrinking.
    settings.register_profile(
        SELFTEST_PROFILE,
        max_examples=DEV_EXAMPLES,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        **common,
    )


def profile_settings(profile: str) -> dict[str, Any]:
    """What the report records of a Hypothesis profile."""
    from hypothesis import settings

    chosen = settings.get_profile(profile)
    return {
        "max_examples": chosen.max_examples,
        "stateful_step_count": chosen.stateful_step_count,
        "phases": [phase.name for phase in chosen.phases],
    }
