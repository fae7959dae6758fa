"""The quiet tables' producer of the many-tables benchmarks: one JSON record a second to every topic.

`arrivals` says when in each second a topic's record is sent:
- "spread" (the default): topic i of N at i/N of the second, so records arrive as they do from independent
  applications, a thousand topics' records a millisecond apart;
- "burst" (the benchmarks' producer until 2026-11-30): every topic's record at the start of the second,
  then a wait for all of them to be delivered before the next second's. Every table then becomes due at
  once, and at 1,000 topics the wait for the deliveries took longer than the second: tables got a burst of
  records every few seconds, under one record a second on average (the rows' `records measured` said so).
Each row reports the records delivered per table and second over its window, whichever the arrivals.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

ARRIVALS = ("spread", "burst")


class QuietProducer:
    """Sends one JSON record a second to every topic (`id`, `sent_at` in ms) from `start()` to `stop()`;
    `produced` maps (topic, offset) to its delivery time (epoch s)."""

    def __init__(
        self, bootstrap_servers: str, topics: Sequence[str], arrivals: str = "spread", linger_ms: int = 5
    ) -> None:
        from confluent_kafka import Producer

        if arrivals not in ARRIVALS:
            raise ValueError(f"arrivals: one of {', '.join(ARRIVALS)}")
        self.topics = list(topics)
        self.produced: dict[tuple[str, int], float] = {}
        self.skipped = 0  # records not sent because the producer fell over a second behind (spread)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # `linger_ms`: how long a record may wait for others to share its produce request (5: the
        # benchmarks' setting; 50 left the broker's CPU as it was at 1,000 topics: -s56-linger50).
        self._producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": linger_ms})
        loop = self._spread if arrivals == "spread" else self._burst
        self._thread = threading.Thread(target=loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._producer.flush(10)

    def queued(self) -> int:
        """Records sent but not yet delivered (librdkafka's queue): over a second's worth, the broker is
        behind, and the records will arrive in a burst when it catches up."""
        return len(self._producer)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            with self._lock:
                self.produced[(message.topic(), message.offset())] = time.time()

    def _send(self, topic: str, n: int) -> None:
        from confluent_kafka import KafkaException

        value = json.dumps({"id": n, "sent_at": int(time.time() * 1000)}).encode()
        # A topic just created may be unknown to the producer's metadata for a moment (seen at 1,000
        # topics): that record is not sent, so it is neither measured nor missing.
        with suppress(KafkaException):
            self._producer.produce(topic, value, on_delivery=self._delivered)
        self._producer.poll(0)

    def _burst(self) -> None:
        n = 0
        while not self._stop.is_set():
            tick = time.monotonic()
            for topic in self.topics:
                self._send(topic, n)
            self._producer.flush(10)
            n += 1
            self._stop.wait(max(0.0, 1.0 - (time.monotonic() - tick)))

    def _spread(self) -> None:
        count = len(self.topics)
        started = time.monotonic()
        sent = 0  # records sent or skipped: record k is topic k % count's of second k // count
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * count)
            if due - sent > count:  # over a second behind (a loaded machine): skip, never catch up
                self.skipped += due - sent
                sent = due
            while sent < due:
                second, index = divmod(sent, count)
                self._send(self.topics[index], second)
                sent += 1
            # Waits for the next delivery or 5 ms (librdkafka counts whole milliseconds: a shorter wait
            # would spin); deliveries are timed as they come.
            self._producer.poll(0.005)


@contextmanager
def producing(
    bootstrap_servers: str, topics: Sequence[str], arrivals: str = "spread"
) -> Iterator[dict[tuple[str, int], float]]:
    """A `QuietProducer` running while the block runs; yields its `produced` map."""
    producer = QuietProducer(bootstrap_servers, topics, arrivals)
    producer.start()
    try:
        yield producer.produced
    finally:
        producer.stop()


def delivered_per_table_second(
    produced: dict[tuple[str, int], float], tables: int, window: tuple[float, float]
) -> float | None:
    """Records delivered per table and second within `window` (epoch s): what the tables were offered."""
    start, end = window
    if end <= start or not tables:
        return None
    count = sum(1 for sent in list(produced.values()) if start <= sent <= end)
    return round(count / tables / (end - start), 2)
