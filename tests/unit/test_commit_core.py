"""The pure commit path, without HTTP: `catalog.commit` for tables and `catalog.view_commit` for views.

Requirement failures must be worded as the Java reference implementation words them (the Java client and
the REST compatibility kit match these texts); anything the client got wrong is a `BadRequest`.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, cast

import pytest
from pyiceberg.table.metadata import TableMetadata, TableMetadataV1
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    SetPropertiesUpdate,
    ValidatableTableRequirement,
    update_table_metadata,
)
from pyiceberg.view.metadata import ViewMetadata

from catalog import commit as core
from catalog import view_commit as views
from catalog.errors import BadRequest, CommitFailed, InvalidArgument

SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "name", "type": "string", "required": False},
    ],
}
LOCATION = "file:///tmp/floe-core-test/t"


# What a create stores without being asked.
NEW_TABLE_PROPERTIES = {"write.parquet.compression-codec": "zstd"}


def make_table(properties: dict[str, str] | None = None) -> TableMetadata:
    return core.create_table_metadata(
        schema=SCHEMA, location=LOCATION, partition_spec=None, write_order=None, properties=properties or {}
    )


def snapshot_body(
    snapshot_id: int, sequence_number: int, parent: int | None = None, schema_id: int = 0
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "snapshot-id": snapshot_id,
        "sequence-number": sequence_number,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": f"{LOCATION}/metadata/snap-{snapshot_id}.avro",
        "summary": {"operation": "append"},
        "schema-id": schema_id,
    }
    if parent is not None:
        body["parent-snapshot-id"] = parent
    return body


def last_sequence_number(metadata: TableMetadata) -> int:
    assert not isinstance(metadata, TableMetadataV1), "v1 tables have no sequence numbers"
    return metadata.last_sequence_number


def append(base: TableMetadata, snapshot_id: int, location: str | None = None) -> TableMetadata:
    """Commit one appended snapshot on `main`, as a client would."""
    parent = base.current_snapshot_id
    updates = core.parse_table_updates(
        [
            {
                "action": "add-snapshot",
                "snapshot": snapshot_body(snapshot_id, last_sequence_number(base) + 1, parent),
            },
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
        ]
    )
    return core.apply_table_updates(base, updates, location)


def requirements(*items: dict[str, Any]) -> tuple[core.TableRequirement, ...]:
    return core.parse_requirements(list(items))


def failure_of(reqs: tuple[core.TableRequirement, ...], base: TableMetadata | None) -> str:
    with pytest.raises(CommitFailed) as info:
        core.check_requirements(reqs, base)
    return info.value.message


# -- parsing -------------------------------------------------------------------------------------------


def test_parse_requirements_accepts_every_spec_type() -> None:
    raw: list[dict[str, Any]] = [
        {"type": "assert-create"},
        {"type": "assert-table-uuid", "uuid": str(uuid.uuid4())},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None},
        {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 2},
        {"type": "assert-current-schema-id", "current-schema-id": 0},
        {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 999},
        {"type": "assert-default-spec-id", "default-spec-id": 0},
        {"type": "assert-default-sort-order-id", "default-sort-order-id": 0},
    ]
    parsed = core.parse_requirements(raw)
    assert [r.type for r in parsed] == [r["type"] for r in raw]
    assert all(isinstance(r, ValidatableTableRequirement) for r in parsed), "pyiceberg's typed requirements"
    assert [r.model_dump(by_alias=True, mode="json") for r in parsed] == raw
    assert core.parse_requirements(None) == ()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([{"type": "assert-nothing"}], "Unknown requirement type: assert-nothing"),
        ([{"uuid": "x"}], "Invalid requirement"),
        (["assert-create"], "Invalid requirement"),
        ({"type": "assert-create"}, "requirements must be an array"),
        (
            [{"type": "assert-current-schema-id", "current-schema-id": "0"}],
            "^Invalid requirement: assert-current-schema-id: "
            "Input should be a valid integer at 'current-schema-id'$",
        ),
        (
            [{"type": "assert-default-spec-id", "default-spec-id": True}],
            "^Invalid requirement: assert-default-spec-id: "
            "Input should be a valid integer at 'default-spec-id'$",
        ),
        (
            [{"type": "assert-create"}, {"type": "assert-ref-snapshot-id", "snapshot-id": 1}],
            "^Invalid requirement: assert-ref-snapshot-id: Field required at 'ref'$",
        ),
        ([{"type": "assert-table-uuid", "uuid": "not-a-uuid"}], "assert-table-uuid: .* at 'uuid'"),
        ([{"type": "assert-table-uuid"}], "assert-table-uuid: Field required at 'uuid'"),
        ([{"type": "assert-current-schema-id", "current-schema-id": float("nan")}], "Invalid requirement"),
    ],
)
def test_parse_requirements_rejects_bad_input(raw: Any, message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        core.parse_requirements(raw)


def test_parse_table_updates_returns_typed_updates() -> None:
    parsed = core.parse_table_updates(
        [
            {"action": "set-properties", "updates": {"a": "1"}},
            {"action": "add-snapshot", "snapshot": snapshot_body(7, 1)},
        ]
    )
    assert isinstance(parsed[0], SetPropertiesUpdate)
    assert parsed[0].updates == {"a": "1"}
    assert isinstance(parsed[1], AddSnapshotUpdate)
    assert core.parse_table_updates(None) == ()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([{"action": "make-it-fast"}], "Unknown update action: make-it-fast"),
        ([{"action": "add-encryption-key", "encryption-key": {}}], "Invalid update"),
        (
            [
                {
                    "action": "add-encryption-key",
                    "encryption-key": {"key-id": "k", "encrypted-key-metadata": "%"},
                }
            ],
            "must be base64",
        ),
        ([{"updates": {"a": "1"}}], "Invalid update"),
        ([{"action": "add-schema"}], "Invalid update"),
        ([{"action": "set-properties", "updates": "a=1"}], "Invalid update"),
        ({"action": "set-properties"}, "updates must be an array"),
    ],
)
def test_parse_table_updates_rejects_bad_input(raw: Any, message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        core.parse_table_updates(raw)


# -- requirements, in the Java wording -----------------------------------------------------------------


def test_assert_create_fails_on_an_existing_table() -> None:
    reqs = requirements({"type": "assert-create"})
    assert failure_of(reqs, make_table()) == "Requirement failed: table already exists"
    core.check_requirements(reqs, None)


def test_assert_current_schema_id() -> None:
    base = make_table()
    core.check_requirements(requirements({"type": "assert-current-schema-id", "current-schema-id": 0}), base)
    reqs = requirements({"type": "assert-current-schema-id", "current-schema-id": 1})
    assert failure_of(reqs, base) == "Requirement failed: current schema changed: expected id 1 != 0"


def test_assert_table_uuid() -> None:
    base = make_table()
    core.check_requirements(requirements({"type": "assert-table-uuid", "uuid": str(base.table_uuid)}), base)
    other = str(uuid.uuid4())
    assert failure_of(requirements({"type": "assert-table-uuid", "uuid": other}), base) == (
        f"Requirement failed: UUID does not match: expected {base.table_uuid} != {other}"
    )


def test_assert_ref_snapshot_id_missing_branch() -> None:
    base = make_table()
    core.check_requirements(requirements({"type": "assert-ref-snapshot-id", "ref": "main"}), base)
    reqs = requirements({"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 1})
    assert failure_of(reqs, base) == "Requirement failed: branch or tag main is missing, expected 1"


def test_assert_ref_snapshot_id_changed_or_created_concurrently() -> None:
    base = append(make_table(), 101)
    core.check_requirements(
        requirements({"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 101}), base
    )
    changed = requirements({"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 5})
    assert failure_of(changed, base) == "Requirement failed: branch main has changed: expected id 5 != 101"
    created = requirements({"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None})
    assert failure_of(created, base) == "Requirement failed: branch main was created concurrently"


def test_assert_ref_snapshot_id_on_a_tag() -> None:
    base = append(make_table(), 101)
    tagged = core.apply_table_updates(
        base,
        core.parse_table_updates(
            [{"action": "set-snapshot-ref", "ref-name": "v1", "type": "tag", "snapshot-id": 101}]
        ),
        None,
    )
    reqs = requirements({"type": "assert-ref-snapshot-id", "ref": "v1", "snapshot-id": 7})
    assert failure_of(reqs, tagged) == "Requirement failed: tag v1 has changed: expected id 7 != 101"


def test_assert_last_assigned_ids_and_defaults() -> None:
    base = make_table()
    cases = [
        (
            {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 5},
            "Requirement failed: last assigned field id changed: expected id 5 != 2",
        ),
        (
            {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 1000},
            "Requirement failed: last assigned partition id changed: expected id 1000 != 999",
        ),
        (
            {"type": "assert-default-spec-id", "default-spec-id": 3},
            "Requirement failed: default partition spec changed: expected id 3 != 0",
        ),
        (
            {"type": "assert-default-sort-order-id", "default-sort-order-id": 1},
            "Requirement failed: default sort order changed: expected id 1 != 0",
        ),
    ]
    for raw, message in cases:
        assert failure_of(requirements(raw), base) == message
    holding = requirements(
        {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 2},
        {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 999},
        {"type": "assert-default-spec-id", "default-spec-id": 0},
        {"type": "assert-default-sort-order-id", "default-sort-order-id": 0},
    )
    core.check_requirements(holding, base)


def test_first_failing_requirement_is_reported() -> None:
    reqs = requirements(
        {"type": "assert-current-schema-id", "current-schema-id": 0},
        {"type": "assert-default-spec-id", "default-spec-id": 9},
        {"type": "assert-current-schema-id", "current-schema-id": 9},
    )
    assert "default partition spec changed" in failure_of(reqs, make_table())


def test_requirements_other_than_create_fail_without_a_table() -> None:
    reqs = requirements({"type": "assert-current-schema-id", "current-schema-id": 0})
    assert failure_of(reqs, None) == "Requirement failed: table does not exist"


# -- applying updates ----------------------------------------------------------------------------------


def test_apply_properties_and_snapshots() -> None:
    base = make_table({"keep": "1", "drop": "2"})
    updates = core.parse_table_updates(
        [
            {"action": "set-properties", "updates": {"owner": "floe"}},
            {"action": "remove-properties", "removals": ["drop"]},
        ]
    )
    new = core.apply_table_updates(base, updates, "file:///x/metadata/00000-a.metadata.json")
    assert new.properties == {**NEW_TABLE_PROPERTIES, "keep": "1", "owner": "floe"}
    assert [e.metadata_file for e in new.metadata_log] == ["file:///x/metadata/00000-a.metadata.json"]
    untouched = {**NEW_TABLE_PROPERTIES, "keep": "1", "drop": "2"}
    assert base.properties == untouched, "the base must stay untouched"

    first = append(new, 1)
    second = append(first, 2)
    assert second.current_snapshot_id == 2
    assert last_sequence_number(second) == 2
    assert [s.snapshot_id for s in second.snapshots] == [1, 2]
    assert second.refs["main"].snapshot_id == 2


def test_a_new_table_stores_zstd_unless_asked_otherwise() -> None:
    """As Iceberg's own catalogs do: the code default stays gzip (for old tables), so a new table
    stores zstd explicitly and writers relying on defaults write zstd."""
    assert make_table().properties == NEW_TABLE_PROPERTIES
    asked = make_table({"write.parquet.compression-codec": "snappy"})
    assert asked.properties == {"write.parquet.compression-codec": "snappy"}


def _without_clock(metadata: TableMetadata) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(metadata.model_dump_json())
    document.pop("last-updated-ms")
    for entry in document.get("metadata-log", []):
        entry.pop("timestamp-ms")
    return document


_NEW_FIELD = {"id": 3, "name": "x", "type": "int", "required": False}
_WIDER_SCHEMA = {**SCHEMA, "schema-id": 1, "fields": [*SCHEMA["fields"], _NEW_FIELD]}
_BUCKET = {"source-id": 1, "field-id": 1000, "transform": "bucket[4]", "name": "b"}
_BUCKET_SPEC = {"spec-id": 1, "fields": [_BUCKET]}
_ORDER_FIELD = {"source-id": 1, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}
_STATISTICS = {
    "snapshot-id": 5,
    "statistics-path": f"{LOCATION}/s.puffin",
    "file-size-in-bytes": 1,
    "file-footer-size-in-bytes": 1,
    "blob-metadata": [],
}


UPDATE_CASES: list[list[dict[str, Any]]] = [
    [{"action": "set-properties", "updates": {"a": "1"}}],
    [{"action": "remove-properties", "removals": ["p"]}],
    [{"action": "set-location", "location": f"{LOCATION}/moved"}],
    [{"action": "upgrade-format-version", "format-version": 3}],
    [{"action": "assign-uuid", "uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1"}],
    [
        {"action": "add-schema", "schema": _WIDER_SCHEMA, "last-column-id": 3},
        {"action": "set-current-schema", "schema-id": -1},
    ],
    [{"action": "add-spec", "spec": _BUCKET_SPEC}, {"action": "set-default-spec", "spec-id": -1}],
    [
        {"action": "add-sort-order", "sort-order": {"order-id": 1, "fields": [_ORDER_FIELD]}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
    ],
    [
        {"action": "add-snapshot", "snapshot": snapshot_body(7, 2, 5)},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 7},
        {"action": "set-snapshot-ref", "ref-name": "tag", "type": "tag", "snapshot-id": 5},
    ],
    [
        {"action": "remove-snapshots", "snapshot-ids": [5]},
        {"action": "remove-snapshot-ref", "ref-name": "main"},
    ],
    [{"action": "set-statistics", "snapshot-id": 5, "statistics": _STATISTICS}],
]


@pytest.mark.parametrize("updates", UPDATE_CASES)
def test_updates_apply_as_pyiceberg_applies_them(updates: list[dict[str, Any]]) -> None:
    """floe applies updates with pyiceberg's functions but skips `update_table_metadata`'s deep copy
    of the result: the metadata is the same, and the base is left as it was."""
    base = append(make_table({"p": "v"}), 5, f"{LOCATION}/metadata/00000-a.metadata.json")
    before = base.model_dump_json()
    parsed = core.parse_table_updates(updates)
    location = f"{LOCATION}/metadata/00001-b.metadata.json"
    ours = core.apply_table_updates(base, parsed, location)
    assert base.model_dump_json() == before
    theirs = update_table_metadata(base, cast(Any, parsed), metadata_location=location)
    assert _without_clock(ours) == _without_clock(theirs)


@pytest.mark.parametrize("updates", UPDATE_CASES)
def test_a_committed_model_is_what_its_json_parses_to(updates: list[dict[str, Any]]) -> None:
    """The next commit by the same process starts from the model a commit wrote (`MetadataModels`),
    not from parsing its JSON again: both are the same metadata, and commits on either agree."""
    model = append(make_table({"p": "v"}), 5, f"{LOCATION}/metadata/00000-a.metadata.json")
    steps: list[list[dict[str, Any]] | None] = [
        updates,
        [{"action": "set-properties", "updates": {"n": "1"}}],
        None,
    ]
    for version, step in enumerate(steps, 1):
        parsed = core.parse_table_metadata(model.model_dump_json())
        assert parsed.model_dump() == model.model_dump()
        location = f"{LOCATION}/metadata/{version:05d}-b.metadata.json"
        if step is None and model.format_version < 3:  # an append (v3 would need row lineage)
            body = snapshot_body(9, last_sequence_number(model) + 1, model.current_snapshot_id)
            step = [
                {"action": "add-snapshot", "snapshot": body},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 9},
            ]
        changes = core.parse_table_updates(step or [{"action": "remove-properties", "removals": ["n"]}])
        on_model = core.apply_table_updates(model, changes, location)
        on_parsed = core.apply_table_updates(parsed, changes, location)
        assert _without_clock(on_model) == _without_clock(on_parsed)
        model = on_model


def test_stale_snapshot_is_a_conflict_to_retry() -> None:
    """Iceberg Java 1.11 answers a stale sequence number 409 (`RetryableValidationException`): the client
    retries on fresh metadata."""
    base = append(append(make_table(), 1), 2)
    stale = core.parse_table_updates([{"action": "add-snapshot", "snapshot": snapshot_body(3, 1, parent=1)}])
    with pytest.raises(CommitFailed, match=r"Validation failed, please retry: .*older than last sequence"):
        core.apply_table_updates(base, stale, None)


def test_duplicate_snapshot_id_is_a_bad_request() -> None:
    base = append(make_table(), 1)
    again = core.parse_table_updates([{"action": "add-snapshot", "snapshot": snapshot_body(1, 2, parent=1)}])
    with pytest.raises(BadRequest, match="already exists"):
        core.apply_table_updates(base, again, None)


def test_ref_to_unknown_snapshot_is_a_bad_request() -> None:
    updates = core.parse_table_updates(
        [{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 424242}]
    )
    with pytest.raises(BadRequest, match="unknown snapshot 424242"):
        core.apply_table_updates(make_table(), updates, None)


def test_schema_evolution_with_last_added_ids() -> None:
    evolved = {
        "type": "struct",
        "schema-id": 1,
        "fields": [*SCHEMA["fields"], {"id": 3, "name": "ts", "type": "timestamptz", "required": False}],
    }
    updates = core.parse_table_updates(
        [
            {"action": "add-schema", "schema": evolved, "last-column-id": 3},
            {"action": "set-current-schema", "schema-id": -1},
        ]
    )
    new = core.commit_table(
        make_table(),
        None,
        requirements({"type": "assert-current-schema-id", "current-schema-id": 0}),
        updates,
    )
    assert new.current_schema_id == 1
    assert new.last_column_id == 3
    assert [f.name for f in new.schema().fields] == ["id", "name", "ts"]
    # A second writer still assuming schema 0 now fails with the Java wording.
    with pytest.raises(
        CommitFailed, match=r"^Requirement failed: current schema changed: expected id 0 != 1$"
    ):
        core.commit_table(
            new, None, requirements({"type": "assert-current-schema-id", "current-schema-id": 0}), updates
        )


def test_create_transaction_from_an_empty_base() -> None:
    table_uuid = str(uuid.uuid4())
    updates = core.parse_table_updates(
        [
            {"action": "assign-uuid", "uuid": table_uuid},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": SCHEMA, "last-column-id": 2},
            {"action": "set-current-schema", "schema-id": -1},
            {
                "action": "add-spec",
                "spec": {
                    "spec-id": 0,
                    "fields": [
                        {"source-id": 1, "field-id": 1000, "name": "id_bucket", "transform": "bucket[4]"}
                    ],
                },
            },
            {"action": "set-default-spec", "spec-id": -1},
            {
                "action": "add-sort-order",
                "sort-order": {
                    "order-id": 1,
                    "fields": [
                        {
                            "source-id": 1,
                            "transform": "identity",
                            "direction": "asc",
                            "null-order": "nulls-first",
                        }
                    ],
                },
            },
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": "file:///tmp/floe-core-test/created"},
            {"action": "set-properties", "updates": {"created-by": "test"}},
        ]
    )
    new = core.commit_table(None, None, requirements({"type": "assert-create"}), updates, LOCATION)
    assert new.format_version == 2
    assert str(new.table_uuid) == table_uuid
    assert new.location == "file:///tmp/floe-core-test/created"
    assert new.current_schema_id == 0
    assert [f.name for f in new.schema().fields] == ["id", "name"]
    assert new.last_column_id == 2
    assert [f.name for f in new.spec().fields] == ["id_bucket"]
    assert new.last_partition_id == 1000
    assert new.default_sort_order_id == 1
    assert new.properties == {"created-by": "test"}
    # What the create produced is a complete, re-parsable table.
    assert core.parse_table_metadata(new.model_dump_json()) == new


def test_create_transaction_lands_at_the_default_location() -> None:
    updates = core.parse_table_updates(
        [
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": SCHEMA, "last-column-id": 2},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
        ]
    )
    new = core.commit_table(None, None, requirements({"type": "assert-create"}), updates, LOCATION)
    assert new.location == LOCATION
    with pytest.raises(BadRequest, match="set-location"):
        core.commit_table(None, None, requirements({"type": "assert-create"}), updates)


def sort_order(order_id: int, direction: str = "asc") -> dict[str, Any]:
    field = {"source-id": 1, "transform": "identity", "direction": direction, "null-order": "nulls-first"}
    return {"order-id": order_id, "fields": [field]}


def replace_sort_order(base: TableMetadata, order: dict[str, Any]) -> TableMetadata:
    updates = core.parse_table_updates(
        [
            {"action": "add-sort-order", "sort-order": order},
            {"action": "set-default-sort-order", "sort-order-id": -1},
        ]
    )
    return core.apply_table_updates(base, updates, None)


def test_added_sort_order_gets_a_new_id_when_its_id_is_taken() -> None:
    """A replace transaction re-adds its order with the id it began with; a concurrent commit may have
    given that id to another order since: the Java reference assigns the next id instead of failing."""
    ascending = replace_sort_order(make_table(), sort_order(1))
    assert ascending.default_sort_order_id == 1
    descending = replace_sort_order(ascending, sort_order(1, "desc"))
    assert [order.order_id for order in descending.sort_orders] == [0, 1, 2]
    assert descending.default_sort_order_id == 2
    assert descending.sort_order_by_id(2).fields[0].direction.value == "desc"  # type: ignore[union-attr]


def test_added_sort_order_equal_to_an_existing_one_reuses_its_id() -> None:
    ascending = replace_sort_order(make_table(), sort_order(1))
    descending = replace_sort_order(ascending, sort_order(2, "desc"))
    again = replace_sort_order(descending, sort_order(3))
    assert [order.order_id for order in again.sort_orders] == [0, 1, 2]
    assert again.default_sort_order_id == 1


def test_metadata_locations_are_numbered() -> None:
    base = make_table()
    first = core.new_metadata_location(base, None)
    assert first.startswith(f"{LOCATION}/metadata/00000-")
    assert first.endswith(".metadata.json")
    second = core.new_metadata_location(base, first)
    assert second.rsplit("/", 1)[1].startswith("00001-")
    moved = make_table({"write.metadata.path": "file:///elsewhere/meta"})
    assert core.new_metadata_location(moved, second).startswith("file:///elsewhere/meta/00002-")
    assert core.metadata_version("s3://b/t/metadata/v7.metadata.json") == 7
    assert core.metadata_version(None) == -1


def test_referenced_snapshots_only() -> None:
    table = append(append(append(make_table(), 1), 2), 3)
    tagged = core.apply_table_updates(
        table,
        core.parse_table_updates(
            [{"action": "set-snapshot-ref", "ref-name": "t1", "type": "tag", "snapshot-id": 1}]
        ),
        None,
    )
    refs_only = core.referenced_snapshots_only(tagged.model_dump(by_alias=True))
    assert sorted(s["snapshot-id"] for s in refs_only["snapshots"]) == [1, 3]


# -- views ---------------------------------------------------------------------------------------------

VIEW_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


def view_version(sql: str, schema_id: int = 0) -> dict[str, Any]:
    return {
        "version-id": 99,
        "schema-id": schema_id,
        "timestamp-ms": int(time.time() * 1000),
        "summary": {"engine-name": "test"},
        "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
        "default-namespace": ["ns"],
    }


def commit_view_json(base: ViewMetadata, requirements: Any, updates: Any) -> ViewMetadata:
    """A view commit from the request's JSON, parsed as the service parses it."""
    return views.commit_view(
        base, views.parse_view_requirements(requirements), views.parse_view_updates(updates)
    )


def make_view(properties: dict[str, str] | None = None) -> ViewMetadata:
    return views.create_view_metadata(
        location="file:///tmp/floe-core-test/v",
        schema=VIEW_SCHEMA,
        view_version=view_version("select 1"),
        properties=properties or {},
    )


def replace_sql(base: ViewMetadata, sql: str, schema: dict[str, Any] | None = None) -> ViewMetadata:
    return commit_view_json(
        base,
        [{"type": "assert-view-uuid", "uuid": base.view_uuid}],
        [
            {"action": "add-schema", "schema": schema or VIEW_SCHEMA},
            {"action": "add-view-version", "view-version": view_version(sql, schema_id=-1)},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    )


def test_create_view() -> None:
    view = make_view({"comment": "c"})
    assert view.format_version == 1
    assert view.current_version_id == 1
    assert [v.version_id for v in view.versions] == [1]
    assert [e.version_id for e in view.version_log] == [1]
    assert view.properties == {"comment": "c"}
    uuid.UUID(view.view_uuid)


def test_created_view_schema_gets_id_zero() -> None:
    """The Java reference assigns the first schema id 0 whatever the client sent."""
    view = views.create_view_metadata(
        location="file:///tmp/floe-core-test/v",
        schema={**VIEW_SCHEMA, "schema-id": 5},
        view_version=view_version("select 1", schema_id=5),
        properties={},
    )
    assert [schema.schema_id for schema in view.schemas] == [0]
    assert view.versions[0].schema_id == 0
    replaced = replace_sql(view, "select 2", {**VIEW_SCHEMA, "fields": []})
    assert [schema.schema_id for schema in replaced.schemas] == [0, 1]


def test_two_queries_for_one_dialect_are_an_illegal_argument() -> None:
    version = view_version("select 1")
    version["representations"] = [
        {"type": "sql", "sql": "select 1", "dialect": "trino"},
        {"type": "sql", "sql": "select 2", "dialect": "Trino"},
    ]
    message = "Invalid view version: Cannot add multiple queries for dialect trino"
    with pytest.raises(InvalidArgument, match=message) as raised:
        views.create_view_metadata(
            location="file:///tmp/floe-core-test/v", schema=VIEW_SCHEMA, view_version=version, properties={}
        )
    assert raised.value.error_type == "IllegalArgumentException"
    assert raised.value.status_code == 400
    with pytest.raises(InvalidArgument, match=message):
        commit_view_json(make_view(), [], [{"action": "add-view-version", "view-version": version}])


def test_replace_view_with_last_added_ids() -> None:
    view = make_view()
    wider = {
        "type": "struct",
        "schema-id": 0,
        "fields": [
            {"id": 1, "name": "id", "type": "long", "required": False},
            {"id": 2, "name": "label", "type": "string", "required": False},
        ],
    }
    new = replace_sql(view, "select 1, 'x'", wider)
    assert new.current_version_id == 2
    current = next(v for v in new.versions if v.version_id == 2)
    assert current.schema_id == 1, "schema-id -1 means the schema added in this commit"
    assert [s.schema_id for s in new.schemas] == [0, 1]
    assert [e.version_id for e in new.version_log] == [1, 2]


def test_identical_view_version_is_deduplicated() -> None:
    view = replace_sql(make_view(), "select 2")
    again = replace_sql(view, "select 2")
    assert [v.version_id for v in again.versions] == [1, 2]
    assert again.current_version_id == 2
    assert [s.schema_id for s in again.schemas] == [0], "an identical schema is reused, not added"
    back = replace_sql(again, "select 1")
    assert [v.version_id for v in back.versions] == [1, 2]
    assert back.current_version_id == 1
    assert [e.version_id for e in back.version_log] == [1, 2, 1]


def test_assert_view_uuid_failure() -> None:
    view = make_view()
    other = str(uuid.uuid4())
    with pytest.raises(CommitFailed) as info:
        commit_view_json(view, [{"type": "assert-view-uuid", "uuid": other}], [])
    assert info.value.message == (
        f"Requirement failed: view UUID does not match: expected {view.view_uuid} != {other}"
    )
    with pytest.raises(BadRequest, match="Unknown view requirement type"):
        commit_view_json(view, [{"type": "assert-create"}], [])


def test_view_history_retention() -> None:
    view = make_view({views.HISTORY_ENTRIES_PROPERTY: "2"})
    for n in range(2, 6):
        view = replace_sql(view, f"select {n}")
    assert [v.version_id for v in view.versions] == [4, 5]
    assert view.current_version_id == 5
    assert [e.version_id for e in view.version_log] == [4, 5]


def test_view_history_keeps_the_current_version() -> None:
    view = make_view({views.HISTORY_ENTRIES_PROPERTY: "2"})
    # Add versions without making them current: the current one (1) must survive retention.
    for n in range(2, 5):
        view = commit_view_json(
            view, [], [{"action": "add-view-version", "view-version": view_version(f"select {n}")}]
        )
    assert view.current_version_id == 1
    assert 1 in [v.version_id for v in view.versions]
    assert len(view.versions) == 2


@pytest.mark.parametrize(
    ("updates", "message"),
    [
        ([{"action": "drop-everything"}], "Unknown view update action: drop-everything"),
        ([{"action": "set-current-view-version", "view-version-id": -1}], "no views have been added"),
        ([{"action": "set-current-view-version", "view-version-id": 42}], "unknown version: 42"),
        (
            [{"action": "add-view-version", "view-version": view_version("select 3", schema_id=-1)}],
            "no schema has been added",
        ),
        (
            [{"action": "add-view-version", "view-version": view_version("select 3", schema_id=7)}],
            "unknown schema: 7",
        ),
        ([{"action": "assign-uuid", "uuid": str(uuid.uuid4())}], "Cannot reassign the UUID"),
        ([{"action": "upgrade-format-version", "format-version": 2}], "Unsupported view format version"),
        ([{"action": "set-properties", "updates": ["a"]}], "Invalid set-properties"),
    ],
)
def test_invalid_view_updates_are_bad_requests(updates: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        commit_view_json(make_view(), [], updates)


def test_view_properties_and_location() -> None:
    view = make_view({"a": "1", "b": "2"})
    new = commit_view_json(
        view,
        None,
        [
            {"action": "set-properties", "updates": {"c": "3"}},
            {"action": "remove-properties", "removals": ["a"]},
            {"action": "set-location", "location": "file:///tmp/floe-core-test/moved"},
        ],
    )
    assert new.properties == {"b": "2", "c": "3"}
    assert new.location == "file:///tmp/floe-core-test/moved"
    location = views.new_view_metadata_location(new, None)
    assert location.startswith("file:///tmp/floe-core-test/moved/metadata/00000-")


def test_view_updates_and_requirements_parse_into_typed_models() -> None:
    view = make_view()
    updates = views.parse_view_updates(
        [
            {"action": "add-schema", "schema": VIEW_SCHEMA},
            {"action": "add-view-version", "view-version": view_version("select 2", schema_id=-1)},
            {"action": "set-current-view-version", "view-version-id": -1},
            {"action": "set-properties", "updates": {"a": "1"}},
        ]
    )
    assert [type(u).__name__ for u in updates] == [
        "AddSchemaUpdate",
        "AddViewVersionUpdate",
        "SetCurrentViewVersionUpdate",
        "SetPropertiesUpdate",
    ]
    requirements = views.parse_view_requirements(
        [{"type": "assert-view-uuid", "uuid": view.view_uuid.upper()}]
    )
    new = views.commit_view(view, requirements, updates)
    assert new.current_version_id == 2
    assert view.current_version_id == 1, "the base model is never changed"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            [{"type": "assert-view-uuid", "uuid": "nope"}],
            "^Invalid requirement: assert-view-uuid: .* at 'uuid'$",
        ),
        ([{"type": "assert-view-uuid"}], "^Invalid requirement: assert-view-uuid: Field required at 'uuid'$"),
        ([{"type": "assert-view-uuid", "uuid": 7}], "at 'uuid'"),
        ("assert-view-uuid", "requirements must be an array"),
    ],
)
def test_malformed_view_requirements_are_bad_requests(raw: Any, message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        views.parse_view_requirements(raw)


@pytest.mark.parametrize(
    ("updates", "message"),
    [
        (
            [{"action": "add-schema", "schema": {"type": "struct", "fields": [{"id": 1}]}}],
            "^Invalid add-schema: .* at schema.fields.0",
        ),
        ([{"action": "add-view-version", "view-version": []}], "'view-version' must be an object"),
        (
            [{"action": "add-view-version", "view-version": {}}],
            "^Invalid add-view-version: .* at view-version",
        ),
        ([{"action": "set-current-view-version", "view-version-id": "2"}], "must be an integer"),
        ([{"action": "set-location", "location": ""}], "must be a non-empty string"),
        ([{"action": "remove-properties", "removals": "a"}], "Invalid remove-properties"),
        ([{"action": "assign-uuid", "uuid": "not-a-uuid"}], "^Invalid assign-uuid: .* at uuid"),
        ({"action": "set-location"}, "updates must be an array"),
    ],
)
def test_malformed_view_updates_are_bad_requests(updates: Any, message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        views.parse_view_updates(updates)


def test_table_uuid_requirement_matches_any_spelling_of_the_uuid() -> None:
    base = make_table()
    core.check_requirements(
        requirements({"type": "assert-table-uuid", "uuid": str(base.table_uuid).upper()}), base
    )
