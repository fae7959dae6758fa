"""Replay: the rows that came from a range of a topic rebuilt from the topic, exactly once.

`replay` reads the records of a range of offsets (per partition, `[start, end)`) from Kafka, decodes
them with the table's current schema (`ingest.shared.json_rows`, ingestion's own decoder and reasons)
and commits, in ONE multi-table transaction through floe's `/transactions/commit`:

- the data table: every data file holding a row of the range is replaced by one file of its rows
  outside the range (copy-on-write) plus the range's records that now decode, with the `_kafka`
  columns ingestion gives them;
- the dead-letter table: the same for its dead letters of the range, plus the range's records that do
  not decode now, with their reason.

Each change is pinned to the snapshot and uuid it was read from, so the old rows of the range are
removed and the new ones added at once or not at all: a replay killed before the commit changes
nothing, and one run again replaces the range's rows again (idempotent). The range ends at most where
the table's committed offsets end: records past them are ingestion's, which goes on meanwhile (its
commits land only offsets past the ones it committed, so a refused replay commit is rebuilt on the
new snapshots with the files it wrote, as long as the replaced files are live and no new file holds a
row of the range). Neither snapshot carries Kafka offsets (`floe.kafka.*`): the offsets fence and the
stored offsets are untouched. Both carry the counts (`floe.replay.*`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pyiceberg.expressions import (
    AlwaysFalse,
    And,
    BooleanExpression,
    EqualTo,
    GreaterThanOrEqual,
    LessThan,
    Or,
)
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.typedef import Identifier

from catalog.pipelines.columns import CDC_COLUMN, KAFKA_COLUMN, KEY_COLUMN
from catalog.pipelines.iceberg import TABLE_MODE_PROPERTY
from ingest.dlq_redrive import decide
from ingest.replay_source import Span, Topic
from ingest.shared.json_rows import readable
from ingest.table_rewrite import (
    Send,
    crash_point,
    file_rows,
    live_files,
    remove_files,
    replace_files,
    snapshot_ids,
    table_change,
    write_rows,
)

# The snapshot-summary properties of a replay commit (both tables' snapshots carry them).
RECORDS = "floe.replay.records"
ROWS = "floe.replay.rows"
DEAD_LETTERS = "floe.replay.dead-letters"
RANGE = "floe.replay.range"
# A replay reads at most this many records (they are held in memory): a longer range is refused.
MAX_RECORDS = 1_000_000
# A commit refused this many times in a row (the tables moved each time) gives up.
MAX_ATTEMPTS = 20
CRASH_BEFORE_COMMIT = "replay-before-commit"
CRASH_AFTER_COMMIT = "replay-after-commit"


class ReplayRefused(Exception):
    """The range cannot be replayed (the table's kind, the topic's retention): the message says why."""


class ReplayFailed(Exception):
    """The replay could not commit (refused too often, or floe's answer lost and not found after)."""


# -- the range ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Position:
    """`--from`/`--to`: one offset for every partition, offsets of some partitions, or a record time."""

    offset: int | None = None
    offsets: dict[int, int] | None = None
    time: dt.datetime | None = None

    def __str__(self) -> str:
        if self.offsets is not None:
            return ",".join(f"{p}:{o}" for p, o in sorted(self.offsets.items()))
        return self.time.isoformat() if self.time is not None else str(self.offset)


def parse_position(text: str) -> Position:
    """`123` (every partition), `0:120,1:98` (those partitions) or an ISO-8601 time (UTC unless it says)."""
    text = text.strip()
    if text.isdigit():
        return Position(offset=int(text))
    pairs = [pair.split(":") for pair in text.split(",")]
    if all(len(p) == 2 and p[0].strip().isdigit() and p[1].strip().isdigit() for p in pairs):
        return Position(offsets={int(p): int(o) for p, o in pairs})
    try:
        time = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not an offset (123), partition offsets (0:120,1:98) or an ISO-8601 time"
        ) from None
    return Position(time=time if time.tzinfo is not None else time.replace(tzinfo=dt.UTC))


def _offset(topic: Topic, position: Position, partition: int) -> int | None:
    if position.offsets is not None:
        return position.offsets.get(partition)
    if position.time is not None:
        return topic.offset_at(partition, int(position.time.timestamp() * 1000))
    return position.offset


@dataclass
class Range:
    """The spans a replay covers, and the partitions whose `--to` was clipped to the committed offsets."""

    spans: dict[int, Span]
    clipped: list[int] = field(default_factory=list)
    # Partitions whose --from time resolved to the earliest retained offset: (that offset, the time).
    # Records before it may have been of that time; the tables tell (`check_time_retained`).
    retained_from: dict[int, tuple[int, dt.datetime]] = field(default_factory=dict)

    def records(self) -> int:
        return sum(len(s) for s in self.spans.values())


def resolve_range(topic: Topic, start: Position, end: Position | None, committed: Mapping[int, int]) -> Range:
    """The offsets `start`..`end` name in each partition, ending at most at the table's committed
    offsets; refused when the topic no longer holds the beginning of a span (retention)."""
    partitions = topic.partitions()
    for given in (start, end):
        unknown = sorted(set(given.offsets or ()) - set(partitions)) if given is not None else []
        if unknown:
            raise ReplayRefused(f"{topic.name} has no partition {unknown[0]} (it has {len(partitions)})")
    found = Range({})
    for partition in partitions:
        first = _offset(topic, start, partition)
        if first is None:
            continue  # --from names other partitions
        limit = committed.get(partition, 0)
        last = limit if end is None else _offset(topic, end, partition)
        if last is None or last > limit:
            if last is not None:
                found.clipped.append(partition)
            last = limit
        if first >= last:
            continue
        low, _ = topic.watermarks(partition)
        if first < low:
            raise ReplayRefused(
                f"{topic.name} no longer holds partition {partition}'s offsets {first} to {low - 1} "
                f"(its earliest retained offset is {low}): the range cannot be replayed; replay from "
                f"{partition}:{low} on, or from a later time"
            )
        if start.time is not None and first == low > 0:
            found.retained_from[partition] = (low, start.time)
        found.spans[partition] = Span(first, last)
    if found.records() > MAX_RECORDS:
        raise ReplayRefused(
            f"the range holds {found.records()} records; a replay takes at most {MAX_RECORDS}: split it"
        )
    return found


def check_replayable(table: Table, name: str) -> None:
    """Refuse a table replay cannot rebuild (inline-schema JSON append tables only)."""
    properties = table.metadata.properties
    source_format = properties.get("floe.source.format", "json")
    if source_format != "json":
        raise ReplayRefused(
            f"{name} is a {source_format} table: replay decodes JSON values only (docs/replay.md)"
        )
    if properties.get(TABLE_MODE_PROPERTY, "append") != "append":
        raise ReplayRefused(
            f"{name} is an upsert table: its rows are each key's latest record, not a range's rows, so a "
            "range cannot be replaced on its own; replay supports append tables (docs/replay.md)"
        )
    names = {f.name for f in table.schema().fields}
    if CDC_COLUMN in names or KEY_COLUMN in names:
        raise ReplayRefused(
            f"{name} is a Debezium or record-keyed table: replay supports plain append tables"
        )
    if KAFKA_COLUMN not in names:
        raise ReplayRefused(f"{name} has no {KAFKA_COLUMN} column: it is not a table floe ingests")
    if not readable(table.schema()):
        raise ReplayRefused(f"{name} has a column type (UUID, fixed) the replay decoder does not read")


def range_filter(spans: Mapping[int, Span], partition: str, offset: str) -> BooleanExpression:
    """The rows of `spans`, by the columns naming a row's partition and offset."""
    expression: BooleanExpression = AlwaysFalse()
    for p, span in sorted(spans.items()):
        within = And(
            _predicate(EqualTo, partition, p),
            And(_predicate(GreaterThanOrEqual, offset, span.start), _predicate(LessThan, offset, span.end)),
        )
        expression = Or(expression, within)
    return expression


def check_time_retained(main: Table, dlq: Table, range_: Range, topic: str) -> None:
    """Refuse when a --from time resolved to the earliest retained offset of a partition while the
    tables hold records of that partition before it from that time on: retention removed part of the
    time range."""
    for partition, (low, time) in sorted(range_.retained_from.items()):
        since = time.isoformat()
        for table, names in (
            (main, (f"{KAFKA_COLUMN}.partition", f"{KAFKA_COLUMN}.offset", f"{KAFKA_COLUMN}.timestamp")),
            (dlq, ("partition", "offset", "timestamp")),
        ):
            lost = And(
                _predicate(EqualTo, names[0], partition),
                And(_predicate(LessThan, names[1], low), _predicate(GreaterThanOrEqual, names[2], since)),
            )
            if table.current_snapshot() is not None and len(table.scan(row_filter=lost, limit=1).to_arrow()):
                raise ReplayRefused(
                    f"{topic} no longer holds partition {partition}'s records before offset {low}, and "
                    f"some of them are from {since} on: the range cannot be replayed; replay from "
                    f"{partition}:{low} on, or from a later time"
                )


def _predicate(kind: Any, term: str, literal: int | str) -> BooleanExpression:
    # pyiceberg's predicates take (term, literal); its pydantic models' signatures confuse mypy.
    made: BooleanExpression = kind(term, literal)
    return made


def _data_key(row: Mapping[str, Any]) -> tuple[int, int]:
    kafka = row[KAFKA_COLUMN]
    return int(kafka["partition"]), int(kafka["offset"])


def _dlq_key(row: Mapping[str, Any]) -> tuple[int, int]:
    return int(row["partition"]), int(row["offset"])


def _within(key: tuple[int, int], spans: Mapping[int, Span]) -> bool:
    span = spans.get(key[0])
    return span is not None and span.start <= key[1] < span.end


# -- the plan (pure) ---------------------------------------------------------------------------------


@dataclass
class Side:
    """One table's part of the commit: the files it replaces, their rows that stay, the range's rows."""

    removed: list[DataFile] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)
    old: int = 0  # rows of the range removed
    new: list[dict[str, Any]] = field(default_factory=list)

    def changes(self) -> bool:
        return bool(self.removed or self.new)


@dataclass
class Plan:
    data: Side
    dlq: Side
    missing: list[tuple[int, int]]  # rows of the range whose record the topic did not give


def plan(
    data_files: Sequence[tuple[DataFile, list[dict[str, Any]]]],
    dlq_files: Sequence[tuple[DataFile, list[dict[str, Any]]]],
    records: Mapping[tuple[int, int], Mapping[str, Any]],
    schema: Schema,
    spans: Mapping[int, Span],
    failed_at: dt.datetime,
) -> Plan:
    """The commit over the files holding a row of `spans` (each with all its rows): their other rows
    kept, the range's rows replaced by `records` decoded with `schema`."""
    sides = Side(), Side()
    held: set[tuple[int, int]] = set()
    for side, files, key in ((sides[0], data_files, _data_key), (sides[1], dlq_files, _dlq_key)):
        for data_file, rows in files:
            inside = [_within(key(r), spans) for r in rows]
            if not any(inside):
                continue
            side.removed.append(data_file)
            for row, is_inside in zip(rows, inside, strict=True):
                if is_inside:
                    side.old += 1
                    held.add(key(row))
                else:
                    side.kept.append(row)
    for (partition, offset), decision in sorted(decide(records.values(), schema).items()):
        record = records[(partition, offset)]
        if decision.row is not None:
            sides[0].new.append(decision.row)
        else:
            sides[1].new.append({**record, "error": decision.reason, "failed_at": failed_at})
    return Plan(sides[0], sides[1], sorted(held - set(records)))


# -- the replay --------------------------------------------------------------------------------------


@dataclass
class ReplayResult:
    """What a replay did (or, with dry_run, would do)."""

    table: str
    spans: dict[int, Span] = field(default_factory=dict)
    clipped: list[int] = field(default_factory=list)
    records: int = 0  # read from the topic
    rows: int = 0  # of those, rows of the data table
    dead_letters: int = 0  # of those, dead letters
    rows_replaced: int = 0  # the range's old rows removed from the data table
    dead_letters_replaced: int = 0  # and from the dead-letter table
    files_rewritten: int = 0
    commits: int = 0
    attempts: int = 0
    snapshots: list[int] = field(default_factory=list)
    dry_run: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "dry-run": self.dry_run,
            "range": {str(p): [s.start, s.end] for p, s in sorted(self.spans.items())},
            "clipped-to-committed": self.clipped,
            "records": self.records,
            "rows": self.rows,
            "dead-letters": self.dead_letters,
            "rows-replaced": self.rows_replaced,
            "dead-letters-replaced": self.dead_letters_replaced,
            "files-rewritten": self.files_rewritten,
            "commits": self.commits,
            "attempts": self.attempts,
            "snapshots": self.snapshots,
        }


def _range_files(
    table: Table, row_filter: BooleanExpression, known: set[str]
) -> tuple[list[tuple[DataFile, list[dict[str, Any]]]], set[str]]:
    """The live files holding a row of the range (with all their rows), and the paths of the files
    looked at. Files in `known` were found to hold none before and are not read again."""
    tasks = [t for t in live_files(table, row_filter) if t.file.file_path not in known]
    holding = [t for (_, rows), t in zip(file_rows(table, tasks, row_filter), tasks, strict=True) if rows]
    return file_rows(table, holding), {t.file.file_path for t in tasks}


def replay(
    load: Callable[[Identifier], Table],
    send: Send,
    main_id: Identifier,
    dlq_id: Identifier,
    topic: Topic,
    range_: Range,
    *,
    dry_run: bool = False,
) -> ReplayResult:
    """Replay `range_` of `topic` into `main_id` and `dlq_id`; see the module doc."""
    name = ".".join(main_id)
    result = ReplayResult(name, dict(range_.spans), list(range_.clipped), dry_run=dry_run)
    check_replayable(load(main_id), name)
    if not range_.spans:
        return result
    check_time_retained(load(main_id), load(dlq_id), range_, topic.name)
    records = topic.read(range_.spans)
    data_filter = range_filter(range_.spans, f"{KAFKA_COLUMN}.partition", f"{KAFKA_COLUMN}.offset")
    dlq_filter = range_filter(range_.spans, "partition", "offset")
    refusals = 0
    while True:
        main, dlq = load(main_id), load(dlq_id)
        check_replayable(main, name)
        data_files, data_seen = _range_files(main, data_filter, set())
        dlq_files, dlq_seen = _range_files(dlq, dlq_filter, set())
        planned = plan(data_files, dlq_files, records, main.schema(), range_.spans, dt.datetime.now(dt.UTC))
        if planned.missing:
            p, o = planned.missing[0]
            raise ReplayRefused(
                f"the table holds {len(planned.missing)} record(s) of the range the topic no longer has "
                f"(partition {p} offset {o}: compacted or deleted): replaying would lose them; "
                "nothing changed"
            )
        result.records, result.rows, result.dead_letters = (
            len(records),
            len(planned.data.new),
            len(planned.dlq.new),
        )
        result.rows_replaced, result.dead_letters_replaced = planned.data.old, planned.dlq.old
        result.files_rewritten = len(planned.data.removed) + len(planned.dlq.removed)
        if dry_run or not (planned.data.changes() or planned.dlq.changes()):
            return result
        landed, refused = _commit(
            load, send, (main, dlq), (main_id, dlq_id), planned, range_, (data_seen, dlq_seen)
        )
        result.attempts += refused + (1 if landed else 0)
        if landed is not None:
            result.commits += 1
            result.snapshots = landed
            return result
        refusals += refused
        if refusals >= MAX_ATTEMPTS:
            raise ReplayFailed(
                f"{name}: the replay commit was refused {refusals} times (the tables kept moving); "
                "nothing of it landed: run it again"
            )


def _commit(
    load: Callable[[Identifier], Table],
    send: Send,
    tables: tuple[Table, Table],
    identifiers: tuple[Identifier, Identifier],
    planned: Plan,
    range_: Range,
    seen: tuple[set[str], set[str]],
) -> tuple[list[int] | None, int]:
    """Write the plan's files and commit them; rebuilt on the tables' newer snapshots while the
    replaced files are live and no new file holds a row of the range. (snapshots or None, refusals)."""
    counts = {
        RECORDS: str(len(planned.data.new) + len(planned.dlq.new)),
        ROWS: str(len(planned.data.new)),
        DEAD_LETTERS: str(len(planned.dlq.new)),
        RANGE: json.dumps({str(p): [s.start, s.end] for p, s in sorted(range_.spans.items())}),
    }
    sides = (planned.data, planned.dlq)
    written = [write_rows(t, s.kept + s.new) for t, s in zip(tables, sides, strict=True)]
    paths = [f.file_path for files in written for f in files]
    schema_id = tables[0].metadata.current_schema_id
    filters = (
        range_filter(range_.spans, f"{KAFKA_COLUMN}.partition", f"{KAFKA_COLUMN}.offset"),
        range_filter(range_.spans, "partition", "offset"),
    )
    known = (set(seen[0]), set(seen[1]))
    removed = [list(s.removed) for s in sides]
    refusals, unknown = 0, False
    current = list(tables)
    while refusals < MAX_ATTEMPTS:
        changes = [
            table_change(t, i, partial(replace_files, counts=counts, gone=gone, added=files))
            for t, i, gone, files, side in zip(current, identifiers, removed, written, sides, strict=True)
            if side.changes()
        ]
        ids = snapshot_ids(changes)
        first = identifiers[0] if planned.data.changes() else identifiers[1]
        crash_point(CRASH_BEFORE_COMMIT)
        outcome = send(changes)
        if outcome not in ("committed", "refused"):
            unknown = True  # the answer was lost: it landed when the table holds its snapshot
            try:
                found = load(first)
            except Exception as exc:
                raise ReplayFailed(
                    f"{'.'.join(identifiers[0])}: floe's answer to the replay commit was lost ({outcome}) "
                    "and "
                    f"floe cannot be asked whether it landed ({type(exc).__name__}: {exc}); run the replay "
                    "again once floe answers: it replaces the range's rows again"
                ) from exc
            outcome = "committed" if found.metadata.snapshot_by_id(ids[0]) is not None else "refused"
        if outcome == "committed":
            crash_point(CRASH_AFTER_COMMIT)
            return ids, refusals
        refusals += 1
        current = [load(i) for i in identifiers]
        if current[0].metadata.current_schema_id != schema_id:
            break  # decoded with another schema now: plan again
        rebased = _rebase(current, filters, known, removed)
        if rebased is None:
            break  # a replaced file is gone (compacted) or a new file holds a row of the range
        removed = rebased
    if not unknown:
        remove_files(tables[0], paths)
    return None, refusals


def _rebase(
    tables: list[Table],
    filters: tuple[BooleanExpression, BooleanExpression],
    known: tuple[set[str], set[str]],
    removed: list[list[DataFile]],
) -> list[list[DataFile]] | None:
    """The replaced files as the tables have them now, or None when the plan no longer holds."""
    rebased = []
    for table, row_filter, seen, gone in zip(tables, filters, known, removed, strict=True):
        live = {t.file.file_path: t.file for t in live_files(table)}
        if any(f.file_path not in live for f in gone):
            return None
        holding, looked = _range_files(table, row_filter, seen | {f.file_path for f in gone})
        if holding:
            return None
        seen |= looked
        rebased.append([live[f.file_path] for f in gone])
    return rebased
