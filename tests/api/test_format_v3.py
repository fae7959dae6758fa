"""Format v3 tables through the REST API (issue 11, deliverable 2).

pyiceberg 0.12 creates, loads and evolves v3 tables through floe (it cannot write their data — its
manifest writer stops at v2 — nor build a v3 create transaction: its own metadata builder refuses
v3 before it sends anything); the raw-HTTP tests send what Iceberg Java sends (create transactions
at v3, snapshots with row lineage, encryption keys, the v2 → v3 upgrade, register) and check what floe
stores and serves.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.types import TimestamptzNanoType

from tests.api.test_rest_api import (
    SCHEMA,
    assert_error,
    commit,
    create_table,
    file_path,
    load_table,
    snapshot_update,
    table_path,
)

PEOPLE = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
V3_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "at", "type": "timestamp_ns", "required": False},
        {
            "id": 3,
            "name": "level",
            "type": "int",
            "required": False,
            "initial-default": 3,
            "write-default": 4,
        },
    ],
}


def lineage_snapshot(
    metadata: dict[str, Any], snapshot_id: int, added_rows: int, first_row_id: int | None = None
) -> list[dict[str, Any]]:
    """An append as Iceberg Java commits it to a v3 table: first-row-id = the table's next-row-id."""
    parent = metadata.get("current-snapshot-id")
    parent = None if parent in (None, -1) else parent
    update = snapshot_update(
        snapshot_id, metadata["last-sequence-number"] + 1, parent, location=metadata["location"]
    )
    update["snapshot"]["first-row-id"] = metadata["next-row-id"] if first_row_id is None else first_row_id
    update["snapshot"]["added-rows"] = added_rows
    return [
        update,
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
    ]


def test_pyiceberg_creates_loads_and_evolves_v3_tables(rest_catalog: RestCatalog, namespace: str) -> None:
    table = rest_catalog.create_table((namespace, "t"), schema=PEOPLE, properties={"format-version": "3"})
    assert (table.format_version, table.metadata.next_row_id) == (3, 0)
    with table.update_schema() as update:
        update.add_column("at", TimestamptzNanoType())
    with table.transaction() as txn:
        txn.set_properties(owner="v3")
    loaded = rest_catalog.load_table((namespace, "t"))
    assert loaded.format_version == 3
    assert loaded.schema().find_field("at").field_type == TimestamptzNanoType()
    assert loaded.properties["owner"] == "v3"
    assert loaded.scan().to_arrow().num_rows == 0


def test_create_transaction_at_v3_with_row_lineage(http: httpx.Client, namespace: str) -> None:
    """The Java client's v3 create transaction: columns with defaults and nanosecond timestamps, then
    appends whose row ids the catalog tracks."""
    updates: list[dict[str, Any]] = [
        {"action": "assign-uuid", "uuid": str(uuid.uuid4())},
        {"action": "upgrade-format-version", "format-version": 3},
        {"action": "add-schema", "schema": V3_SCHEMA, "last-column-id": 3},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
    ]
    response = commit(http, [namespace], "t", [{"type": "assert-create"}], updates)
    assert response.status_code == 200, response.text
    metadata = load_table(http, [namespace], "t")["metadata"]
    assert (metadata["format-version"], metadata["next-row-id"]) == (3, 0)
    fields = metadata["schemas"][0]["fields"]
    assert fields[1]["type"] == "timestamp_ns"
    assert (fields[2]["initial-default"], fields[2]["write-default"]) == (3, 4)

    assert commit(http, [namespace], "t", [], lineage_snapshot(metadata, 1, 10)).status_code == 200
    metadata = load_table(http, [namespace], "t")["metadata"]
    assert commit(http, [namespace], "t", [], lineage_snapshot(metadata, 2, 5)).status_code == 200
    metadata = load_table(http, [namespace], "t")["metadata"]
    assert metadata["next-row-id"] == 15
    assert [(s["first-row-id"], s["added-rows"]) for s in metadata["snapshots"]] == [(0, 10), (10, 5)]
    # A writer that assigned its row ids before another commit took them must retry.
    stale = commit(http, [namespace], "t", [], lineage_snapshot(metadata, 3, 1, first_row_id=10))
    assert_error(
        stale,
        409,
        "CommitFailedException",
        "Validation failed, please retry: Cannot add a snapshot, first-row-id is behind table next-row-id: "
        "10 < 15",
    )
    missing = lineage_snapshot(metadata, 3, 1)
    del missing[0]["snapshot"]["first-row-id"]
    assert_error(commit(http, [namespace], "t", [], missing), 400, "BadRequestException")
    # The stored metadata file is the served one.
    stored = json.loads(file_path(load_table(http, [namespace], "t")["metadata-location"]).read_text())
    assert stored["next-row-id"] == 15


def test_stage_create_at_v3(http: httpx.Client, namespace: str) -> None:
    staged = http.post(
        f"/v1/default/namespaces/{namespace}/tables",
        json={"name": "s", "schema": V3_SCHEMA, "stage-create": True, "properties": {"format-version": "3"}},
    )
    assert staged.status_code == 200, staged.text
    metadata = staged.json()["metadata"]
    assert (metadata["format-version"], metadata["next-row-id"]) == (3, 0)
    assert metadata["schemas"][0]["fields"][2]["initial-default"] == 3
    assert http.get(table_path([namespace], "s")).status_code == 404


def test_upgrade_v2_to_v3_and_encryption_keys(http: httpx.Client, namespace: str) -> None:
    created = create_table(http, [namespace], "t", properties={"format-version": "2"})["metadata"]
    first = snapshot_update(1, 1, None, location=created["location"])
    ref = {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 1}
    assert commit(http, [namespace], "t", [], [first, ref]).status_code == 200
    upgrade = [{"action": "upgrade-format-version", "format-version": 3}]
    assert commit(http, [namespace], "t", [], upgrade).status_code == 200
    metadata = load_table(http, [namespace], "t")["metadata"]
    assert (metadata["format-version"], metadata["next-row-id"]) == (3, 0)
    assert "first-row-id" not in metadata["snapshots"][0]

    key = {"key-id": "k1", "encrypted-key-metadata": "aWNlYmVyZwo="}
    response = commit(http, [namespace], "t", [], [{"action": "add-encryption-key", "encryption-key": key}])
    assert response.status_code == 200, response.text
    assert load_table(http, [namespace], "t")["metadata"]["encryption-keys"] == [key]
    too_new = commit(http, [namespace], "t", [], [{"action": "upgrade-format-version", "format-version": 4}])
    assert_error(too_new, 400, "BadRequestException")
    down = commit(http, [namespace], "t", [], [{"action": "upgrade-format-version", "format-version": 2}])
    assert_error(down, 400, "BadRequestException")


def test_v3_only_columns_need_a_v3_table(http: httpx.Client, namespace: str) -> None:
    response = http.post(
        f"/v1/default/namespaces/{namespace}/tables",
        json={"name": "t", "schema": V3_SCHEMA, "properties": {"format-version": "2"}},
    )
    assert_error(response, 400, "BadRequestException")
    response = http.post(
        f"/v1/default/namespaces/{namespace}/tables",
        json={"name": "t", "schema": SCHEMA, "properties": {"format-version": "4"}},
    )
    assert_error(response, 400, "BadRequestException")


def test_register_a_v3_metadata_file(http: httpx.Client, namespace: str) -> None:
    http.post(
        f"/v1/default/namespaces/{namespace}/tables",
        json={"name": "t", "schema": V3_SCHEMA, "properties": {"format-version": "3"}},
    ).raise_for_status()
    metadata = load_table(http, [namespace], "t")["metadata"]
    assert commit(http, [namespace], "t", [], lineage_snapshot(metadata, 1, 7)).status_code == 200
    location = load_table(http, [namespace], "t")["metadata-location"]
    registered = http.post(
        f"/v1/default/namespaces/{namespace}/register", json={"name": "again", "metadata-location": location}
    )
    assert registered.status_code == 200, registered.text
    again = load_table(http, [namespace], "again")["metadata"]
    assert (again["format-version"], again["next-row-id"]) == (3, 7)
    assert again["schemas"][0]["fields"][2]["initial-default"] == 3
