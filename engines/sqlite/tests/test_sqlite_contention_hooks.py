"""The provider's contention hooks for the conformance kit: hold_write_path, outage_switch."""

from __future__ import annotations

import pytest
from sqlite_helpers import StoreFactory

from alkstore import EngineSpec, EngineUnavailable
from alkstore_sqlite import provider
from alkstore_sqlite.contention import OUTAGE_BUSY_TIMEOUT_S

HOLD_S = 10.0


def test_hold_write_path_makes_writes_wait_while_reads_go_on(
    url: str, open_store: StoreFactory
) -> None:
    queue = open_store(busy_timeout_s=0.3).queue("q")
    job_id = queue.enqueue({"n": 1})
    with provider.hold_write_path(EngineSpec(url=url, opts={}), HOLD_S):
        with pytest.raises(EngineUnavailable, match=r"busy_timeout_s=0\.3"):
            queue.enqueue({"n": 2})
        assert queue.get_job(job_id) is not None
    assert queue.enqueue({"n": 3}) > job_id  # let go on leaving


def test_hold_write_path_lets_go_after_its_seconds(url: str, open_store: StoreFactory) -> None:
    queue = open_store(busy_timeout_s=5).queue("q")
    queue.enqueue({"n": 1})
    with provider.hold_write_path(EngineSpec(url=url, opts={}), 0.5):
        assert queue.enqueue({"n": 2}) > 0  # waited out the holder's half second


def test_the_outage_switch_refuses_writes_until_it_is_switched_back(
    url: str, open_store: StoreFactory
) -> None:
    open_store().close()
    with provider.outage_switch(EngineSpec(url=url, opts={})) as switch:
        assert switch.spec.opts["busy_timeout_s"] == OUTAGE_BUSY_TIMEOUT_S
        assert switch.give_up_s == OUTAGE_BUSY_TIMEOUT_S
        queue = open_store(**switch.spec.opts).queue("q")
        job_id = queue.enqueue({"n": 1})
        with switch.unavailable(HOLD_S):
            with pytest.raises(EngineUnavailable, match="another process"):
                queue.enqueue({"n": 2})
            assert queue.get_job(job_id) is not None  # a WAL reader is never blocked
        assert queue.enqueue({"n": 3}) > job_id
