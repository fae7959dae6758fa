"""The pyiceberg internals maintenance uses to rewrite a table without Spark, in one place.

pyiceberg 0.12 has no public `RewriteFiles`: a `replace` snapshot (inputs removed, outputs added,
validated as Iceberg validates a rewrite, rebuilt on the fresh head after a race) is its
`_OverwriteFiles` producer with the operation, the concurrency check and the manifests changed
(`_Replace`); a commit of hand-made updates and requirements (one `remove-snapshots` asserting only the
table's uuid) is `Table._do_commit`; data files in the table's layout are `_dataframe_to_data_files`,
as `Table.append` writes them; `FloeRestCatalog` leaves the deletion of the metadata files a commit
drops from the log to floe (pyiceberg's `Catalog._delete_old_metadata`). pyiceberg is pinned in
pyproject.toml; tests/unit/test_pyiceberg_contract.py and tests/e2e/test_maintenance_inprocess.py
fail on an upgrade that changes what is used here.
"""

from __future__ import annotations

import itertools
import uuid

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.manifest import (
    DataFile,
    ManifestContent,
    ManifestFile,
)
from pyiceberg.table import Table, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, Summary
from pyiceberg.table.update import TableRequirement, TableUpdate
from pyiceberg.table.update.snapshot import _OverwriteFiles
from pyiceberg.typedef import EMPTY_DICT

from runtime.pyiceberg_avro import reuse_avro_readers
from runtime.pyiceberg_nulls import keep_null_lists

# Compaction reads and writes through pyiceberg's projection, which lost null lists of structs.
keep_null_lists()
# Each commit reads the parent's manifest list (and maintenance every manifest): one schema conversion.
reuse_avro_readers()


class FloeRestCatalog(RestCatalog):
    """pyiceberg's REST catalog, without the client deleting the metadata files a commit drops.

    With `write.metadata.delete-after-commit.enabled` (maintenance sets it on every table), pyiceberg
    deletes after each commit every file of the log the table had when it was loaded that the new log
    no longer names. floe's catalog deletes those itself when the commit lands (as Iceberg's Java REST
    client expects), and a maintenance visit commits on a table loaded before ingestion's commits of
    the meantime, so pyiceberg's deletions all failed: up to 20 missing files and a warning each, per
    commit (242 warnings in a 1,000-table run's first twelve minutes)."""

    @staticmethod
    def _delete_old_metadata(io: FileIO, base: TableMetadata, metadata: TableMetadata) -> None:
        return None


class _Replace(_OverwriteFiles):
    """A `replace` snapshot: removes `delete_data_file`s, adds `append_data_file`s, and optionally
    merges the default spec's data manifests into one. Validated as Iceberg validates `RewriteFiles`."""

    merge_manifests: bool = False

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        # pyiceberg's totals are computed for overwrite; the operation is what readers act on.
        operation, self._operation = self._operation, Operation.OVERWRITE
        try:
            summary = super()._summary(snapshot_properties)
        finally:
            self._operation = operation
        return Summary(Operation.REPLACE, **summary.additional_properties)

    def _validate_concurrency(self) -> None:
        """Only what concurrent commits can break for a rewrite: an input removed by someone else, or a
        delete file added for one. Appends (ingestion) never conflict."""
        from pyiceberg.table.update.validate import (
            _validate_data_files_exist,
            _validate_no_new_deletes_for_data_files,
        )

        window = self._commit_window
        if window is None or window.is_empty() or window.head is None or not self._deleted_data_files:
            return
        table = self._transaction._table
        _validate_data_files_exist(table, window.head, self._deleted_data_files, window.base)
        _validate_no_new_deletes_for_data_files(
            table, window.head, None, self._deleted_data_files, window.base
        )

    def _existing_manifests(self) -> list[ManifestFile]:
        # As Iceberg's rewrite: a manifest of an earlier snapshot with no live file (what an earlier
        # rewrite deleted, carried by a writer that keeps every manifest) is not carried; merging two
        # of those would write a manifest of no entry, which pyiceberg refuses.
        kept = [m for m in super()._existing_manifests() if m.has_added_files() or m.has_existing_files()]
        if not self.merge_manifests:
            return kept
        metadata = self._transaction.table_metadata
        default_spec = metadata.default_spec_id
        mergeable = [
            m for m in kept if m.content == ManifestContent.DATA and m.partition_spec_id == default_spec
        ]
        if len(mergeable) < 2:
            return kept
        entries = [e for m in mergeable for e in m.fetch_manifest_entry(self._io, discard_deleted=True)]
        if not entries:
            return [m for m in kept if m not in mergeable]
        with self.new_manifest_writer(self.spec(default_spec)) as writer:
            for entry in entries:
                writer.existing(entry)
        merged = writer.to_manifest_file()
        return [merged, *(m for m in kept if m not in mergeable)]


class _Transaction(Transaction):
    """pyiceberg's transaction, without a deep copy of the table's metadata on every look at it while
    nothing is staged (a snapshot producer looks dozens of times; each copy holds every snapshot)."""

    @property
    def table_metadata(self) -> TableMetadata:
        if not self._updates:
            return self._table.metadata
        return super().table_metadata


def replace_files(
    table: Table, removed: list[DataFile], added: list[DataFile], *, merge_manifests: bool
) -> None:
    """Commit a `replace` snapshot of `table` (as just loaded) removing `removed` and adding `added`
    (optionally merging the default spec's data manifests into one), rebuilt on the new head when
    another writer commits first and a rewrite is still valid there."""
    transaction = _Transaction(table)
    producer = _Replace(operation=Operation.REPLACE, transaction=transaction, io=table.io)
    producer.merge_manifests = merge_manifests
    for data_file in removed:
        producer.delete_data_file(data_file)
    for data_file in added:
        producer.append_data_file(data_file)
    producer.commit()
    transaction.commit_transaction()


def commit_updates(
    table: Table, updates: tuple[TableUpdate, ...], requirements: tuple[TableRequirement, ...]
) -> None:
    """Commit `updates` under `requirements` as they are (no builder, no metadata copy)."""
    table._do_commit(updates=updates, requirements=requirements)


def write_data_files(
    metadata: TableMetadata,
    rows: pa.Table,
    io: FileIO,
    write_uuid: uuid.UUID,
    counter: itertools.count[int] | None = None,
) -> list[DataFile]:
    """`rows` as data files in the table's layout and writer settings (what `Table.append` writes)."""
    return list(_dataframe_to_data_files(metadata, rows, io, write_uuid, counter or itertools.count(0)))
