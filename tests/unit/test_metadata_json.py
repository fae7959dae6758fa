"""catalog/service/metadata_models.py's `MetadataJson`: a commit's metadata JSON with the snapshots'
JSON reused is byte for byte what pydantic writes, commit after commit."""

from __future__ import annotations

import uuid
from typing import Any

from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField

from catalog import commit as core
from catalog.service.metadata_models import MetadataJson

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))


def _append(base: TableMetadata, n: int) -> TableMetadata:
    snapshot_id = uuid.uuid4().int & ((1 << 63) - 1)
    updates: list[dict[str, Any]] = [
        {
            "action": "add-snapshot",
            "snapshot": {
                "snapshot-id": snapshot_id,
                "parent-snapshot-id": base.current_snapshot_id,
                "sequence-number": getattr(base, "last_sequence_number", 0) + 1,
                "timestamp-ms": 1_700_000_000_000 + n,
                "manifest-list": f"{base.location}/metadata/snap-{snapshot_id}.avro",
                "summary": {
                    "operation": "append",
                    "kafka.end-offsets": f'{{"0": {n}}}',
                    "note": 'a "quoted" ]',
                },
                "schema-id": 0,
            },
        },
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
    ]
    return core.commit_table(
        base, f"{base.location}/metadata/v{n}.json", (), core.parse_table_updates(updates)
    )


def _table(location: str, properties: dict[str, str]) -> TableMetadata:
    return new_table_metadata(SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location, properties)


def test_a_chain_of_commits_dumps_as_pydantic_does() -> None:
    dumps = MetadataJson()
    metadata = _table(
        "file:///warehouse/t",
        {
            "snapshots": "[]",
            'odd "snapshots":[] text': "x",
            '"snapshot-log":[]': '"metadata-log":[]',
        },
    )
    assert dumps.dump(metadata) == metadata.model_dump_json()  # no snapshot yet
    for n in range(1, 30):
        metadata = _append(metadata, n)
        before = dumps.serialized
        assert dumps.dump(metadata) == metadata.model_dump_json()
        if n > 2:  # each commit serializes only its new snapshot and log entries; the rest is reused
            assert dumps.serialized - before == 3
    assert dumps.items_of(metadata.location) == len(metadata.snapshots) + len(metadata.snapshot_log) + len(
        metadata.metadata_log
    )
    # A model parsed again (new snapshot objects, as after another process's commit): the same text.
    parsed = core.parse_table_metadata(metadata.model_dump_json())
    assert dumps.dump(parsed) == parsed.model_dump_json()
    # Snapshots expired (a maintenance pass): the ones left, in order.
    expired = metadata.model_copy(update={"snapshots": metadata.snapshots[10:]})
    assert dumps.dump(expired) == expired.model_dump_json()


def test_only_the_items_a_table_still_lists_are_kept() -> None:
    """Expired snapshots and trimmed log entries go with the table's next dump: what is kept is the
    table's current document, however many commits it has had."""
    dumps = MetadataJson()
    metadata = _table("file:///warehouse/t", {"write.metadata.previous-versions-max": "5"})
    for n in range(1, 20):
        metadata = _append(metadata, n)
        dumps.dump(metadata)
    assert len(metadata.metadata_log) == 5
    live = len(metadata.snapshots) + len(metadata.snapshot_log) + len(metadata.metadata_log)
    assert dumps.items_of(metadata.location) == live
    expired = metadata.model_copy(
        update={"snapshots": metadata.snapshots[10:], "snapshot_log": metadata.snapshot_log[10:]}
    )
    before = dumps.serialized
    assert dumps.dump(expired) == expired.model_dump_json()
    assert dumps.serialized == before  # every item left was kept
    assert dumps.items_of(metadata.location) == live - 20
    # The bytes kept are counted as items come and go (not summed again at every dump).
    lists = (expired.snapshots, expired.snapshot_log, expired.metadata_log)
    assert dumps.size_bytes == sum(len(item.model_dump_json()) for items in lists for item in items)


def test_tables_past_the_capacity_are_dropped_least_recently_dumped_first() -> None:
    def table(location: str) -> TableMetadata:
        metadata = new_table_metadata(SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location, {})
        for n in range(1, 4):
            metadata = _append(metadata, n)
        return metadata

    first, second, third = (table(f"file:///warehouse/t{i}") for i in range(3))
    probe = MetadataJson()
    probe.dump(first)
    one_table = probe.size_bytes
    dumps = MetadataJson(capacity_bytes=2 * one_table + one_table // 2)
    for metadata in (first, second, first, third):  # `second` is the least recently dumped
        assert dumps.dump(metadata) == metadata.model_dump_json()
    assert dumps.items_of(second.location) == 0
    assert dumps.items_of(first.location) > 0
    assert dumps.items_of(third.location) > 0
    assert dumps.size_bytes <= dumps.capacity_bytes


def test_items_dropped_anywhere_or_reordered_are_still_reused() -> None:
    """A commit's lists usually keep the previous items in order with a few dropped from the front
    (recognized as one run); any other change (a snapshot removed from the middle, many expired at
    once, a different order) looks each item up: the same text, and nothing kept serialized again."""
    dumps = MetadataJson()
    metadata = _table("file:///warehouse/t", {})
    for n in range(1, 40):
        metadata = _append(metadata, n)
        dumps.dump(metadata)
    snapshots = metadata.snapshots
    changes = [  # each keeps only items of the one before (only the last document's are kept)
        list(reversed(snapshots)),
        snapshots[:5] + snapshots[6:],  # one removed from the middle
        snapshots[30:],  # more expired at once than a run is looked for in
        snapshots[33:],  # a run again, after the changes above
    ]
    for kept in changes:
        changed = metadata.model_copy(update={"snapshots": kept})
        before = dumps.serialized
        assert dumps.dump(changed) == changed.model_dump_json()
        assert dumps.serialized == before
        metadata = changed
    # An item that is equal but not the same object (parsed again) is serialized, never assumed.
    parsed = core.parse_table_metadata(metadata.model_dump_json())
    before = dumps.serialized
    assert dumps.dump(parsed) == parsed.model_dump_json()
    assert dumps.serialized - before == (
        len(parsed.snapshots) + len(parsed.snapshot_log) + len(parsed.metadata_log)
    )
