"""Format v3 in the pure commit path: create, parse and serialize, row lineage, default values, nanosecond
timestamps, encryption keys, deletion-vector snapshots and the v2 → v3 upgrade (issue 11, deliverable 2).

Row lineage follows the spec ("A snapshot's first-row-id is assigned to the table's current next-row-id on
each commit attempt"; next-row-id "must always be higher than any assigned row ID") and Iceberg Java 1.11's
`TableMetadata.Builder.addSnapshot`, whose stale first-row-id is a `RetryableValidationException` that the
reference REST server answers 409 "Validation failed, please retry".
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from catalog import commit as core
from catalog.errors import BadRequest, CommitFailed
from catalog.table_metadata import TableMetadataV3

LOCATION = "file:///tmp/floe-v3-test/t"
SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "at", "type": "timestamptz_ns", "required": False},
        {
            "id": 3,
            "name": "level",
            "type": "int",
            "required": False,
            "initial-default": 7,
            "write-default": 8,
        },
        {
            "id": 4,
            "name": "tags",
            "type": {
                "type": "struct",
                "fields": [
                    {"id": 5, "name": "kind", "type": "string", "required": False, "write-default": "none"}
                ],
            },
            "required": False,
        },
    ],
}


def create(version: int = 3, schema: dict[str, Any] = SCHEMA) -> Any:
    return core.create_table_metadata(
        schema=schema,
        location=LOCATION,
        partition_spec=None,
        write_order=None,
        properties={"format-version": str(version)},
    )


def snapshot(snapshot_id: int, sequence_number: int, parent: int | None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "snapshot-id": snapshot_id,
        "sequence-number": sequence_number,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": f"{LOCATION}/metadata/snap-{snapshot_id}.avro",
        "summary": {"operation": "append"},
        "schema-id": 0,
        **extra,
    }
    if parent is not None:
        body["parent-snapshot-id"] = parent
    return body


def commit_snapshot(base: Any, snapshot_id: int, extra: dict[str, Any], ref: str = "main") -> Any:
    parent = base.refs[ref].snapshot_id if ref in base.refs else None
    updates = core.parse_table_updates(
        [
            {
                "action": "add-snapshot",
                "snapshot": snapshot(snapshot_id, base.last_sequence_number + 1, parent, **extra),
            },
            {"action": "set-snapshot-ref", "ref-name": ref, "type": "branch", "snapshot-id": snapshot_id},
        ]
    )
    return core.apply_table_updates(base, updates, f"{LOCATION}/metadata/{snapshot_id}.metadata.json")


def round_trip(metadata: Any) -> dict[str, Any]:
    """The metadata as the store keeps it, parsed again (as load and the next commit see it)."""
    text = metadata.model_dump_json()
    assert core.parse_table_metadata(text).model_dump_json() == text
    result: dict[str, Any] = json.loads(text)
    return result


def test_a_new_v3_table_is_written_with_next_row_id_zero_and_its_column_defaults() -> None:
    metadata = create()
    assert isinstance(metadata, TableMetadataV3)
    written = round_trip(metadata)
    assert written["format-version"] == 3
    assert written["next-row-id"] == 0
    fields = {f["name"]: f for f in written["schemas"][0]["fields"]}
    assert fields["at"]["type"] == "timestamptz_ns"
    assert (fields["level"]["initial-default"], fields["level"]["write-default"]) == (7, 8)
    assert fields["tags"]["type"]["fields"][0]["write-default"] == "none"
    assert "encryption-keys" not in written


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ({"id": 1, "name": "at", "type": "timestamp_ns", "required": False}, "timestamp_ns"),
        (
            {"id": 1, "name": "n", "type": "int", "required": False, "initial-default": 1},
            "Invalid initial default for n: non-null default \\(1\\) is not supported until v3",
        ),
    ],
)
def test_v3_columns_are_refused_on_v2_tables(field: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        create(2, {"type": "struct", "fields": [field]})


def test_row_lineage_assigns_disjoint_row_id_ranges() -> None:
    first = commit_snapshot(create(), 1, {"first-row-id": 0, "added-rows": 30})
    assert first.next_row_id == 30
    second = commit_snapshot(first, 2, {"first-row-id": 30, "added-rows": 12})
    assert second.next_row_id == 42
    # A commit on another branch takes row ids from the same table-wide counter.
    branch = commit_snapshot(second, 3, {"first-row-id": 42, "added-rows": 0}, ref="audit")
    assert branch.next_row_id == 42
    written = round_trip(branch)
    assert written["next-row-id"] == 42
    assert [(s["first-row-id"], s["added-rows"]) for s in written["snapshots"]] == [
        (0, 30),
        (30, 12),
        (42, 0),
    ]


def test_a_writer_that_skipped_row_ids_moves_next_row_id_past_them() -> None:
    metadata = commit_snapshot(create(), 1, {"first-row-id": 100, "added-rows": 5})
    assert metadata.next_row_id == 105


def test_a_stale_first_row_id_is_a_conflict_to_retry() -> None:
    base = commit_snapshot(create(), 1, {"first-row-id": 0, "added-rows": 30})
    with pytest.raises(
        CommitFailed, match=r"please retry: .*first-row-id is behind table next-row-id: 0 < 30"
    ):
        commit_snapshot(base, 2, {"first-row-id": 0, "added-rows": 3})


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"added-rows": 3}, "first-row-id is null"),
        ({"first-row-id": 0}, "added-rows is null"),
        ({"first-row-id": 0, "added-rows": -1}, "added-rows is negative"),
    ],
)
def test_v3_snapshots_need_their_row_lineage_fields(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        commit_snapshot(create(), 1, extra)


def test_deletion_vector_snapshots_are_stored_as_sent() -> None:
    base = commit_snapshot(create(), 1, {"first-row-id": 0, "added-rows": 10})
    summary = {"operation": "overwrite", "added-dvs": "1", "added-position-deletes": "3", "total-dvs": "1"}
    updates = core.parse_table_updates(
        [
            {
                "action": "add-snapshot",
                "snapshot": {
                    **snapshot(2, 2, 1, **{"first-row-id": 10, "added-rows": 0}),
                    "summary": summary,
                },
            },
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 2},
        ]
    )
    written = round_trip(core.apply_table_updates(base, updates, None))
    assert written["snapshots"][1]["summary"] == summary
    assert written["next-row-id"] == 10


def test_upgrade_from_v2_starts_row_lineage_and_keeps_old_snapshots() -> None:
    v2 = create(2, {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]})
    old = core.apply_table_updates(
        v2,
        core.parse_table_updates(
            [
                {"action": "add-snapshot", "snapshot": snapshot(1, 1, None)},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 1},
            ]
        ),
        None,
    )
    upgraded = core.apply_table_updates(
        old,
        core.parse_table_updates([{"action": "upgrade-format-version", "format-version": 3}]),
        f"{LOCATION}/metadata/00001-a.metadata.json",
    )
    written = round_trip(upgraded)
    assert (written["format-version"], written["next-row-id"]) == (3, 0)
    assert "first-row-id" not in written["snapshots"][0]
    assert [e["metadata-file"] for e in written["metadata-log"]] == [
        f"{LOCATION}/metadata/00001-a.metadata.json"
    ]
    after = commit_snapshot(upgraded, 2, {"first-row-id": 0, "added-rows": 4})
    assert after.next_row_id == 4
    # Columns with defaults are now allowed.
    schema = {
        "type": "struct",
        "schema-id": 1,
        "fields": [
            {"id": 1, "name": "id", "type": "long", "required": False},
            {
                "id": 2,
                "name": "n",
                "type": "long",
                "required": False,
                "initial-default": 5,
                "write-default": 5,
            },
        ],
    }
    evolved = core.apply_table_updates(
        after,
        core.parse_table_updates(
            [{"action": "add-schema", "schema": schema}, {"action": "set-current-schema", "schema-id": -1}]
        ),
        None,
    )
    assert round_trip(evolved)["schemas"][1]["fields"][1]["initial-default"] == 5


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (4, "Cannot upgrade table to unsupported format version: v4 \\(supported: v3\\)"),
        (2, "Cannot downgrade v3 table to v2"),
    ],
)
def test_unsupported_format_versions_are_refused(version: int, message: str) -> None:
    updates = core.parse_table_updates([{"action": "upgrade-format-version", "format-version": version}])
    with pytest.raises(BadRequest, match=message):
        core.apply_table_updates(create(), updates, None)


def test_a_v2_table_cannot_take_v3_columns_by_schema_evolution() -> None:
    v2 = create(2, {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]})
    schema = {
        "type": "struct",
        "schema-id": 1,
        "fields": [
            {"id": 1, "name": "id", "type": "long", "required": False},
            {"id": 2, "name": "at", "type": "timestamp_ns", "required": False},
        ],
    }
    updates = core.parse_table_updates([{"action": "add-schema", "schema": schema}])
    with pytest.raises(BadRequest, match="Invalid type for at: timestamp_ns is not supported until v3"):
        core.apply_table_updates(v2, updates, None)


def test_create_transaction_at_v3_as_the_java_client_sends_it() -> None:
    updates = core.parse_table_updates(
        [
            {"action": "assign-uuid", "uuid": str(uuid.uuid4())},
            {"action": "upgrade-format-version", "format-version": 3},
            {"action": "add-schema", "schema": SCHEMA, "last-column-id": 5},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {
                "action": "add-snapshot",
                "snapshot": snapshot(1, 1, None, **{"first-row-id": 0, "added-rows": 2}),
            },
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 1},
        ]
    )
    created = core.commit_table(
        None, None, core.parse_requirements([{"type": "assert-create"}]), updates, LOCATION
    )
    written = round_trip(created)
    assert (written["format-version"], written["next-row-id"], written["location"]) == (3, 2, LOCATION)
    assert written["schemas"][0]["fields"][2]["initial-default"] == 7


def test_encryption_keys_are_added_removed_and_named_by_snapshots() -> None:
    key = {
        "key-id": "k1",
        "encrypted-key-metadata": "aWNlYmVyZwo=",
        "encrypted-by-id": "kek",
        "properties": {"a": "b"},
    }
    add = core.parse_table_updates([{"action": "add-encryption-key", "encryption-key": key}])
    with_key = core.apply_table_updates(create(), add, None)
    assert round_trip(core.apply_table_updates(with_key, add, None)) == round_trip(with_key), "no-op"
    with_snapshot = commit_snapshot(with_key, 1, {"first-row-id": 0, "added-rows": 1, "key-id": "k1"})
    written = round_trip(with_snapshot)
    assert written["encryption-keys"] == [key]
    assert written["snapshots"][0]["key-id"] == "k1"
    removed = core.apply_table_updates(
        with_snapshot, core.parse_table_updates([{"action": "remove-encryption-key", "key-id": "k1"}]), None
    )
    assert "encryption-keys" not in round_trip(removed)
    v2 = create(2, {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]})
    with pytest.raises(BadRequest, match="encryption keys are format v3"):
        core.apply_table_updates(v2, add, None)


def test_v3_metadata_written_by_iceberg_java_registers_unchanged() -> None:
    """A v3 metadata file as Java writes it (row lineage, keys, a snapshot key id) parses and is written
    back with every v3 field."""
    java = {
        "format-version": 3,
        "table-uuid": str(uuid.uuid4()),
        "location": LOCATION,
        "last-sequence-number": 1,
        "last-updated-ms": 1_700_000_000_000,
        "last-column-id": 1,
        "current-schema-id": 0,
        "schemas": [
            {
                "type": "struct",
                "schema-id": 0,
                "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
            }
        ],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "last-partition-id": 999,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": {},
        "current-snapshot-id": 5,
        "refs": {"main": {"snapshot-id": 5, "type": "branch"}},
        "snapshots": [
            {
                **snapshot(5, 1, None, **{"first-row-id": 0, "added-rows": 9, "key-id": "k"}),
                "timestamp-ms": 1_700_000_000_000,
            }
        ],
        "statistics": [],
        "partition-statistics": [],
        "snapshot-log": [],
        "metadata-log": [],
        "next-row-id": 9,
        "encryption-keys": [{"key-id": "k", "encrypted-key-metadata": "aWNlYmVyZwo="}],
    }
    written = round_trip(core.parse_table_metadata(json.dumps(java)))
    assert written["next-row-id"] == 9
    assert written["encryption-keys"] == java["encryption-keys"]
    assert written["snapshots"][0]["key-id"] == "k"


@pytest.mark.parametrize("type_name", ["timestamp_ns", "timestamptz_ns", "unknown", "geometry", "geography"])
def test_v3_types_are_kept_at_v3_and_refused_below(type_name: str) -> None:
    schema = {"type": "struct", "fields": [{"id": 1, "name": "c", "type": type_name, "required": False}]}
    assert round_trip(create(3, schema))["schemas"][0]["fields"][0]["type"] == type_name
    with pytest.raises(BadRequest, match=type_name):
        create(2, schema)


def test_the_variant_type_is_a_bad_request() -> None:
    schema = {"type": "struct", "fields": [{"id": 1, "name": "v", "type": "variant", "required": False}]}
    with pytest.raises(BadRequest, match="Unsupported field type: 'variant'"):
        create(3, schema)
