"""The transactional seam (CONTRACT.md §3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..driver import queue_topic, stream_topic
from ..errors import StoreClosed
from ..names import outbox_queue_name, validate_name
from ..options import OUTBOX_QUEUE_OPTS, EnqueueOpts, QueueOpts, resolve_new_job
from ..payload import encode_payload
from ..values import Job
from .queues import _enqueue_opts, _storable, check_job_id

if TYPE_CHECKING:
    from .store import CoreStore


class CoreTransaction:
    """Engine statements run on the transaction's connection; wakes wait for commit."""

    def __init__(self, store: CoreStore, handle: Any) -> None:
        self._store = store
        self._handle = handle
        self._topics: set[str] = set()
        self._finished = False

    @property
    def connection(self) -> Any:
        self._check_live()
        return self._store._driver.native_connection(self._handle)

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        connection = self.connection
        return connection.execute(sql, params) if params is not None else connection.execute(sql)

    def enqueue(self, queue: str, payload: Any, opts: EnqueueOpts | None = None) -> int:
        validate_name(queue, "queue name")
        return self._insert(queue, payload, self._store._queue_opts_for(queue), _enqueue_opts(opts))

    def outbox_enqueue(self, outbox: str, payload: Any) -> int:
        backing = outbox_queue_name(outbox)
        return self._insert(backing, payload, OUTBOX_QUEUE_OPTS, _enqueue_opts(None))

    def stream_append(self, stream: str, payload: Any) -> int:
        validate_name(stream, "stream name")
        text = encode_payload(payload)
        self._check_live()
        store = self._store
        (offset,) = store._streams().stream_append(self._handle, stream, [text], store._now())
        self._announce(stream_topic(stream))
        return offset

    def notify(self, channel: str, payload: Any) -> None:
        """Delivered to subscribers only if the transaction commits."""
        validate_name(channel, "channel")
        text = encode_payload(payload)
        self._check_live()
        store = self._store
        store._pubsub().publish(self._handle, channel, text, store._now())

    def get_job_tx(self, queue: str, job_id: int) -> Job | None:
        """Queue-filtered read inside the transaction (CONTRACT.md §2)."""
        validate_name(queue, "queue name")
        check_job_id(job_id)
        self._check_live()
        if not _storable(job_id):
            return None
        return self._store._driver.get_job(self._handle, job_id, queue)

    def _insert(self, queue: str, payload: Any, queue_opts: QueueOpts, opts: EnqueueOpts) -> int:
        text = encode_payload(payload)
        self._check_live()
        store = self._store
        job = resolve_new_job(queue, text, queue_opts, opts, store._now())
        topic = queue_topic(queue)
        (job_id,) = store._driver.insert_jobs(self._handle, [job])
        self._announce(topic)
        return job_id

    def _announce(self, topic: str) -> None:
        if topic not in self._topics:
            self._store._driver.announce(self._handle, [topic])
            self._topics.add(topic)

    def _check_live(self) -> None:
        if self._finished:
            raise StoreClosed("this transaction has already finished")
        self._store._check_open()

    def _finish(self) -> set[str]:
        self._finished = True
        return self._topics
