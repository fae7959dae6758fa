"""What the commands that rewrite ingested rows share (`floe dlq redrive`, `floe replay`).

Both decode records again with the table's current schema, write the rows with the table's own
writer, and commit changes to a table and its dead-letter table as ONE multi-table transaction through
floe's `/transactions/commit`, each change pinned to the snapshot and uuid it was read from: the
transaction's `table-changes` entries (`table_change`), its snapshots (`snapshot_ids`), the append and
the copy-on-write replace of files, the tables' live files with their rows, and the test-only crash
points. Neither command's snapshots carry Kafka offsets (`floe.kafka.*`), so floe's offsets fence and
the stored offsets are untouched.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest, FileScanTask, Table, TableIdentifier
from pyiceberg.table.update import AssertTableUUID
from pyiceberg.typedef import Identifier

from ingest.shared.pyiceberg_write import DataFileWriter

# Test-only crash points, as the catalog's (`FLOE_TEST_FAULT`, catalog/faults.py): the command kills
# itself (SIGKILL) with its files written, before sending the commit / after floe accepted it.
FAULT_ENV = "FLOE_TEST_FAULT"

# 'committed', 'refused' (409: a requirement failed, nothing landed) or why the outcome is unknown.
Send = Callable[[list[dict[str, Any]]], str]


def crash_point(point: str) -> None:
    if os.environ.get(FAULT_ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)


def table_change(table: Table, identifier: Identifier, build: Callable[[Any], None]) -> dict[str, Any]:
    """A `table-changes` entry: the snapshot `build` stages on a transaction of `table`, with the
    requirements pyiceberg gives it (the table's uuid, its main branch where it was read)."""
    transaction = table.transaction()
    build(transaction)
    requirements = (*transaction._requirements, AssertTableUUID(uuid=table.metadata.table_uuid))
    request = CommitTableRequest(
        identifier=TableIdentifier(namespace=list(identifier[:-1]), name=identifier[-1]),
        requirements=requirements,
        updates=transaction._updates,
    )
    changed: dict[str, Any] = json.loads(request.model_dump_json())
    return changed


def snapshot_ids(changes: list[dict[str, Any]]) -> list[int]:
    return [
        int(update["snapshot"]["snapshot-id"])
        for change in changes
        for update in change["updates"]
        if update.get("action") == "add-snapshot"
    ]


def append_files(transaction: Any, counts: dict[str, str], files: list[DataFile]) -> None:
    with transaction.update_snapshot(snapshot_properties=counts).fast_append() as snapshot:
        for data_file in files:
            snapshot.append_data_file(data_file)


def replace_files(
    transaction: Any, counts: dict[str, str], gone: list[DataFile], added: list[DataFile]
) -> None:
    """Copy-on-write: `gone` removed and `added` (their kept rows, new rows) added in one snapshot."""
    with transaction.update_snapshot(snapshot_properties=counts).overwrite() as snapshot:
        for data_file in gone:
            snapshot.delete_data_file(data_file)
        for data_file in added:
            snapshot.append_data_file(data_file)


def live_files(table: Table, row_filter: BooleanExpression | None = None) -> list[FileScanTask]:
    """The table's live data files (those `row_filter` may match), as scan tasks."""
    if table.current_snapshot() is None:
        return []
    return list(table.scan(row_filter=row_filter or AlwaysTrue()).plan_files())


def live_paths(table: Table) -> dict[str, DataFile]:
    return {task.file.file_path: task.file for task in live_files(table)}


def file_rows(
    table: Table, tasks: Iterable[FileScanTask], row_filter: BooleanExpression | None = None
) -> list[tuple[DataFile, list[dict[str, Any]]]]:
    """Each file with its rows (deletes applied; only those `row_filter` matches when given)."""
    reader = ArrowScan(table.metadata, table.io, table.schema(), row_filter or AlwaysTrue())
    return [(task.file, reader.to_table([task]).to_pylist()) for task in tasks]


def write_rows(table: Table, rows: list[dict[str, Any]]) -> list[DataFile]:
    """`rows` written as data files of `table` (none for no rows)."""
    return DataFileWriter(table.metadata, table.io).write(arrow_rows(table.schema(), rows)) if rows else []


def arrow_rows(schema: Schema, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema_to_pyarrow(schema, include_field_ids=True))


def remove_files(table: Table, paths: Iterable[str]) -> None:
    """Remove files of a commit that did not land (best effort: orphan removal gets any left)."""
    for path in paths:
        try:
            table.io.delete(path)
        except Exception:  # a file left behind is maintenance's orphan removal's
            continue
