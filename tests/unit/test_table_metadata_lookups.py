"""catalog/table_metadata.py replaces pyiceberg's `TableMetadataCommonFields.snapshot_by_id` with a lookup
done in C. This fails on a pyiceberg upgrade that moves the method elsewhere (the replacement would no
longer be used) and checks the replacement answers as pyiceberg's own generator does."""

from __future__ import annotations

import inspect
import json

from pyiceberg.table.metadata import TableMetadataCommonFields, TableMetadataV1, TableMetadataV2

import catalog.table_metadata as floe_metadata
from catalog.commit import parse_table_metadata


def _pyiceberg_snapshot_by_id(metadata: object, snapshot_id: int) -> object:
    # pyiceberg 0.12's body, vendored from pyiceberg/table/metadata.py to compare against.
    snapshots = metadata.snapshots  # type: ignore[attr-defined]
    return next((s for s in snapshots if s.snapshot_id == snapshot_id), None)


def test_every_table_model_uses_floes_lookup() -> None:
    for model in (TableMetadataV1, TableMetadataV2, floe_metadata.TableMetadataV3):
        assert model.snapshot_by_id is floe_metadata._snapshot_by_id
        # Defined nowhere between the model and the common fields (or the patch would be shadowed).
        owner = next(c for c in inspect.getmro(model) if "snapshot_by_id" in vars(c))
        assert owner is TableMetadataCommonFields


def test_the_lookup_answers_as_pyicebergs() -> None:
    snapshots = [
        {
            "snapshot-id": snapshot_id,
            "sequence-number": sequence,
            "timestamp-ms": 1_700_000_000_000 + sequence,
            "manifest-list": f"file:///w/t/metadata/snap-{sequence}.avro",
            "summary": {"operation": "append", "note": f"copy {sequence}"},
            "schema-id": 0,
        }
        for sequence, snapshot_id in enumerate([7, 3, 9, 3, 11], start=1)
    ]
    metadata = parse_table_metadata(
        json.dumps(
            {
                "format-version": 2,
                "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
                "location": "file:///w/t",
                "last-sequence-number": 5,
                "last-updated-ms": 1_700_000_000_005,
                "last-column-id": 1,
                "current-schema-id": 0,
                "schemas": [
                    {
                        "type": "struct",
                        "schema-id": 0,
                        "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}],
                    }
                ],
                "default-spec-id": 0,
                "partition-specs": [{"spec-id": 0, "fields": []}],
                "last-partition-id": 999,
                "default-sort-order-id": 0,
                "sort-orders": [{"order-id": 0, "fields": []}],
                "snapshots": snapshots,
            }
        )
    )
    for snapshot_id in (7, 3, 9, 11, 12, -1):
        assert metadata.snapshot_by_id(snapshot_id) is _pyiceberg_snapshot_by_id(metadata, snapshot_id)
    first = metadata.snapshot_by_id(3)
    assert first is not None
    assert first.summary is not None
    assert first.summary["note"] == "copy 2"  # the first of two with one id
    assert metadata.snapshot_by_id(12) is None
