"""When a shared-consumer table's batch is due while the consumer is behind its topic."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# While the consumer is more than this many intervals behind a table's topic (a backlog, not a lag),
# the table's batch may grow to this many intervals.
CATCH_UP_STRETCH = 5.0


def catch_up_due(waited: float, interval: float, buffered: int, unread: int) -> bool:
    """Whether a table whose oldest buffered record has waited `waited` seconds is due, past its
    `interval`: yes, unless its topic holds more records not yet read (`unread`) than the table would
    gather in `CATCH_UP_STRETCH` intervals at the rate it buffered them. Then the consumer is behind by a
    backlog (after a restart or an outage), not a few seconds of lag: a longer batch pays each commit's
    fixed cost (a file, a manifest, a snapshot, a transaction) for more records, in fewer, larger files.
    Up to `CATCH_UP_STRETCH` intervals, so freshness stays bounded; near its topic's end a table commits
    at its interval (a longer batch then only delays records already late)."""
    if waited < interval:
        return False
    if waited >= interval * CATCH_UP_STRETCH:
        return True
    behind = unread * waited / max(buffered, 1)  # seconds of this table's records not read yet
    return behind <= interval * CATCH_UP_STRETCH


def unread_records(consumer: Any, topic: str, partitions: Iterable[int]) -> int:
    """Records of `topic`'s `partitions` the broker holds past what `consumer` has handed over, from
    librdkafka's high watermarks as its last fetches saw them (`cached=True`: no request to the broker);
    a partition nothing was consumed from yet counts none."""
    from confluent_kafka import TopicPartition

    wanted = [TopicPartition(topic, p) for p in partitions]
    unread = 0
    for position in consumer.position(wanted) if wanted else ():
        if position.offset < 0:
            continue
        _, high = consumer.get_watermark_offsets(position, cached=True)
        unread += max(0, high - position.offset) if high >= 0 else 0
    return unread
