"""The driver suite itself: selected by capabilities as data, inert until a test
module builds it, and able to fail a driver that breaks a seam rule."""

from __future__ import annotations

import pkgutil

import pytest

import alkstore_conformance.driver_suite as driver_suite_package
from alkstore import Capabilities
from alkstore_conformance.driver_suite import SUITES, driver_suite, suites_for

EVERY_PROFILE = Capabilities(
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
)
QUEUE_ONLY = Capabilities(transactions=False, locks=False)


def _test_names(suite: type) -> set[str]:
    return {name for name in dir(suite) if name.startswith("test_")}


def test_an_engine_with_every_profile_gets_every_suite() -> None:
    assert suites_for(EVERY_PROFILE) == SUITES


def test_a_profile_the_engine_lacks_contributes_no_tests() -> None:
    names = _test_names(driver_suite(QUEUE_ONLY))
    assert names
    assert not any(
        name.startswith(
            ("test_lock_", "test_schedule", "test_stream_", "test_publish", "test_redrive")
        )
        for name in names
    )
    assert "test_transaction_commits_on_normal_exit" not in names


def test_the_ops_statements_come_only_with_the_ops_profile() -> None:
    without = _test_names(driver_suite(Capabilities()))
    with_ops = _test_names(driver_suite(Capabilities(ops=True)))
    added = with_ops - without
    assert "test_redrive_makes_a_new_pending_row_and_deletes_the_dead_one" in added
    assert "test_reschedule_and_bury_append_attempt_now_and_error_newest_last" in added
    assert not any(name.startswith("test_redrive") for name in without)


def test_the_cron_schedule_rows_come_only_with_the_cron_profile() -> None:
    scheduler = _test_names(driver_suite(Capabilities(scheduler=True)))
    cron = _test_names(driver_suite(Capabilities(scheduler=True, cron=True)))
    assert "test_schedule_upsert_stores_a_cron_schedule_whole" in cron - scheduler
    assert "test_schedule_upsert_stores_a_new_schedule_whole" in scheduler


def test_a_suite_needing_two_profiles_comes_only_with_both() -> None:
    pubsub_only = Capabilities(transactions=False, pubsub=True)
    assert "test_publish_delivers_in_commit_order_across_channels" in _test_names(
        driver_suite(pubsub_only)
    )
    assert "test_a_rolled_back_publish_delivers_nothing" not in _test_names(
        driver_suite(pubsub_only)
    )


def test_the_built_class_carries_its_capabilities_and_name() -> None:
    built = driver_suite(EVERY_PROFILE, "TestSomeDriver")
    assert (built.__name__, getattr(built, "capabilities", None)) == (
        "TestSomeDriver",
        EVERY_PROFILE,
    )


def test_no_module_of_the_suite_is_collected_on_its_own() -> None:
    modules = [m.name for m in pkgutil.iter_modules(driver_suite_package.__path__)]
    assert modules
    assert [name for name in modules if name.startswith("test")] == []


MUTANT_MODULE = '''
import uuid
from dataclasses import replace

import pytest

from alkstore_conformance.driver_suite import driver_suite, opened_drivers
from alkstore_memory import MemoryEngine
from alkstore_memory.database import database, drop
from alkstore_memory.driver import MemoryDriver


class AckIgnoresTheAttempt(MemoryDriver):
    """Acks whatever claim currently holds the row: a stale handle acks a reclaim."""

    def ack(self, c, params):
        row = c.tables.jobs.get(params.job_id)
        return super().ack(c, params if row is None else replace(params, attempt=row.attempts))


TestMutant = driver_suite(MemoryEngine.capabilities, "TestMutant")


@pytest.fixture
def driver_factory():
    name = uuid.uuid4().hex
    with opened_drivers(lambda: AckIgnoresTheAttempt(database(name))) as factory:
        yield factory
    drop(name)
'''


def test_the_suite_fails_a_driver_whose_ack_ignores_the_attempt(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_mutant_driver=MUTANT_MODULE)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q", "-k", "ack")
    outcomes = result.parseoutcomes()
    # Only the rule the mutant breaks fails; the other ack tests pass on it.
    assert (outcomes.get("failed"), outcomes.get("passed", 0) > 1) == (1, True)
    result.stdout.fnmatch_lines(
        ["FAILED *test_a_handle_op_of_an_earlier_claim_matches_nothing[[]ack[]]*"]
    )
