"""The topic a replay reads (ingest/replay.py): its partitions, retained offsets, offsets by time and
the records of a range, through confluent-kafka with the table's own connection (`consumer_config`)."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

# A range's records are read within this many seconds, or the replay stops (nothing committed).
READ_TIMEOUT_SECONDS = 300.0
_METADATA_TIMEOUT = 15.0


@dataclass(frozen=True)
class Span:
    """The offsets [start, end) of one partition."""

    start: int
    end: int

    def __len__(self) -> int:
        return max(0, self.end - self.start)


class TopicGone(Exception):
    """The broker no longer holds a record of the range (retention ran while it was read)."""


class Topic(Protocol):
    name: str

    def partitions(self) -> list[int]: ...

    def watermarks(self, partition: int) -> tuple[int, int]:
        """(earliest retained offset, end offset)."""
        ...

    def offset_at(self, partition: int, time_ms: int) -> int:
        """The first offset whose record time is at or after `time_ms` (the end offset when none)."""
        ...

    def read(self, spans: Mapping[int, Span]) -> dict[tuple[int, int], dict[str, Any]]:
        """The records of `spans` by (partition, offset), each as a dead letter's fields (no error)."""
        ...


class KafkaTopic:
    """A topic read with confluent-kafka: a consumer assigned to offsets, never committing any."""

    def __init__(self, consumer_config: Mapping[str, Any], name: str) -> None:
        self.name = name
        self._config: dict[str, Any] = {
            **{k: v for k, v in consumer_config.items() if k != "group.id"},
            "group.id": f"floe-replay-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            # An offset the broker no longer holds is an error, never a silent jump to another offset.
            "auto.offset.reset": "error",
            "log_level": 0,
        }
        self._consumer = Consumer(self._config)

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> KafkaTopic:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def partitions(self) -> list[int]:
        metadata = self._consumer.list_topics(self.name, timeout=_METADATA_TIMEOUT)
        topic = metadata.topics.get(self.name)
        if topic is None or topic.error is not None:
            raise KafkaException(topic.error if topic is not None else f"topic {self.name} not found")
        return sorted(topic.partitions)

    def watermarks(self, partition: int) -> tuple[int, int]:
        low, high = self._consumer.get_watermark_offsets(
            TopicPartition(self.name, partition), timeout=_METADATA_TIMEOUT
        )
        return int(low), int(high)

    def offset_at(self, partition: int, time_ms: int) -> int:
        [found] = self._consumer.offsets_for_times(
            [TopicPartition(self.name, partition, time_ms)], timeout=_METADATA_TIMEOUT
        )
        if found.error is not None:
            raise KafkaException(found.error)
        if found.offset < 0 or found.offset == OFFSET_END:
            return self.watermarks(partition)[1]
        return int(found.offset)

    def read(self, spans: Mapping[int, Span]) -> dict[tuple[int, int], dict[str, Any]]:
        wanted = {p: s for p, s in spans.items() if len(s)}
        records: dict[tuple[int, int], dict[str, Any]] = {}
        if not wanted:
            return records
        self._consumer.assign([TopicPartition(self.name, p, s.start) for p, s in wanted.items()])
        pending = set(wanted)
        deadline = time.monotonic() + READ_TIMEOUT_SECONDS
        try:
            while pending:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{self.name}: the range was not read within {READ_TIMEOUT_SECONDS:.0f} s"
                    )
                for message in self._consumer.consume(1000, timeout=1.0):
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            continue
                        if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                            raise TopicGone(f"{self.name}: {error.str()}")
                        if error.fatal() or not error.retriable():
                            raise KafkaException(error)
                        continue
                    partition, offset = message.partition(), message.offset()
                    if partition is None or offset is None or partition not in wanted:
                        continue
                    span = wanted[partition]
                    if span.start <= offset < span.end:
                        records[(partition, offset)] = _fields(self.name, message)
                if pending:
                    positions = self._consumer.position([TopicPartition(self.name, p) for p in pending])
                    # Done with a partition once its position passed the span (control records of
                    # transactions take offsets too, so the last offset may hold no record).
                    pending -= {tp.partition for tp in positions if tp.offset >= wanted[tp.partition].end}
        finally:
            self._consumer.unassign()
        return records


def _fields(topic: str, message: Any) -> dict[str, Any]:
    _, timestamp_ms = message.timestamp()
    headers = message.headers()
    return {
        "topic": topic,
        "partition": message.partition(),
        "offset": message.offset(),
        "timestamp": dt.datetime.fromtimestamp(timestamp_ms / 1000, dt.UTC),
        "key": message.key(),
        "value": message.value(),
        "headers": None if headers is None else [{"key": k, "value": v} for k, v in headers],
    }
