"""Kafka offsets carried by snapshots: the exactly-once fence, as pure functions.

An ingestion commit's `add-snapshot` summary says which Kafka records the snapshot covers:

- `floe.kafka.topic`: the source topic;
- `floe.kafka.start-offsets`: `{"<partition>": <offset>}`, the next offsets the writer believed the table
  had committed when it read the batch (a partition the table never saw is absent);
- `floe.kafka.end-offsets`: `{"<partition>": <offset>}`, the next offsets after this snapshot;
- `floe.kafka.min-timestamp-ms` / `floe.kafka.max-timestamp-ms`: the batch's record-time range (the Kafka
  record timestamps, epoch milliseconds; absent on snapshots written before floe recorded them).

floe keeps the latest end offsets per table in its database, in the same transaction as the pointer
swap, so they survive snapshot expiry and compaction. A commit is accepted only when its start offsets
equal the stored ones for every partition it covers: a batch committed twice (a restart that lost its
Spark checkpoint, a zombie writer) is refused with a 409 instead of duplicating rows.

The same summaries answer "which snapshot first holds Kafka record (partition, offset)?" (`snapshot_at`),
so any engine can time-travel to the table as of a Kafka position, and "which snapshot is the table as
of record time T?" (`snapshot_at_time`): the newest snapshot holding no record later than T.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update import AddSnapshotUpdate, TableUpdate

from catalog.errors import BadRequest, CommitFailed, NotFound

TOPIC = "floe.kafka.topic"
START_OFFSETS = "floe.kafka.start-offsets"
END_OFFSETS = "floe.kafka.end-offsets"
MIN_TIMESTAMP = "floe.kafka.min-timestamp-ms"
MAX_TIMESTAMP = "floe.kafka.max-timestamp-ms"


@dataclass(frozen=True, slots=True)
class KafkaProgress:
    """What one commit claims about a topic: from which offsets it starts, to which it advances."""

    topic: str
    start: Mapping[int, int]
    end: Mapping[int, int]


# Kafka partitions are int32 and offsets int64 (the database column too): larger numbers name no record.
MAX_PARTITION = 2**31 - 1
MAX_OFFSET = 2**63 - 1
# An offsets property is a flat object of numbers; this bounds it before it is parsed (ten thousand
# partitions take a quarter of it).
MAX_OFFSETS_CHARS = 1_000_000
MAX_TOPIC_CHARS = 249  # Kafka's own limit
# Record times are shown as dates: the last millisecond of year 9999 is the latest one.
MAX_RECORD_TIME_MS = 253_402_300_799_999
_PARTITION = re.compile(r"[0-9]{1,10}")
# The summary properties that only mean something with a topic.
_TOPIC_BOUND = (START_OFFSETS, END_OFFSETS)


class InvalidOffsets(ValueError):
    """An offsets property that is not a flat JSON object of partition → offset within Kafka's ranges."""


def parse_offsets(raw: object, *, skip_invalid: bool = False) -> dict[int, int]:
    """`{"<partition>": <offset>}` as numbers, or `InvalidOffsets` saying why. The text is bounded and
    checked to be flat before it is parsed (a deeply nested document must not reach the JSON parser).
    `skip_invalid` leaves out entries out of range instead (for showing what older floe stored)."""
    if not isinstance(raw, str):
        raise InvalidOffsets("not a JSON text")
    if len(raw) > MAX_OFFSETS_CHARS:
        raise InvalidOffsets(f"longer than {MAX_OFFSETS_CHARS} characters")
    text = raw.strip()
    if not text.startswith("{") or text.count("{") != 1 or "[" in text:
        raise InvalidOffsets("not a flat JSON object")
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise InvalidOffsets(str(exc)) from None
    if not isinstance(parsed, dict):
        raise InvalidOffsets("not a JSON object")
    offsets: dict[int, int] = {}
    for key, offset in parsed.items():
        valid_key = _PARTITION.fullmatch(key) is not None and int(key) <= MAX_PARTITION
        valid = isinstance(offset, int) and not isinstance(offset, bool) and 0 <= offset <= MAX_OFFSET
        if skip_invalid and not (valid_key and valid):
            continue
        if not valid_key:
            raise InvalidOffsets(f"invalid partition {key[:20]!r} (partitions: 0 to {MAX_PARTITION})")
        if not valid:
            raise InvalidOffsets(f"invalid entry for partition {key} (offsets: 0 to {MAX_OFFSET})")
        offsets[int(key)] = offset
    return offsets


def _offsets(raw: str | None, name: str, *, required: bool) -> dict[int, int]:
    if raw is None:
        if required:
            raise BadRequest(f"Invalid snapshot summary: '{name}' is required with '{TOPIC}'")
        return {}
    try:
        return parse_offsets(raw)
    except InvalidOffsets as exc:
        message = f"Invalid snapshot summary: '{name}' must be a JSON object of offsets: {exc}"
        raise BadRequest(message) from None


def kafka_progress(updates: Sequence[TableUpdate]) -> KafkaProgress | None:
    """The Kafka progress a commit's snapshots claim, or None for commits that carry none."""
    found: KafkaProgress | None = None
    for update in updates:
        if not isinstance(update, AddSnapshotUpdate) or update.snapshot.summary is None:
            continue
        summary = update.snapshot.summary
        topic = summary[TOPIC]
        if topic is None:
            # Offsets without a topic fence nothing, and every later reader would have to guess.
            stray = [name for name in _TOPIC_BOUND if summary[name] is not None]
            if stray:
                raise BadRequest(f"Invalid snapshot summary: '{stray[0]}' needs '{TOPIC}'")
            continue
        if not isinstance(topic, str) or not topic.strip() or len(topic) > MAX_TOPIC_CHARS:
            raise BadRequest(
                f"Invalid snapshot summary: '{TOPIC}' must be a Kafka topic name (1 to {MAX_TOPIC_CHARS} "
                "characters)"
            )
        if found is not None:
            raise BadRequest("Invalid commit: only one snapshot per commit may carry Kafka offsets")
        start = _offsets(summary[START_OFFSETS], START_OFFSETS, required=False)
        end = _offsets(summary[END_OFFSETS], END_OFFSETS, required=True)
        for name in (MIN_TIMESTAMP, MAX_TIMESTAMP):
            if summary[name] is not None and _record_time(summary[name]) is None:
                raise BadRequest(
                    f"Invalid snapshot summary: '{name}' must be epoch milliseconds from 0 to "
                    f"{MAX_RECORD_TIME_MS}"
                )
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
        found = KafkaProgress(topic, start, end)
    return found


# How a refusal by the offsets fence begins (clients tell it from another writer's move by it).
OFFSETS_CONFLICT = "Kafka offsets conflict"


def check_kafka_progress(progress: KafkaProgress, committed: Mapping[int, int]) -> None:
    """Refuse (409) a commit whose start offsets are not where the table's committed offsets are."""
    for partition in sorted(progress.end):
        stored = committed.get(partition)
        claimed = progress.start.get(partition)
        if stored != claimed:
            raise CommitFailed(
                f"{OFFSETS_CONFLICT}: topic {progress.topic} partition {partition} is committed up to "
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


@dataclass(frozen=True, slots=True)
class SnapshotAtTime:
    """The table as of a record time: the snapshot, the offsets it covers, its batch's record-time range
    and the newest record time of everything it holds (its `as_of_ms` ≤ the asked time)."""

    snapshot: Snapshot
    progress: KafkaProgress
    min_timestamp_ms: int
    max_timestamp_ms: int
    as_of_ms: int


def record_times(snapshot: Snapshot) -> tuple[int, int] | None:
    """A snapshot's batch record-time range (epoch ms), None when its summary does not carry one."""
    summary = snapshot.summary
    if summary is None:
        return None
    low, high = _record_time(summary[MIN_TIMESTAMP]), _record_time(summary[MAX_TIMESTAMP])
    if low is None or high is None:
        return None
    return (low, high) if low <= high else None


def _record_time(raw: object) -> int | None:
    """Epoch milliseconds within what dates can show, else None."""
    if not isinstance(raw, str) or len(raw) > 20 or not raw.strip().isdigit():
        return None
    value = int(raw)
    return value if value <= MAX_RECORD_TIME_MS else None


def _iso(epoch_ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds")


def snapshot_at_time(
    snapshots: Sequence[Snapshot], timestamp_ms: int, topic: str | None = None
) -> SnapshotAtTime:
    """The table as of record time `timestamp_ms`: the newest ingestion snapshot whose data holds no
    record later than it, i.e. whose high-water record time (the latest Kafka timestamp of its batch and
    of every earlier ingestion snapshot) is ≤ `timestamp_ms`.

    The answer is final: it is given only once a later snapshot holds a record after `timestamp_ms`
    (NotFound "not yet" before, as records up to that time may still be on their way), and a record
    with an earlier time arriving later never changes it. NotFound, saying which, when the table holds
    no record at or before that time, or when the snapshot that answered it has been expired.
    A batch spanning `timestamp_ms` is not included: its records up to that time come with it."""
    ingested = [
        (snapshot, progress, times)
        for snapshot in sorted(snapshots, key=lambda s: (s.sequence_number or 0, s.timestamp_ms))
        if (progress := _progress_of(snapshot)) is not None
        and (topic is None or progress.topic == topic)
        and (times := record_times(snapshot)) is not None
    ]
    topics = {progress.topic for _, progress, _ in ingested}
    if len(topics) > 1:
        raise BadRequest(f"The table holds several topics ({', '.join(sorted(topics))}): name one with topic")
    answer: SnapshotAtTime | None = None
    high_water: int | None = None
    for snapshot, progress, (low, high) in ingested:
        high_water = high if high_water is None else max(high_water, high)
        if high_water > timestamp_ms:
            break
        answer = SnapshotAtTime(snapshot, progress, low, high, high_water)
    else:
        newest = "no record time" if high_water is None else f"records up to {_iso(high_water)}"
        raise NotFound(
            f"No snapshot is the table as of {_iso(timestamp_ms)} yet: its snapshots hold {newest}, and "
            "records up to that time may still be committed (the answer is given once a snapshot holds "
            "a later record)"
        )
    if answer is not None:
        return answer
    oldest, progress, (low, high) = ingested[0]
    if progress.start:  # it started where earlier (now expired) snapshots had got to
        raise NotFound(
            f"The table as of {_iso(timestamp_ms)} was a snapshot that has been expired: the oldest "
            f"snapshot left (snapshot {oldest.snapshot_id}) holds records from {_iso(low)} to {_iso(high)}"
        )
    raise NotFound(
        f"The table holds no record at or before {_iso(timestamp_ms)}: its first records are from {_iso(low)}"
    )
