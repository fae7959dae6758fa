"""Producing the benchmark's records: a backlog as fast as possible, or a steady rate for freshness."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Message, Producer

from benchmarks.ingest.events import JSON, EventFactory, Reencoder


@dataclass
class ProduceResult:
    records: int
    value_bytes: int
    seconds: float
    end_offsets: dict[int, int] = field(default_factory=dict)

    @property
    def mib_per_second(self) -> float:
        return self.value_bytes / 2**20 / self.seconds if self.seconds else 0.0


class _Acknowledgements:
    """Delivery reports: errors and the end offset of every partition."""

    def __init__(self) -> None:
        self.errors: list[KafkaError] = []
        self.end_offsets: dict[int, int] = {}
        self.acknowledged = 0

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.errors.append(error)
            return
        partition, offset = message.partition(), message.offset()
        if partition is not None and offset is not None:
            self.end_offsets[partition] = max(self.end_offsets.get(partition, 0), offset + 1)
        self.acknowledged += 1


def _producer(bootstrap: str, linger_ms: int) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": linger_ms,
            "enable.idempotence": True,
            "batch.size": 1_000_000,
        }
    )


def _send(
    producer: Producer,
    topic: str,
    value: bytes,
    key: bytes,
    acks: _Acknowledgements,
    partition: int | None = None,
) -> None:
    while True:
        try:
            if partition is None:
                producer.produce(topic, value=value, key=key, on_delivery=acks)
            else:
                producer.produce(topic, value=value, key=key, partition=partition, on_delivery=acks)
            return
        except BufferError:
            producer.poll(0.05)


def produce_backlog(
    bootstrap: str,
    topic: str,
    count: int,
    events: EventFactory,
    *,
    round_robin: int | None = None,
) -> ProduceResult:
    """Produce `count` JSON records as fast as the client goes and wait for every acknowledgement
    (`round_robin=N`: record `seq` to partition `seq % N`, else by key)."""
    return produce_backlogs(bootstrap, {topic: Reencoder(JSON)}, count, events, round_robin)[topic]


def produce_backlogs(
    bootstrap: str,
    topics: Mapping[str, Reencoder],
    count: int,
    events: EventFactory,
    round_robin: int | None = None,
) -> dict[str, ProduceResult]:
    """Every record to every topic, encoded by that topic's `Reencoder`, so the topics hold the same
    logical records (the same `sent_at` too) with the same keys in the same partitions."""
    producer = _producer(bootstrap, linger_ms=50)
    acks = {topic: _Acknowledgements() for topic in topics}
    sizes = dict.fromkeys(topics, 0)
    started = time.perf_counter()
    for seq in range(count):
        json_value = events.value(seq, time.time())
        key = events.key(seq)
        partition = seq % round_robin if round_robin else None
        for topic, reencoder in topics.items():
            value = reencoder.encode(json_value)
            sizes[topic] += len(value)
            _send(producer, topic, value, key, acks[topic], partition)
        if seq % 1000 == 0:
            producer.poll(0)
    errors = [e for a in acks.values() for e in a.errors]
    if producer.flush(120) or errors:
        raise RuntimeError(f"producing the backlog failed: {errors[:3]} ({len(errors)} errors)")
    seconds = time.perf_counter() - started
    return {
        topic: ProduceResult(count, sizes[topic], seconds, dict(acks[topic].end_offsets)) for topic in topics
    }


class SteadyProducer(threading.Thread):
    """Produces `rate` records per second (in small bursts every 10 ms) until `stop()`."""

    def __init__(self, bootstrap: str, topic: str, rate: float, events: EventFactory) -> None:
        super().__init__(name=f"producer-{topic}", daemon=True)
        self.topic = topic
        self.rate = rate
        self.events = events
        # linger 5 ms: what a latency-minded producer sets; it adds at most 5 ms to freshness.
        self.producer = _producer(bootstrap, linger_ms=5)
        self.acks = _Acknowledgements()
        self.sent = 0
        self.sent_times: list[float] = []  # the `sent_at` stamped into record `seq`, by seq
        self.value_bytes = 0
        self._halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            started = time.monotonic()
            while not self._halt.is_set():
                due = int((time.monotonic() - started) * self.rate)
                while self.sent < due:
                    now = time.time()
                    value = self.events.value(self.sent, now)
                    self.sent_times.append(now)
                    self.value_bytes += len(value)
                    _send(self.producer, self.topic, value, self.events.key(self.sent), self.acks)
                    self.sent += 1
                self.producer.poll(0)
                time.sleep(0.01)
            self.producer.flush(60)
        except BaseException as exc:  # reported by the run, not lost in a thread
            self.error = exc

    def stop(self) -> ProduceResult:
        self._halt.set()
        self.join(90)
        if self.error is not None:
            raise RuntimeError(f"the steady producer failed: {self.error}") from self.error
        if self.acks.errors:
            raise RuntimeError(f"producing failed: {self.acks.errors[:3]}")
        return ProduceResult(self.sent, self.value_bytes, 0.0, dict(self.acks.end_offsets))
