"""Dead-letter redrive: a table's dead letters decoded again with its current schema, exactly once.

After a schema fix (`floe apply` widening a type, adding a field) the records that were dead letters
may now decode. `redrive` reads the dead-letter table, decodes each dead letter's value with the data
table's current schema (`ingest.shared.json_rows`, the decoder ingestion uses, with the same reasons),
and commits, in ONE multi-table transaction through floe's `/transactions/commit`:

- an append to the data table of the records that now decode, with the `_kafka` columns ingestion
  would have given them (partition, offset, timestamp, key, headers of the original record);
- an overwrite of the dead-letter table that removes those dead letters (the data files holding them
  are replaced by one file of the rows they keep) and gives the ones that still fail their new reason.

Exactly once: a record moves from the dead-letter table to the data table in one atomic commit whose
requirements pin both tables' current snapshots, and the removed files must still be live in the
dead-letter table it builds on. A redrive killed before the commit leaves nothing (its written files are
orphans for maintenance); one killed after it finds the moved records gone from the dead-letter table.
A commit refused because ingestion (or maintenance) moved a table meanwhile is built again on the new
snapshots, re-using the written data files while the dead-letter files it replaces are still live.

Neither snapshot carries Kafka offsets (`floe.kafka.*`), so the catalog's offsets fence and the tables'
stored offsets are untouched: ingestion goes on from where it was. Both carry the counts
(`floe.redrive.*`), which the catalog's audit entry of the transaction repeats.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.typedef import Identifier

from catalog.pipelines.columns import CDC_COLUMN, KAFKA_COLUMN, KEY_COLUMN
from catalog.pipelines.iceberg import TABLE_MODE_PROPERTY
from ingest.shared.json_rows import JsonRows, readable
from ingest.table_rewrite import FAULT_ENV as FAULT_ENV  # the crash points' variable, re-exported
from ingest.table_rewrite import (
    Send,
    append_files,
    crash_point,
    file_rows,
    live_files,
    live_paths,
    remove_files,
    replace_files,
    snapshot_ids,
    table_change,
    write_rows,
)

# The snapshot-summary properties of a redrive commit (both tables' snapshots carry them; the catalog's
# audit entry repeats them: catalog/redrive_audit.py, which ingest does not import).
REDRIVEN = "floe.redrive.redriven"
STILL_FAILING = "floe.redrive.still-failing"
# A redrive commits at most this many redriven records at once; the rest in further commits.
MAX_RECORDS_PER_COMMIT = 100_000
# A commit refused this many times in a row (the tables moved each time) gives up.
MAX_ATTEMPTS = 20
# Test-only crash points (FAULT_ENV): the redrive kills itself (SIGKILL) with its files written, before
# sending the commit / after floe accepted it.
CRASH_BEFORE_COMMIT = "redrive-before-commit"
CRASH_AFTER_COMMIT = "redrive-after-commit"


class RedriveRefused(Exception):
    """The table cannot be redriven (its kind, its state): the message says why and what to do."""


class RedriveFailed(Exception):
    """The redrive could not commit (refused too often, or floe's answer lost and not found after)."""


@dataclass
class RedriveResult:
    """What a redrive did (or, with dry_run, would do); counts over every commit it made."""

    table: str
    dead_letters: int = 0  # dead letters in the table (as the last round read it)
    examined: int = 0  # of those, the ones --since selected
    redriven: int = 0  # appended to the data table (removed from the dead-letter table)
    still_failing: int = 0  # examined, still not decodable: kept
    reasons_changed: int = 0  # of those, kept with a new reason
    duplicates: int = 0  # extra copies of a redriven record removed (never appended twice)
    commits: int = 0
    attempts: int = 0  # commits sent (refused ones included)
    snapshots: list[tuple[int, int]] = field(default_factory=list)  # (data, dead-letter) per commit
    reasons: Counter[str] = field(default_factory=Counter)  # still-failing reasons
    dry_run: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "dry-run": self.dry_run,
            "dead-letters": self.dead_letters,
            "examined": self.examined,
            "redriven": self.redriven,
            "still-failing": self.still_failing,
            "reasons-changed": self.reasons_changed,
            "duplicates-removed": self.duplicates,
            "commits": self.commits,
            "attempts": self.attempts,
            "snapshots": [{"data": d, "dead-letters": q} for d, q in self.snapshots],
            "still-failing-reasons": dict(self.reasons.most_common(10)),
        }


def check_redrivable(table: Table, name: str) -> None:
    """Refuse a table this redrive cannot decode for (inline-schema JSON append tables only)."""
    properties = table.metadata.properties
    source_format = properties.get("floe.source.format", "json")
    if source_format != "json":
        raise RedriveRefused(
            f"{name} is a {source_format} table: redrive decodes JSON values only (docs/dlq-redrive.md)"
        )
    if properties.get(TABLE_MODE_PROPERTY, "append") != "append":
        raise RedriveRefused(f"{name} is an upsert table: redrive appends, so it supports append tables only")
    schema = table.schema()
    names = {f.name for f in schema.fields}
    if CDC_COLUMN in names or KEY_COLUMN in names:
        raise RedriveRefused(
            f"{name} is a Debezium or record-keyed table: redrive supports plain append tables"
        )
    if KAFKA_COLUMN not in names:
        raise RedriveRefused(f"{name} has no {KAFKA_COLUMN} column: it is not a table floe ingests")
    if not readable(schema):
        raise RedriveRefused(f"{name} has a column type (UUID, fixed) the redrive decoder does not read")


# -- the plan (pure) ---------------------------------------------------------------------------------


@dataclass
class Decision:
    """What becomes of one dead letter (one Kafka record: its partition and offset)."""

    row: dict[str, Any] | None  # the data table's row when it now decodes
    reason: str | None  # else its (possibly new) reason


def decide(dead_letters: Iterable[Mapping[str, Any]], schema: Schema) -> dict[tuple[int, int], Decision]:
    """Each dead letter decoded again with `schema`, by (partition, offset): the first copy decides."""
    rows = JsonRows(schema)
    decided: dict[tuple[int, int], Decision] = {}
    for letter in dead_letters:
        key = (int(letter["partition"]), int(letter["offset"]))
        if key in decided:
            continue
        decoded = rows.decode(letter["value"])
        if decoded.row is None:
            decided[key] = Decision(None, decoded.error or "unknown")
            continue
        row = dict(decoded.row)
        row[KAFKA_COLUMN] = kafka_columns(letter)
        decided[key] = Decision(row, None)
    return decided


def kafka_columns(letter: Mapping[str, Any]) -> dict[str, Any]:
    """The `_kafka` struct ingestion gives a record, from its dead letter (the same record's fields)."""
    return {
        "partition": letter["partition"],
        "offset": letter["offset"],
        "timestamp": letter.get("timestamp"),
        "key": letter.get("key"),
        "headers": letter.get("headers"),
    }


def selected(letter: Mapping[str, Any], since: dt.datetime | None) -> bool:
    """Whether `--since` selects a dead letter: its Kafka record time at or after `since`."""
    if since is None:
        return True
    timestamp = letter.get("timestamp")
    return timestamp is not None and timestamp >= since


@dataclass
class Round:
    """One commit's work, computed from both tables as read: which dead-letter files it replaces."""

    removed: list[DataFile]  # dead-letter files holding a redriven or re-reasoned record
    kept: list[dict[str, Any]]  # their rows that stay (reasons updated)
    rows: list[dict[str, Any]]  # the data table's new rows
    changed: int  # dead letters kept with a new reason
    duplicates: int  # extra copies of redriven records removed
    more: bool  # the commit cap was reached: another round follows
    reasons_changing: int = 0  # selected dead letters whose reason changes, in every file (dry run)


def _key(letter: Mapping[str, Any]) -> tuple[int, int]:
    return int(letter["partition"]), int(letter["offset"])


def plan_round(
    files: Sequence[tuple[DataFile, list[dict[str, Any]]]],
    schema: Schema,
    since: dt.datetime | None,
    result: RedriveResult,
    cap: int = MAX_RECORDS_PER_COMMIT,
) -> Round:
    """The next commit over the dead-letter table's `files` (each with its rows): decide every selected
    dead letter (filling `result`'s counts of the table as read), then take the files holding a change
    until `cap` redriven records, and with them every other file holding a copy of a record they
    redrive (so no copy is left behind to be redriven again by a later round)."""
    result.dead_letters = sum(len(rows) for _, rows in files)
    decided = decide((x for _, rows in files for x in rows if selected(x, since)), schema)
    result.examined = len(decided)
    result.still_failing = sum(1 for d in decided.values() if d.row is None)
    result.reasons = Counter(d.reason for d in decided.values() if d.reason is not None)

    def decision(letter: Mapping[str, Any]) -> Decision | None:
        return decided.get(_key(letter)) if selected(letter, since) else None

    def changes(letter: Mapping[str, Any]) -> bool:
        found = decision(letter)
        return found is not None and (found.row is not None or found.reason != letter["error"])

    reasons_changing = sum(
        1 for _, rows in files for x in rows if changes(x) and decided[_key(x)].row is None
    )
    holding: dict[tuple[int, int], list[int]] = {}
    for index, (_, letters) in enumerate(files):
        for letter in letters:
            holding.setdefault(_key(letter), []).append(index)
    taken: list[int] = []
    seen: set[int] = set()
    moving = 0
    more = False
    for index, (_, letters) in enumerate(files):
        if index in seen or not any(changes(x) for x in letters):
            continue
        if moving >= cap:
            more = True
            break
        pending = [index]
        while pending:  # the file, and every file holding a copy of a record it redrives
            current = pending.pop()
            if current in seen:
                continue
            seen.add(current)
            taken.append(current)
            for letter in files[current][1]:
                found = decision(letter)
                if found is not None and found.row is not None:
                    moving += 1
                    pending += [i for i in holding[_key(letter)] if i not in seen]
    plan = Round([], [], [], 0, 0, more, reasons_changing)
    moved: set[tuple[int, int]] = set()
    for index in sorted(taken):
        data_file, letters = files[index]
        plan.removed.append(data_file)
        for letter in letters:
            found = decision(letter)
            if found is None:
                plan.kept.append(dict(letter))
            elif found.row is not None:
                if _key(letter) in moved:
                    plan.duplicates += 1
                    continue
                moved.add(_key(letter))
                plan.rows.append(found.row)
            elif found.reason != letter["error"]:
                plan.changed += 1
                plan.kept.append({**letter, "error": found.reason})
            else:
                plan.kept.append(dict(letter))
    return plan


# -- the commit --------------------------------------------------------------------------------------


def dead_letter_files(dlq: Table) -> list[tuple[DataFile, list[dict[str, Any]]]]:
    """The dead-letter table's live data files with their rows (deletes applied)."""
    return file_rows(dlq, live_files(dlq))


def redrive(
    load: Callable[[Identifier], Table],
    send: Send,
    main_id: Identifier,
    dlq_id: Identifier,
    *,
    since: dt.datetime | None = None,
    dry_run: bool = False,
    cap: int = MAX_RECORDS_PER_COMMIT,
) -> RedriveResult:
    """Redrive the dead letters of `main_id` (held in `dlq_id`); see the module doc."""
    name = ".".join(main_id)
    result = RedriveResult(name, dry_run=dry_run)
    refusals = 0
    while True:
        main, dlq = load(main_id), load(dlq_id)
        check_redrivable(main, name)
        round_ = plan_round(dead_letter_files(dlq), main.schema(), since, result, cap)
        if dry_run:  # what a redrive would do now, over every selected dead letter
            result.redriven = result.examined - result.still_failing
            result.reasons_changed = round_.reasons_changing
            return result
        if not round_.removed:
            return result
        landed, refused = _commit_round(load, send, main, dlq, main_id, dlq_id, round_, result.still_failing)
        result.attempts += refused + (1 if landed else 0)
        refusals = refusals + refused if not landed else 0
        if landed is not None:
            result.redriven += len(round_.rows)
            result.reasons_changed += round_.changed
            result.duplicates += round_.duplicates
            result.commits += 1
            result.snapshots.append(landed)
            if not round_.more:
                return result
        elif refusals >= MAX_ATTEMPTS:
            raise RedriveFailed(
                f"{name}: the redrive commit was refused {refusals} times (the tables kept moving); "
                "nothing of it landed: run it again"
            )


def _commit_round(
    load: Callable[[Identifier], Table],
    send: Send,
    main: Table,
    dlq: Table,
    main_id: Identifier,
    dlq_id: Identifier,
    round_: Round,
    still_failing: int,
) -> tuple[tuple[int, int] | None, int]:
    """Write the round's files and commit them; retried on the tables' newer snapshots while the
    replaced dead-letter files are live. ((data snapshot, dead-letter snapshot) or None, refusals)."""
    counts = {
        REDRIVEN: str(len(round_.rows)),
        STILL_FAILING: str(still_failing),
    }
    main_files, kept_files = write_rows(main, round_.rows), write_rows(dlq, round_.kept)
    written = [f.file_path for f in (*main_files, *kept_files)]
    schema_id = main.metadata.current_schema_id
    refusals = 0
    unknown = False
    removed = list(round_.removed)
    while refusals < MAX_ATTEMPTS:
        changes = [
            table_change(main, main_id, partial(append_files, counts=counts, files=main_files)),
            table_change(dlq, dlq_id, partial(replace_files, counts=counts, gone=removed, added=kept_files)),
        ]
        data_snapshot, dlq_snapshot = snapshot_ids(changes)
        crash_point(CRASH_BEFORE_COMMIT)
        outcome = send(changes)
        if outcome != "committed" and outcome != "refused":
            # The answer was lost: the commit landed when the data table holds its snapshot. (It may
            # yet land, still in flight: its files are then never removed here.)
            unknown = True
            try:
                main = load(main_id)
            except Exception as exc:
                raise RedriveFailed(
                    f"{'.'.join(main_id)}: floe's answer to the redrive commit was lost ({outcome}) and "
                    f"floe cannot be asked whether it landed ({type(exc).__name__}: {exc}); run the "
                    "redrive again once floe answers: it finds what landed and redrives nothing twice"
                ) from exc
            outcome = "committed" if main.metadata.snapshot_by_id(data_snapshot) is not None else "refused"
        if outcome == "committed":
            crash_point(CRASH_AFTER_COMMIT)
            return (data_snapshot, dlq_snapshot), refusals
        refusals += 1
        main, dlq = load(main_id), load(dlq_id)
        live = live_paths(dlq)
        if main.metadata.current_schema_id != schema_id or any(f.file_path not in live for f in removed):
            break  # the schema changed, or a replaced file is gone (compacted, redriven): plan again
        removed = [live[f.file_path] for f in removed]
    if not unknown:
        remove_files(main, written)
    return None, refusals
