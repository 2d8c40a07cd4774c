"""The stories, driven end to end on each reference engine."""

from __future__ import annotations

import maintenance

import alkstore
from alkstore import EngineSpec, EnqueueOpts, JobState
from alkstore.testing import FakeClock


def _open(engine: str, spec: EngineSpec, clock: FakeClock | None = None) -> alkstore.Store:
    return alkstore.load_engine(engine).open(spec.url, clock=clock, **spec.opts)


def test_maintenance_recipe_sweeps_expired_jobs_every_interval(
    engine_spec: tuple[str, EngineSpec],
) -> None:
    engine, spec = engine_spec
    clock = FakeClock(1_700_000_000)
    with _open(engine, spec, clock) as store:
        emails = store.queue("emails")
        stale = emails.enqueue({"n": 1}, EnqueueOpts(expires=60))
        fresh = emails.enqueue({"n": 2}, EnqueueOpts(expires=3600))
        schedule = maintenance.install(store, ["emails"])
        assert schedule.next_fire_at == 1_700_000_000 + 300

        assert store.tick_schedules("leader").fired == 0  # not due yet
        assert maintenance.work_one(store, "worker") is None

        clock.advance(300)
        assert store.tick_schedules("leader").fired == 1
        results = maintenance.work_one(store, "worker")

        assert results is not None
        assert results["emails"].expired == 1
        stale_job = emails.get_job(stale)
        assert stale_job is not None
        assert stale_job.state is JobState.DEAD
        assert stale_job.last_error == "expired"
        fresh_job = emails.get_job(fresh)
        assert fresh_job is not None
        assert fresh_job.state is JobState.PENDING


def test_maintenance_install_is_idempotent(engine_spec: tuple[str, EngineSpec]) -> None:
    engine, spec = engine_spec
    clock = FakeClock(1_700_000_000)
    with _open(engine, spec, clock) as store:
        first = maintenance.install(store, ["a"])
        clock.advance(100)
        again = maintenance.install(store, ["a", "b"])
        assert again.next_fire_at == first.next_fire_at  # unchanged spec keeps its boundary
        assert again.payload == {"task": "sweep", "queues": ["a", "b"]}
        assert [s.name for s in store.schedules()] == ["maintenance"]


def test_quickstart_handles_both_jobs(engine_spec: tuple[str, EngineSpec]) -> None:
    import quickstart

    _, spec = engine_spec
    assert quickstart.main(spec.url, **spec.opts) == [{"to": "a@example.com"}, {"order": 7}]
