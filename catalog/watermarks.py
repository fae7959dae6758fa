"""A table's completeness watermark and offset completeness, as pure functions (docs/watermarks.md).

The catalog knows what each table has committed (its next offset per partition, `kafka_offsets`) but
does not talk to Kafka: ingestion, which does, reports the broker's end offset of every partition of
each table's topic and when it asked (`observe`). A partition is *caught up at time t* when the table
has committed every offset below the end offset ingestion read at t: every record appended before t
is in the table. The table's **watermark** W is the earliest, over the topic's partitions, of the
latest time each was seen caught up: every record whose Kafka timestamp is before W is in the table
(as long as record timestamps are not later than their append, see the docs' limits). An idle
partition is caught up at each observation, so it does not hold W back while ingestion reports.

Per partition the catalog keeps the latest observation, the oldest one the table had not reached yet
when it was replaced (`pending`: so the watermark advances under steady traffic, where the newest end
offset is always a little ahead of the commits), and the latest caught-up time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Observation:
    """The broker's end offset of a partition (the next offset it will give a record) at `at_ms`."""

    end_offset: int
    at_ms: int


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What the catalog keeps per partition of a table's topic (`kafka_end_offsets`)."""

    latest: Observation
    pending: Observation | None = None
    caught_up_at_ms: int | None = None


def _reached(committed: int | None, seen: Observation | None) -> bool:
    # No committed offset is offset 0: an empty partition (end offset 0) is caught up.
    return seen is not None and (committed or 0) >= seen.end_offset


def observe(previous: PartitionState | None, committed: int | None, seen: Observation) -> PartitionState:
    """The partition's state after ingestion saw its end offset `seen`, the table having committed up
    to `committed` (its next offset; None: nothing yet). An observation older than the latest is
    ignored (reports may arrive out of order)."""
    if previous is None:
        caught = seen.at_ms if _reached(committed, seen) else None
        return PartitionState(seen, None, caught)
    if seen.at_ms < previous.latest.at_ms:
        return previous
    caught = previous.caught_up_at_ms
    pending = previous.pending
    for older in (pending, previous.latest):
        if older is not None and _reached(committed, older):
            caught = older.at_ms if caught is None else max(caught, older.at_ms)
    if pending is not None and _reached(committed, pending):
        pending = None
    if pending is None and not _reached(committed, previous.latest):
        pending = previous.latest
    if _reached(committed, seen):
        caught = seen.at_ms if caught is None else max(caught, seen.at_ms)
        pending = None
    return PartitionState(seen, pending, caught)


def complete_through(state: PartitionState | None, committed: int | None) -> int | None:
    """The latest time (epoch ms) the partition was seen caught up, given what the table has committed
    now; None when it never was (or ingestion never reported it)."""
    if state is None:
        return None
    times = [state.caught_up_at_ms] if state.caught_up_at_ms is not None else []
    times += [seen.at_ms for seen in (state.pending, state.latest) if seen and _reached(committed, seen)]
    return max(times, default=None)


@dataclass(frozen=True, slots=True)
class PartitionCompleteness:
    partition: int
    committed_offset: int | None  # the table's next offset (None: nothing committed)
    end_offset: int | None  # the broker's, as last seen (None: never reported)
    observed_at_ms: int | None
    complete_through_ms: int | None


@dataclass(frozen=True, slots=True)
class Completeness:
    """A table's (one topic's) completeness: W, the offset ratio, and each partition's part."""

    topic: str
    watermark_ms: int | None  # every record with a Kafka timestamp before it is in the table
    offset_completeness: float | None  # committed ÷ end offsets as last seen, 0..1
    committed_records: int
    end_records: int
    as_of_ms: int | None  # the oldest observation the ratio uses
    partitions: tuple[PartitionCompleteness, ...]

    def complete_through(self, until_ms: int) -> bool:
        """Whether every record with a timestamp before `until_ms` is in the table."""
        return self.watermark_ms is not None and self.watermark_ms >= until_ms


def completeness(
    topic: str, committed: Mapping[int, int], states: Mapping[int, PartitionState]
) -> Completeness:
    """Derive the table's completeness for `topic` from its committed next offsets and the observed
    partition states. The watermark is None while any partition (observed or committed) has never
    been seen caught up, or when ingestion has reported no partition at all."""
    parts: list[PartitionCompleteness] = []
    for partition in sorted(set(committed) | set(states)):
        state, offset = states.get(partition), committed.get(partition)
        parts.append(
            PartitionCompleteness(
                partition,
                offset,
                None if state is None else state.latest.end_offset,
                None if state is None else state.latest.at_ms,
                complete_through(state, offset),
            )
        )
    times = [p.complete_through_ms for p in parts]
    watermark = None if not states or None in times else min(t for t in times if t is not None)
    observed = [p for p in parts if p.end_offset is not None]
    ends = sum(p.end_offset or 0 for p in observed)
    done = sum(min(p.committed_offset or 0, p.end_offset or 0) for p in observed)
    ratio = None if not observed else (1.0 if ends == 0 else done / ends)
    as_of = min((p.observed_at_ms for p in observed if p.observed_at_ms is not None), default=None)
    return Completeness(topic, watermark, ratio, done, ends, as_of, tuple(parts))


def observe_all(
    previous: Mapping[int, PartitionState],
    committed: Mapping[int, int],
    ends: Iterable[tuple[int, int]],
    at_ms: int,
) -> dict[int, PartitionState]:
    """Every reported partition's new state (`ends`: (partition, end offset) seen at `at_ms`)."""
    updated = dict(previous)
    for partition, end in ends:
        updated[partition] = observe(
            previous.get(partition), committed.get(partition), Observation(end, at_ms)
        )
    return updated
