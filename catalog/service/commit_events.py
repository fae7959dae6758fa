"""Commit events: the transactional outbox (catalog/store/outbox.py) sent to Kafka as CloudEvents 1.0
JSON messages (structured mode), at least once.

Every change of a table or view wrote its event row in its own transaction; one catalog process at a
time (the holder of the outbox's publisher lock) reads the oldest rows, sends them with an idempotent
producer and deletes them only once the broker acknowledged them. A process killed between the send
and the delete sends them again after restart (or another process does): with the same `id`, so a
consumer deduplicates by (`source`, `id`). A commit that did not land wrote no row, so never an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter, Gauge

from catalog.events import EventBus, TableChanged
from catalog.faults import CRASH_AFTER_EVENTS_SENT, crash_point
from catalog.settings import Settings
from catalog.store.interfaces import CatalogStore
from catalog.store.outbox import OutboxRow
from catalog.store.watermarks import TopicProgress
from catalog.watermarks import completeness

log = logging.getLogger(__name__)

SEPARATOR = "\x1f"
CONTENT_TYPE = "application/cloudevents+json; charset=UTF-8"
# Kafka topic names: these characters, 249 at most; a cluster's name is made to fit.
_TOPIC_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_RETRY_SECONDS = 5.0
# How long a woken publisher waits for more commits before reading the outbox.
GATHER_SECONDS = 0.05

PUBLISHED = Counter("floe_commit_events_published_total", "Commit events the events broker acknowledged")
FAILED = Counter("floe_commit_events_failed_total", "Commit event sends the broker refused or timed out")
DEPTH = Gauge(
    "floe_commit_events_outbox_depth", "Commit events waiting in the outbox", multiprocess_mode="livemax"
)
OLDEST = Gauge(
    "floe_commit_events_outbox_oldest_seconds",
    "Age of the oldest commit event waiting in the outbox",
    multiprocess_mode="livemax",
)


def cluster_of(namespace_key: str) -> str:
    """A table's cluster: its namespace's first level (a source cluster's tables live under it)."""
    return namespace_key.split(SEPARATOR, 1)[0]


def topic_for(template: str, row: OutboxRow) -> str:
    """The event's topic: `template` with `{cluster}` replaced by the table's cluster, made a legal
    Kafka topic name."""
    cluster = _TOPIC_UNSAFE.sub("_", cluster_of(row.namespace))
    return template.replace("{cluster}", cluster)[:249]


def cloud_event(row: OutboxRow, source: str, watermark: dict[str, Any] | None = None) -> dict[str, Any]:
    """The CloudEvents 1.0 structured-mode document of an outbox row."""
    levels = row.namespace.split(SEPARATOR)
    data: dict[str, Any] = {
        "warehouse": row.warehouse,
        "namespace": levels,
        "name": row.name,
        "cluster": levels[0],
        "table-uuid-in-catalog": row.tabular_id,
        "kind": row.kind,
        "change": row.event_type,
        **row.payload,
    }
    if watermark is not None:
        data["watermark"] = watermark
    return {
        "specversion": "1.0",
        "id": str(row.id),
        "source": source,
        "type": f"io.floe.{row.kind}.{row.event_type}",
        "subject": ".".join([*levels, row.name]),
        "time": datetime.fromtimestamp(row.created_at_ms / 1000, UTC).isoformat().replace("+00:00", "Z"),
        "datacontenttype": "application/json",
        "data": data,
    }


def producer_config(settings: Settings) -> dict[str, Any]:
    """confluent-kafka's producer settings: idempotent, every in-sync replica acknowledging."""
    config: dict[str, Any] = {
        "bootstrap.servers": settings.events_kafka_bootstrap_servers,
        "client.id": "floe-commit-events",
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 30_000,
        "security.protocol": settings.events_kafka_security_protocol,
    }
    optional = {
        "sasl.mechanism": settings.events_kafka_sasl_mechanism,
        "sasl.username": settings.events_kafka_sasl_username,
        "sasl.password": settings.events_kafka_sasl_password,
        "ssl.ca.location": settings.events_kafka_ssl_ca_location,
    }
    return config | {key: value for key, value in optional.items() if value}


@dataclass(frozen=True, slots=True)
class Message:
    id: int
    topic: str
    key: bytes
    value: bytes


class KafkaSender:
    """Sends messages and waits for the broker's acknowledgements (blocking: run in a thread)."""

    def __init__(self, config: dict[str, Any]) -> None:
        from confluent_kafka import Producer

        self._producer = Producer(config)

    def send(self, messages: Sequence[Message], timeout: float) -> set[int]:
        """The ids of the messages the broker acknowledged within `timeout` seconds."""
        acked: set[int] = set()
        errors: list[str] = []

        def delivered(event_id: int, error: Any, _message: Any) -> None:
            if error is None:
                acked.add(event_id)
            elif len(errors) < 3:
                errors.append(str(error))

        for message in messages:
            self._producer.produce(
                message.topic,
                key=message.key,
                value=message.value,
                headers={"content-type": CONTENT_TYPE},
                on_delivery=functools.partial(delivered, message.id),
            )
            self._producer.poll(0)
        self._producer.flush(timeout)
        if errors:
            log.warning("commit events: the events cluster refused %s", "; ".join(errors))
        return acked

    def close(self) -> None:
        self._producer.flush(5)


class CommitEventPublisher:
    """Publishes the outbox while this process holds the publisher lock; woken by this process's own
    changes, and every `events_poll_interval_seconds` for those of other processes."""

    def __init__(
        self, store: CatalogStore, settings: Settings, sender: Callable[[], KafkaSender] | None = None
    ) -> None:
        self.store = store
        self.settings = settings
        self._sender_factory = sender or (lambda: KafkaSender(producer_config(settings)))
        self._sender: KafkaSender | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, events: EventBus) -> None:
        events.subscribe(TableChanged, lambda _event: self._wake.set())

    async def start(self) -> None:
        self.store.commit_events_enabled = True
        self._task = asyncio.create_task(self._run(), name="commit-events")

    async def stop(self) -> None:
        """Stop publishing and release the lock; events still waiting are sent by the next holder
        (after a restart, or by another process), those sent but not yet forgotten again (same ids)."""
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        if self._sender is not None:
            await asyncio.to_thread(self._sender.close)

    async def _run(self) -> None:
        """Publish while holding the lock. The lock is checked (a query) once per poll interval, not
        per send; a wake-up waits `GATHER_SECONDS` first, so the commits of a busy moment go out in one
        batch (a send costs a read, a broker round trip and a delete, whatever its size)."""
        lock = self.store.publisher_lock()
        held, checked = False, -math.inf
        try:
            while True:
                try:
                    if time.monotonic() - checked >= self.settings.events_poll_interval_seconds:
                        held, checked = await lock.acquire(), time.monotonic()
                    sent = await self.publish_once() if held else 0
                except Exception as exc:
                    log.warning("commit events: sending failed, retried in %.0f s: %s", _RETRY_SECONDS, exc)
                    held, checked = False, -math.inf
                    await asyncio.sleep(_RETRY_SECONDS)
                    continue
                if not sent:
                    # Another process's lock: its commits are its to send, only the poll matters here.
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), self.settings.events_poll_interval_seconds)
                await asyncio.sleep(GATHER_SECONDS)
        finally:
            await lock.release()

    async def publish_once(self, holds_lock: Callable[[], Any] | None = None) -> int:
        """Send the oldest waiting events and forget those acknowledged (in id order, up to the first
        that was not); how many were acknowledged. Nothing when another process holds the lock."""
        if holds_lock is not None and not await holds_lock():
            return 0
        rows = await self.store.pending_events(self.settings.events_batch_size)
        await self._measure(rows)
        if not rows:
            return 0
        progress: dict[str, dict[str, TopicProgress]] = {}  # by table: one read per table and batch
        messages = [await self._message(row, progress) for row in rows]
        if self._sender is None:
            self._sender = await asyncio.to_thread(self._sender_factory)
        acked = await asyncio.to_thread(self._sender.send, messages, 35.0)
        if acked:
            crash_point(CRASH_AFTER_EVENTS_SENT)
        done: list[int] = []
        for row in rows:  # the acknowledged prefix: later ones are sent again with the unacknowledged
            if row.id not in acked:
                break
            done.append(row.id)
        await self.store.delete_events(done)
        PUBLISHED.inc(len(done))
        if len(done) < len(rows):
            FAILED.inc(len(rows) - len(acked))
            raise RuntimeError(f"{len(rows) - len(done)} of {len(rows)} events not acknowledged")
        return len(done)

    async def _measure(self, rows: Sequence[OutboxRow]) -> None:
        if len(rows) < self.settings.events_batch_size:
            DEPTH.set(len(rows))
            OLDEST.set(0 if not rows else max(0.0, time.time() - rows[0].created_at_ms / 1000))
            return
        depth, oldest = await self.store.outbox_depth()
        DEPTH.set(depth)
        OLDEST.set(0 if oldest is None else max(0.0, time.time() - oldest / 1000))

    async def _message(self, row: OutboxRow, progress: dict[str, dict[str, TopicProgress]]) -> Message:
        watermark = await self._watermark(row, progress)
        event = cloud_event(row, self.settings.events_source, watermark)
        value = json.dumps(event, separators=(",", ":")).encode()
        return Message(row.id, topic_for(self.settings.events_topic, row), row.tabular_id.encode(), value)

    async def _watermark(
        self, row: OutboxRow, progress: dict[str, dict[str, TopicProgress]]
    ) -> dict[str, Any] | None:
        """The table's completeness in the commit's topic as of the send (catalog/watermarks.py)."""
        kafka = row.payload.get("kafka")
        if not kafka or row.event_type == "dropped":
            return None
        if row.tabular_id not in progress:
            progress[row.tabular_id] = await self.store.topic_progress(row.tabular_id)
        topic = progress[row.tabular_id].get(kafka["topic"])
        if topic is None:
            return None
        done = completeness(kafka["topic"], topic.committed, topic.states)
        return {
            "topic": done.topic,
            "watermark-ms": done.watermark_ms,
            "offset-completeness": done.offset_completeness,
            "as-of-ms": int(time.time() * 1000),
        }
