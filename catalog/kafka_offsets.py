"""Kafka offsets carried by snapshots: the exactly-once fence, as pure functions.

An ingestion commit's `add-snapshot` summary says which Kafka records the snapshot covers:

- `floe.kafka.topic`: the source topic;
- `floe.kafka.start-offsets`: `{"<partition>": <offset>}`, the next offsets the writer believed the table
  had committed when it read the batch (a partition the table never saw is absent);
- `floe.kafka.end-offsets`: `{"<partition>": <offset>}`, the next offsets after this snapshot.

floe keeps the latest end offsets per table in its database, in the same transaction as the pointer
swap, so they survive snapshot expiry and compaction. A commit is accepted only when its start offsets
equal the stored ones for every partition it covers: a batch committed twice (a restart that lost its
Spark checkpoint, a zombie writer) is refused with a 409 instead of duplicating rows.

The same summaries answer "which snapshot first holds Kafka record (partition, offset)?" (`snapshot_at`),
so any engine can time-travel to the table as of a Kafka position.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update import AddSnapshotUpdate, TableUpdate

from catalog.errors import BadRequest, CommitFailed, NotFound

TOPIC = "floe.kafka.topic"
START_OFFSETS = "floe.kafka.start-offsets"
END_OFFSETS = "floe.kafka.end-offsets"


@dataclass(frozen=True, slots=True)
class KafkaProgress:
    """What one commit claims about a topic: from which offsets it starts, to which it advances."""

    topic: str
    start: Mapping[int, int]
    end: Mapping[int, int]


def _offsets(raw: str | None, name: str, *, required: bool) -> dict[int, int]:
    if raw is None:
        if required:
            raise BadRequest(f"Invalid snapshot summary: '{name}' is required with '{TOPIC}'")
        return {}
    try:
        parsed = json.loads(raw)
        if not isinstance(parsed, dict):
            raise ValueError("not an object")
        offsets = {int(partition): offset for partition, offset in parsed.items()}
    except ValueError as exc:
        raise BadRequest(
            f"Invalid snapshot summary: '{name}' must be a JSON object of offsets: {exc}"
        ) from exc
    for partition, offset in offsets.items():
        if partition < 0 or not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise BadRequest(
                f"Invalid snapshot summary: '{name}' has an invalid entry for partition {partition}"
            )
    return offsets


def kafka_progress(updates: Sequence[TableUpdate]) -> KafkaProgress | None:
    """The Kafka progress a commit's snapshots claim, or None for commits that carry none."""
    found: KafkaProgress | None = None
    for update in updates:
        if not isinstance(update, AddSnapshotUpdate) or update.snapshot.summary is None:
            continue
        summary = update.snapshot.summary
        topic = summary[TOPIC]
        if topic is None:
            continue
        if found is not None:
            raise BadRequest("Invalid commit: only one snapshot per commit may carry Kafka offsets")
        start = _offsets(summary[START_OFFSETS], START_OFFSETS, required=False)
        end = _offsets(summary[END_OFFSETS], END_OFFSETS, required=True)
        for partition, offset in end.items():
            if offset < start.get(partition, 0):
                raise BadRequest(
                    f"Invalid snapshot summary: partition {partition} ends at {offset}, "
                    f"before its start {start[partition]}"
                )
        unknown = set(start) - set(end)
        if unknown:
            raise BadRequest(
                f"Invalid snapshot summary: start offsets for partitions {sorted(unknown)} without end"
            )
        found = KafkaProgress(str(topic), start, end)
    return found


def check_kafka_progress(progress: KafkaProgress, committed: Mapping[int, int]) -> None:
    """Refuse (409) a commit whose start offsets are not where the table's committed offsets are."""
    for partition in sorted(progress.end):
        stored = committed.get(partition)
        claimed = progress.start.get(partition)
        if stored != claimed:
            raise CommitFailed(
                f"Kafka offsets conflict: topic {progress.topic} partition {partition} is committed up to "
                f"{'nothing' if stored is None else stored}, but this commit starts at "
                f"{'the beginning' if claimed is None else claimed}; the batch was already committed "
                "or another writer is ingesting this table"
            )


@dataclass(frozen=True, slots=True)
class SnapshotAtPosition:
    """The first snapshot holding a Kafka record, and the offsets it covers."""

    snapshot: Snapshot
    progress: KafkaProgress


def _progress_of(snapshot: Snapshot) -> KafkaProgress | None:
    summary = snapshot.summary
    if summary is None or summary[TOPIC] is None:
        return None
    try:
        start = _offsets(summary[START_OFFSETS], START_OFFSETS, required=False)
        end = _offsets(summary[END_OFFSETS], END_OFFSETS, required=True)
    except BadRequest:
        return None  # a summary floe did not write (it validates its own on commit)
    return KafkaProgress(str(summary[TOPIC]), start, end)


def snapshot_at(
    snapshots: Sequence[Snapshot], partition: int, offset: int, topic: str | None = None
) -> SnapshotAtPosition:
    """The first of the table's snapshots whose data includes record `offset` of `partition`: the
    ingestion snapshot whose offsets advanced past it. NotFound, saying which, when no snapshot holds it
    yet, or when the snapshot that added it has been expired (the oldest one left starts after it)."""
    if partition < 0 or offset < 0:
        raise BadRequest("partition and offset must be >= 0")
    covering = [
        (snapshot, progress)
        for snapshot in sorted(snapshots, key=lambda s: (s.sequence_number or 0, s.timestamp_ms))
        if (progress := _progress_of(snapshot)) is not None
        and (topic is None or progress.topic == topic)
        and partition in progress.end
    ]
    topics = {progress.topic for _, progress in covering}
    if len(topics) > 1:
        raise BadRequest(f"The table holds several topics ({', '.join(sorted(topics))}): name one with topic")
    for snapshot, progress in covering:
        if progress.end[partition] <= offset:
            continue
        started = progress.start.get(partition)
        if started is not None and started > offset:
            raise NotFound(
                f"Offset {offset} of partition {partition} was committed by a snapshot that has been "
                f"expired: the oldest snapshot left covers partition {partition} from offset {started} "
                f"(snapshot {snapshot.snapshot_id})"
            )
        return SnapshotAtPosition(snapshot, progress)
    newest = max((progress.end[partition] for _, progress in covering), default=None)
    committed = "nothing" if newest is None else f"up to offset {newest - 1}"
    raise NotFound(
        f"No snapshot holds offset {offset} of partition {partition} yet: the table's snapshots hold "
        f"{committed} of that partition"
    )
