"""The REST API over raw HTTP, on both backends: routing, encodings, paging, ETags, commits and errors.

Every error response must carry the spec's `IcebergErrorResponse` body, and a client's mistake must never
be answered with a 5xx.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import httpx
import pytest

from catalog.locations import path_segment
from catalog.store import create_store
from devtools.catalog_server import CatalogProcess

# What a create stores without being asked: the Parquet codec Iceberg's own catalogs store.
NEW_TABLE_PROPERTIES = {"write.parquet.compression-codec": "zstd"}

PREFIX = "/v1/default"
SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "name", "type": "string", "required": False},
    ],
}


# -- helpers (shared with test_idempotency) ------------------------------------------------------------


def ns_path(*levels: str) -> str:
    """A namespace as a path segment, as pyiceberg sends it: levels quoted, joined by `%1F`."""
    return "%1F".join(quote(level, safe="") for level in levels)


def table_path(levels: tuple[str, ...] | list[str], name: str) -> str:
    return f"{PREFIX}/namespaces/{ns_path(*levels)}/tables/{quote(name, safe='')}"


def assert_error(response: httpx.Response, status: int, error_type: str, message: str | None = None) -> str:
    """Check the status and the spec's error body; returns the message."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert {"message", "type", "code"} <= set(error), error
    assert error["code"] == status
    assert error["type"] == error_type, error
    assert isinstance(error["message"], str)
    assert error["message"]
    if message is not None:
        assert error["message"] == message
    return str(error["message"])


def create_namespace(http: httpx.Client, *levels: str, properties: dict[str, str] | None = None) -> None:
    body: dict[str, Any] = {"namespace": list(levels)}
    if properties is not None:
        body["properties"] = properties
    response = http.post(f"{PREFIX}/namespaces", json=body)
    assert response.status_code == 200, response.text


def create_table(
    http: httpx.Client, levels: tuple[str, ...] | list[str], name: str, **extra: Any
) -> dict[str, Any]:
    response = http.post(
        f"{PREFIX}/namespaces/{ns_path(*levels)}/tables", json={"name": name, "schema": SCHEMA, **extra}
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def load_table(http: httpx.Client, levels: tuple[str, ...] | list[str], name: str) -> dict[str, Any]:
    response = http.get(table_path(levels, name))
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def commit(
    http: httpx.Client,
    levels: tuple[str, ...] | list[str],
    name: str,
    requirements: list[dict[str, Any]],
    updates: list[dict[str, Any]],
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    return http.post(
        table_path(levels, name),
        json={"requirements": requirements, "updates": updates},
        headers=headers,
    )


def snapshot_update(
    snapshot_id: int, sequence_number: int, parent: int | None, *, location: str
) -> dict[str, Any]:
    """An `add-snapshot` update of the table at `location`; the manifest list is never read by the
    catalog, but must lie inside the caller's folder (tests/api/test_confinement.py)."""
    snapshot: dict[str, Any] = {
        "snapshot-id": snapshot_id,
        "sequence-number": sequence_number,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": f"{location}/metadata/snap-{snapshot_id}.avro",
        "summary": {"operation": "append"},
        "schema-id": 0,
    }
    if parent is not None:
        snapshot["parent-snapshot-id"] = parent
    return {"action": "add-snapshot", "snapshot": snapshot}


def append_snapshot(http: httpx.Client, levels: tuple[str, ...], name: str, snapshot_id: int) -> None:
    metadata = load_table(http, levels, name)["metadata"]
    parent = metadata.get("current-snapshot-id")
    parent = None if parent in (None, -1) else parent
    response = commit(
        http,
        levels,
        name,
        [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
        [
            snapshot_update(
                snapshot_id, metadata["last-sequence-number"] + 1, parent, location=metadata["location"]
            ),
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
        ],
    )
    assert response.status_code == 200, response.text


def view_body(name: str, levels: tuple[str, ...], sql: str = "select 1") -> dict[str, Any]:
    return {
        "name": name,
        "schema": SCHEMA,
        "view-version": {
            "version-id": 1,
            "schema-id": 0,
            "timestamp-ms": int(time.time() * 1000),
            "summary": {"engine-name": "test"},
            "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
            "default-namespace": list(levels),
        },
        "properties": {},
    }


def file_path(location: str) -> Path:
    return Path(urlparse(location).path)


# -- config --------------------------------------------------------------------------------------------


def test_config(http: httpx.Client) -> None:
    response = http.get("/v1/config")
    assert response.status_code == 200
    config = response.json()
    assert isinstance(config["defaults"], dict)
    assert config["overrides"]["prefix"] == "default"
    assert "uri" not in config["overrides"], "a wrong uri override would redirect every client"
    endpoints = set(config["endpoints"])
    for expected in [
        "GET /v1/{prefix}/namespaces",
        "POST /v1/{prefix}/namespaces",
        "GET /v1/{prefix}/namespaces/{namespace}",
        "HEAD /v1/{prefix}/namespaces/{namespace}",
        "DELETE /v1/{prefix}/namespaces/{namespace}",
        "POST /v1/{prefix}/namespaces/{namespace}/properties",
        "GET /v1/{prefix}/namespaces/{namespace}/tables",
        "POST /v1/{prefix}/namespaces/{namespace}/tables",
        "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "POST /v1/{prefix}/namespaces/{namespace}/register",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
        "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
        "POST /v1/{prefix}/tables/rename",
        "POST /v1/{prefix}/transactions/commit",
        "GET /v1/{prefix}/namespaces/{namespace}/views",
        "POST /v1/{prefix}/namespaces/{namespace}/views",
        "POST /v1/{prefix}/views/rename",
    ]:
        assert expected in endpoints
    assert all(re.fullmatch(r"(GET|POST|DELETE|HEAD|PUT) /v1/\{prefix\}/\S+", e) for e in endpoints)
    assert re.fullmatch(r"P(T\d+[HMS])+", config["idempotency-key-lifetime"])
    assert http.get("/v1/config", params={"warehouse": "default"}).json() == config


def test_config_of_an_unknown_warehouse(http: httpx.Client) -> None:
    assert_error(http.get("/v1/config", params={"warehouse": "nope"}), 404, "NoSuchWarehouseException")
    assert_error(http.get("/v1/nope/namespaces"), 404, "NoSuchWarehouseException")


# -- namespace and table names -------------------------------------------------------------------------

NAMES = [
    "with.dot",
    "slash/inside",
    "with space",
    "ünï©ødé 日本",
    "percent%25sign",
    "plus+sign",
    "quote'\"",
    "q?&=#",
]


@pytest.mark.parametrize("level", NAMES)
def test_namespace_names_round_trip(http: httpx.Client, namespace: str, level: str) -> None:
    levels = (namespace, level)
    create_namespace(http, *levels, properties={"k": level})
    response = http.get(f"{PREFIX}/namespaces/{ns_path(*levels)}")
    assert response.status_code == 200, response.text
    loaded = response.json()
    # floe adds the namespace's folder as `location`: its last segment is the storage-safe name.
    location = loaded["properties"].pop("location")
    assert location.startswith("file:///")
    assert location.endswith("/" + path_segment(level))
    assert loaded == {"namespace": list(levels), "properties": {"k": level}}
    assert http.head(f"{PREFIX}/namespaces/{ns_path(*levels)}").status_code == 204
    # `parent` is encoded like a path and then once more as a query value, as Java and pyiceberg do.
    listed = http.get(f"{PREFIX}/namespaces", params={"parent": ns_path(namespace)})
    assert listed.json()["namespaces"] == [list(levels)]

    deeper = (*levels, level, "leaf")
    create_namespace(http, *levels, level)
    create_namespace(http, *deeper)
    children = http.get(f"{PREFIX}/namespaces", params={"parent": ns_path(*levels)})
    assert children.json()["namespaces"] == [[*levels, level]]
    grandchildren = http.get(f"{PREFIX}/namespaces", params={"parent": ns_path(*levels, level)})
    assert grandchildren.json()["namespaces"] == [list(deeper)]

    # A table with the same odd name inside the odd namespace.
    created = create_table(http, deeper, level)
    assert created["metadata"]["current-schema-id"] == 0
    assert load_table(http, deeper, level)["metadata-location"] == created["metadata-location"]
    assert http.head(table_path(deeper, level)).status_code == 204
    tables = http.get(f"{PREFIX}/namespaces/{ns_path(*deeper)}/tables").json()["identifiers"]
    assert tables == [{"namespace": list(deeper), "name": level}]


def test_errors_do_not_echo_a_huge_name(http: httpx.Client) -> None:
    """A 30,000-character namespace name is a valid request; its 404 names it, but not all of it."""
    huge = "n" * 30_000
    namespace = http.get(f"{PREFIX}/namespaces/{huge}")
    table = http.get(f"{PREFIX}/namespaces/{huge}/tables/t")
    for response, error_type in ((namespace, "NoSuchNamespaceException"), (table, "NoSuchTableException")):
        message = assert_error(response, 404, error_type)
        assert message.startswith(("Namespace does not exist: nn", "Table does not exist: nn")), message[:80]
        assert message.endswith("more characters)"), message[-80:]
        assert len(message) < 1_100


def test_java_client_encoding_of_spaces(http: httpx.Client, namespace: str) -> None:
    """The Java client encodes path segments with `URLEncoder`: a space is `+`, a `+` is `%2B`."""
    create_namespace(http, namespace, "java style")
    create_table(http, (namespace, "java style"), "my table")
    create_table(http, (namespace, "java style"), "a+b")
    base = f"{PREFIX}/namespaces/{namespace}%1Fjava+style"
    assert http.get(base).json()["namespace"] == [namespace, "java style"]
    assert http.get(f"{base}/tables/my+table").status_code == 200
    assert http.get(f"{base}/tables/a%2Bb").status_code == 200
    assert_error(http.get(f"{base}/tables/a+b"), 404, "NoSuchTableException")


def test_slash_and_dot_levels_stay_distinct(http: httpx.Client, namespace: str) -> None:
    create_namespace(http, namespace, "a/b")
    create_namespace(http, namespace, "a.b")
    create_namespace(http, namespace, "a")
    create_namespace(http, namespace, "a", "b")
    for levels in ([namespace, "a/b"], [namespace, "a.b"], [namespace, "a", "b"]):
        response = http.get(f"{PREFIX}/namespaces/{ns_path(*levels)}")
        assert response.json()["namespace"] == levels
    listed = http.get(f"{PREFIX}/namespaces", params={"parent": ns_path(namespace)}).json()["namespaces"]
    assert sorted(listed) == sorted([[namespace, "a"], [namespace, "a.b"], [namespace, "a/b"]])


@pytest.mark.parametrize(
    "raw",
    ["%ZZ", "%C3%28", "%", "ab%4", "x%1F%1Fy", "%1Fx", "x%1F", "%FF"],
)
def test_bad_namespace_encodings_are_bad_requests(http: httpx.Client, raw: str) -> None:
    assert_error(http.get(f"{PREFIX}/namespaces/{raw}"), 400, "BadRequestException")
    assert_error(http.get(f"{PREFIX}/namespaces/{raw}/tables"), 400, "BadRequestException")
    assert_error(http.get(f"{PREFIX}/namespaces/{raw}/tables/t"), 400, "BadRequestException")
    assert_error(http.delete(f"{PREFIX}/namespaces/{raw}"), 400, "BadRequestException")


def test_bad_table_name_encoding_is_a_bad_request(http: httpx.Client, namespace: str) -> None:
    for raw in ("%ZZ", "%C3%28"):
        assert_error(http.get(f"{PREFIX}/namespaces/{namespace}/tables/{raw}"), 400, "BadRequestException")
    assert_error(http.get(f"{PREFIX}/namespaces", params={"parent": "%ZZ"}), 400, "BadRequestException")


def test_invalid_namespace_bodies(http: httpx.Client, namespace: str) -> None:
    bodies: list[dict[str, Any]] = [
        {"namespace": []},
        {"namespace": [""]},
        {"namespace": ["a\x1fb"]},
        {"namespace": "x"},
        {},
    ]
    for body in bodies:
        assert_error(http.post(f"{PREFIX}/namespaces", json=body), 400, "BadRequestException")
    assert_error(
        http.post(f"{PREFIX}/namespaces", json={"namespace": [namespace]}), 409, "AlreadyExistsException"
    )
    assert_error(
        http.post(f"{PREFIX}/namespaces", json={"namespace": ["missing_parent", "child"]}),
        404,
        "NoSuchNamespaceException",
    )


# -- paging --------------------------------------------------------------------------------------------


def pages(http: httpx.Client, url: str, key: str, page_size: int, **params: str) -> list[list[Any]]:
    """Every page of a listing, following `next-page-token`."""
    result: list[list[Any]] = []
    token: str | None = None
    while True:
        query: dict[str, Any] = {**params, "pageSize": page_size}
        if token is not None:
            query["pageToken"] = token
        response = http.get(url, params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        result.append(body[key])
        token = body.get("next-page-token")
        if token is None:
            return result
        assert len(result) < 20, "paging does not end"


def test_namespace_paging(http: httpx.Client, namespace: str) -> None:
    children = [f"child{i}" for i in range(5)]
    for child in children:
        create_namespace(http, namespace, child)
    got = pages(http, f"{PREFIX}/namespaces", "namespaces", 2, parent=ns_path(namespace))
    assert [len(p) for p in got] == [2, 2, 1]
    assert [ns for page in got for ns in page] == [[namespace, c] for c in children]
    everything = http.get(f"{PREFIX}/namespaces", params={"parent": namespace}).json()
    assert len(everything["namespaces"]) == 5
    assert everything.get("next-page-token") is None
    exact = pages(http, f"{PREFIX}/namespaces", "namespaces", 5, parent=namespace)
    assert [len(p) for p in exact] == [5]


def test_table_paging(http: httpx.Client, namespace: str) -> None:
    names = [f"t{i}" for i in range(5)]
    for name in names:
        create_table(http, [namespace], name)
    url = f"{PREFIX}/namespaces/{namespace}/tables"
    got = pages(http, url, "identifiers", 2)
    assert [len(p) for p in got] == [2, 2, 1]
    assert [i["name"] for page in got for i in page] == names
    assert all(i["namespace"] == [namespace] for page in got for i in page)
    assert len(http.get(url).json()["identifiers"]) == 5
    # Views are listed separately from tables.
    assert http.get(f"{PREFIX}/namespaces/{namespace}/views").json()["identifiers"] == []


@pytest.mark.parametrize(
    "query", [{"pageSize": "0"}, {"pageSize": "-1"}, {"pageSize": "abc"}, {"pageToken": "@@"}]
)
def test_bad_paging_parameters(http: httpx.Client, namespace: str, query: dict[str, str]) -> None:
    assert_error(http.get(f"{PREFIX}/namespaces", params=query), 400, "BadRequestException")
    assert_error(
        http.get(f"{PREFIX}/namespaces/{namespace}/tables", params=query), 400, "BadRequestException"
    )


# -- loadTable: ETag and snapshots ---------------------------------------------------------------------


def test_etag_and_if_none_match(http: httpx.Client, namespace: str) -> None:
    create_table(http, [namespace], "t")
    url = table_path([namespace], "t")
    first = http.get(url)
    etag = first.headers["ETag"]
    assert etag.startswith('"')
    assert etag.endswith('"')
    unchanged = http.get(url, headers={"If-None-Match": etag})
    assert unchanged.status_code == 304
    assert unchanged.content == b""
    assert http.get(url, headers={"If-None-Match": '"something-else"'}).status_code == 200
    assert http.get(url, headers={"If-None-Match": f'"x", {etag}'}).status_code == 304

    response = commit(http, [namespace], "t", [], [{"action": "set-properties", "updates": {"v": "2"}}])
    assert response.status_code == 200, response.text
    changed = http.get(url, headers={"If-None-Match": etag})
    assert changed.status_code == 200
    assert changed.headers["ETag"] != etag
    assert changed.json()["metadata"]["properties"]["v"] == "2"
    assert http.get(url, headers={"If-None-Match": changed.headers["ETag"]}).status_code == 304
    # The ETag covers the snapshots mode: a `refs` load is a different representation.
    refs = http.get(url, params={"snapshots": "refs"})
    assert refs.headers["ETag"] != changed.headers["ETag"]
    # A dropped table is not "not modified".
    assert http.delete(url).status_code == 204
    assert_error(http.get(url, headers={"If-None-Match": etag}), 404, "NoSuchTableException")


def test_snapshots_refs(http: httpx.Client, namespace: str) -> None:
    levels = (namespace,)
    create_table(http, levels, "t")
    for snapshot_id in (1, 2, 3):
        append_snapshot(http, levels, "t", snapshot_id)
    tag = commit(
        http,
        levels,
        "t",
        [],
        [{"action": "set-snapshot-ref", "ref-name": "v1", "type": "tag", "snapshot-id": 1}],
    )
    assert tag.status_code == 200, tag.text
    all_snapshots = http.get(table_path(levels, "t")).json()["metadata"]
    assert sorted(s["snapshot-id"] for s in all_snapshots["snapshots"]) == [1, 2, 3]
    refs = http.get(table_path(levels, "t"), params={"snapshots": "refs"}).json()["metadata"]
    assert sorted(s["snapshot-id"] for s in refs["snapshots"]) == [1, 3]
    assert refs["current-snapshot-id"] == 3
    assert set(refs["refs"]) == {"main", "v1"}
    assert_error(http.get(table_path(levels, "t"), params={"snapshots": "some"}), 400, "BadRequestException")


# -- commits -------------------------------------------------------------------------------------------


ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def all_requirements(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """One requirement of every type, each holding on `metadata`."""
    return [
        {"type": "assert-table-uuid", "uuid": metadata["table-uuid"]},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": metadata.get("current-snapshot-id")},
        {"type": "assert-last-assigned-field-id", "last-assigned-field-id": metadata["last-column-id"]},
        {"type": "assert-current-schema-id", "current-schema-id": metadata["current-schema-id"]},
        {
            "type": "assert-last-assigned-partition-id",
            "last-assigned-partition-id": metadata["last-partition-id"],
        },
        {"type": "assert-default-spec-id", "default-spec-id": metadata["default-spec-id"]},
        {"type": "assert-default-sort-order-id", "default-sort-order-id": metadata["default-sort-order-id"]},
    ]


def test_commit_with_every_requirement_type(http: httpx.Client, namespace: str) -> None:
    levels = (namespace,)
    create_table(http, levels, "t")
    append_snapshot(http, levels, "t", 11)
    metadata = load_table(http, levels, "t")["metadata"]
    response = commit(
        http, levels, "t", all_requirements(metadata), [{"action": "set-properties", "updates": {"ok": "1"}}]
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["metadata"]["properties"]["ok"] == "1"
    assert result["metadata-location"] == load_table(http, levels, "t")["metadata-location"]


@pytest.mark.parametrize(
    ("requirement", "message"),
    [
        ({"type": "assert-create"}, "Requirement failed: table already exists"),
        (
            {"type": "assert-table-uuid", "uuid": ZERO_UUID},
            "Requirement failed: UUID does not match: expected {uuid} != " + ZERO_UUID,
        ),
        (
            {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None},
            "Requirement failed: branch main was created concurrently",
        ),
        (
            {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 7},
            "Requirement failed: branch main has changed: expected id 7 != 11",
        ),
        (
            {"type": "assert-ref-snapshot-id", "ref": "dev", "snapshot-id": 1},
            "Requirement failed: branch or tag dev is missing, expected 1",
        ),
        (
            {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 1},
            "Requirement failed: last assigned field id changed: expected id 1 != 2",
        ),
        (
            {"type": "assert-current-schema-id", "current-schema-id": 1},
            "Requirement failed: current schema changed: expected id 1 != 0",
        ),
        (
            {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 1000},
            "Requirement failed: last assigned partition id changed: expected id 1000 != 999",
        ),
        (
            {"type": "assert-default-spec-id", "default-spec-id": 1},
            "Requirement failed: default partition spec changed: expected id 1 != 0",
        ),
        (
            {"type": "assert-default-sort-order-id", "default-sort-order-id": 1},
            "Requirement failed: default sort order changed: expected id 1 != 0",
        ),
    ],
)
def test_failing_requirement_is_a_commit_failure(
    http: httpx.Client, namespace: str, requirement: dict[str, Any], message: str
) -> None:
    levels = (namespace,)
    create_table(http, levels, "t")
    append_snapshot(http, levels, "t", 11)
    before = load_table(http, levels, "t")
    response = commit(
        http, levels, "t", [requirement], [{"action": "set-properties", "updates": {"changed": "yes"}}]
    )
    assert_error(
        response, 409, "CommitFailedException", message.format(uuid=before["metadata"]["table-uuid"])
    )
    after = load_table(http, levels, "t")
    assert after["metadata-location"] == before["metadata-location"]
    assert "changed" not in after["metadata"]["properties"]


def test_unknown_update_changes_nothing(http: httpx.Client, namespace: str) -> None:
    levels = (namespace,)
    before = create_table(http, levels, "t")
    bad_updates: list[list[dict[str, Any]]] = [
        [{"action": "set-properties", "updates": {"a": "1"}}, {"action": "delete-everything"}],
        [{"action": "set-properties", "updates": "a=1"}],
        [{"action": "add-snapshot"}],
        [{"no-action": True}],
        [{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 404}],
        [
            snapshot_update(5, 0, parent=None, location=before["metadata"]["location"]),
            snapshot_update(5, 1, parent=None, location=before["metadata"]["location"]),
        ],
    ]
    for updates in bad_updates:
        response = commit(http, levels, "t", [], updates)
        assert_error(response, 400, "BadRequestException")
    unknown_requirement = commit(http, levels, "t", [{"type": "assert-luck"}], [])
    assert_error(unknown_requirement, 400, "BadRequestException", "Unknown requirement type: assert-luck")
    after = load_table(http, levels, "t")
    assert after["metadata-location"] == before["metadata-location"]
    assert after["metadata"]["properties"] == before["metadata"]["properties"]


def test_commit_to_missing_table_or_namespace(http: httpx.Client, namespace: str) -> None:
    assert_error(commit(http, [namespace], "missing", [], []), 404, "NoSuchTableException")
    assert_error(commit(http, ["missing_ns_xyz"], "t", [], []), 404, "NoSuchNamespaceException")


def test_create_transaction_through_update_table(http: httpx.Client, namespace: str) -> None:
    """The Java client's `createTransaction`: `assert-create` plus the whole table as updates."""
    table_uuid = str(uuid.uuid4())
    updates: list[dict[str, Any]] = [
        {"action": "assign-uuid", "uuid": table_uuid},
        {"action": "upgrade-format-version", "format-version": 2},
        {"action": "add-schema", "schema": SCHEMA, "last-column-id": 2},
        {"action": "set-current-schema", "schema-id": -1},
        {
            "action": "add-spec",
            "spec": {
                "spec-id": 0,
                "fields": [{"source-id": 1, "field-id": 1000, "name": "id_bucket", "transform": "bucket[8]"}],
            },
        },
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-properties", "updates": {"created-by": "transaction"}},
    ]
    response = commit(http, [namespace], "created", [{"type": "assert-create"}], updates)
    assert response.status_code == 200, response.text
    metadata = load_table(http, [namespace], "created")["metadata"]
    assert metadata["table-uuid"] == table_uuid
    assert metadata["format-version"] == 2
    assert [s["schema-id"] for s in metadata["schemas"]] == [0]
    assert [f["name"] for f in metadata["schemas"][0]["fields"]] == ["id", "name"]
    assert [s["spec-id"] for s in metadata["partition-specs"]] == [0]
    assert metadata["partition-specs"][0]["fields"][0]["name"] == "id_bucket"
    assert metadata["properties"]["created-by"] == "transaction"
    assert metadata["location"].startswith("file://")
    again = commit(http, [namespace], "created", [{"type": "assert-create"}], updates)
    assert_error(again, 409, "CommitFailedException", "Requirement failed: table already exists")


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("/namespaces", b'{"namespace": ["a"'),
        ("/namespaces", b"not json"),
        ("/namespaces/{ns}/tables", b'{"name": "t", "schema": '),
        ("/namespaces/{ns}/tables/t", b"{"),
        ("/namespaces/{ns}/tables/t", b"\xff\xfe"),
        ("/namespaces/{ns}/properties", b"[1, 2"),
        ("/tables/rename", b"{]"),
        ("/transactions/commit", b"nope"),
        ("/namespaces/{ns}/views", b'{"name": '),
    ],
)
def test_malformed_json_is_a_bad_request(
    http: httpx.Client, namespace: str, path: str, content: bytes
) -> None:
    create_table(http, [namespace], "t")
    response = http.post(
        PREFIX + path.format(ns=namespace), content=content, headers={"Content-Type": "application/json"}
    )
    assert_error(response, 400, "BadRequestException")
    assert load_table(http, [namespace], "t")["metadata"]["properties"] == NEW_TABLE_PROPERTIES


def test_oversized_body_is_refused(http: httpx.Client, namespace: str) -> None:
    limit = 16 * 1024 * 1024
    big = b'{"namespace": ["' + b"x" * (limit + 1) + b'"]}'
    response = http.post(f"{PREFIX}/namespaces", content=big, headers={"Content-Type": "application/json"})
    assert_error(response, 413, "BadRequestException")
    # The server is still healthy and nothing was created.
    assert http.get(f"{PREFIX}/namespaces/{namespace}").status_code == 200


# -- multi-table transactions --------------------------------------------------------------------------


def table_change(levels: list[str], name: str, requirements: list[Any], updates: list[Any]) -> dict[str, Any]:
    return {
        "identifier": {"namespace": levels, "name": name},
        "requirements": requirements,
        "updates": updates,
    }


def test_multi_table_transaction_is_all_or_nothing(http: httpx.Client, namespace: str) -> None:
    levels = [namespace]
    a, b = create_table(http, levels, "a"), create_table(http, levels, "b")
    url = f"{PREFIX}/transactions/commit"
    ok = http.post(
        url,
        json={
            "table-changes": [
                table_change(levels, "a", all_requirements(a["metadata"]), [set_prop("step", "1")]),
                table_change(levels, "b", all_requirements(b["metadata"]), [set_prop("step", "1")]),
            ]
        },
    )
    assert ok.status_code == 204, ok.text
    a1, b1 = load_table(http, levels, "a"), load_table(http, levels, "b")
    assert a1["metadata"]["properties"]["step"] == b1["metadata"]["properties"]["step"] == "1"

    # The second change's requirement fails: the first table must not change either.
    failing = http.post(
        url,
        json={
            "table-changes": [
                table_change(levels, "a", [], [set_prop("step", "2")]),
                table_change(
                    levels,
                    "b",
                    [{"type": "assert-current-schema-id", "current-schema-id": 1}],
                    [set_prop("step", "2")],
                ),
            ]
        },
    )
    assert_error(
        failing,
        409,
        "CommitFailedException",
        "Requirement failed: current schema changed: expected id 1 != 0",
    )
    # An invalid update in one change: nothing lands either.
    invalid = http.post(
        url,
        json={
            "table-changes": [
                table_change(levels, "a", [], [set_prop("step", "3")]),
                table_change(levels, "b", [], [{"action": "bogus"}]),
            ]
        },
    )
    assert_error(invalid, 400, "BadRequestException")
    # A missing table in the transaction: nothing lands.
    missing = http.post(
        url,
        json={
            "table-changes": [
                table_change(levels, "a", [], [set_prop("step", "4")]),
                table_change(levels, "nope", [], [set_prop("step", "4")]),
            ]
        },
    )
    assert_error(missing, 404, "NoSuchTableException")
    for name, before in (("a", a1), ("b", b1)):
        after = load_table(http, levels, name)
        assert after["metadata-location"] == before["metadata-location"]
        assert after["metadata"]["properties"]["step"] == "1"


def set_prop(key: str, value: str) -> dict[str, Any]:
    return {"action": "set-properties", "updates": {key: value}}


def test_invalid_transactions(http: httpx.Client, namespace: str) -> None:
    create_table(http, [namespace], "a")
    url = f"{PREFIX}/transactions/commit"
    twice = [table_change([namespace], "a", [], [set_prop("x", "1")])] * 2
    assert_error(http.post(url, json={"table-changes": twice}), 400, "BadRequestException")
    assert_error(http.post(url, json={"table-changes": []}), 400, "BadRequestException")
    assert_error(http.post(url, json={}), 400, "BadRequestException")
    no_identifier = [{"requirements": [], "updates": [set_prop("x", "1")]}]
    assert_error(http.post(url, json={"table-changes": no_identifier}), 400, "BadRequestException")


# -- rename, drop, unregister --------------------------------------------------------------------------


def rename(
    http: httpx.Client, kind: str, source: tuple[list[str], str], dest: tuple[list[str], str]
) -> httpx.Response:
    return http.post(
        f"{PREFIX}/{kind}/rename",
        json={
            "source": {"namespace": source[0], "name": source[1]},
            "destination": {"namespace": dest[0], "name": dest[1]},
        },
    )


def test_rename_table(http: httpx.Client, namespace: str) -> None:
    levels = [namespace]
    create_namespace(http, namespace, "other")
    created = create_table(http, levels, "t")
    create_table(http, levels, "taken")
    assert (
        http.post(
            f"{PREFIX}/namespaces/{namespace}/views", json=view_body("a_view", (namespace,))
        ).status_code
        == 200
    )

    assert_error(rename(http, "tables", (levels, "missing"), (levels, "x")), 404, "NoSuchTableException")
    assert_error(rename(http, "tables", (levels, "t"), (["nope_ns"], "x")), 404, "NoSuchNamespaceException")
    assert_error(rename(http, "tables", (levels, "t"), (levels, "taken")), 409, "AlreadyExistsException")
    assert_error(rename(http, "tables", (levels, "t"), (levels, "a_view")), 409, "AlreadyExistsException")
    assert_error(rename(http, "tables", (levels, "a_view"), (levels, "x")), 404, "NoSuchTableException")

    moved = rename(http, "tables", (levels, "t"), ([namespace, "other"], "moved"))
    assert moved.status_code == 204, moved.text
    assert_error(http.get(table_path(levels, "t")), 404, "NoSuchTableException")
    loaded = load_table(http, [namespace, "other"], "moved")
    assert loaded["metadata"]["table-uuid"] == created["metadata"]["table-uuid"]


def test_rename_view(http: httpx.Client, namespace: str) -> None:
    levels = [namespace]
    for name in ("v", "taken"):
        response = http.post(f"{PREFIX}/namespaces/{namespace}/views", json=view_body(name, (namespace,)))
        assert response.status_code == 200, response.text
    create_table(http, levels, "a_table")
    assert_error(rename(http, "views", (levels, "missing"), (levels, "x")), 404, "NoSuchViewException")
    assert_error(rename(http, "views", (levels, "v"), (["nope_ns"], "x")), 404, "NoSuchNamespaceException")
    assert_error(rename(http, "views", (levels, "v"), (levels, "taken")), 409, "AlreadyExistsException")
    assert_error(rename(http, "views", (levels, "v"), (levels, "a_table")), 409, "AlreadyExistsException")
    assert rename(http, "views", (levels, "v"), (levels, "renamed")).status_code == 204
    assert http.get(f"{PREFIX}/namespaces/{namespace}/views/renamed").status_code == 200
    assert_error(http.get(f"{PREFIX}/namespaces/{namespace}/views/v"), 404, "NoSuchViewException")


def test_drop_namespace_that_is_not_empty(http: httpx.Client, namespace: str) -> None:
    url = f"{PREFIX}/namespaces/{namespace}"
    create_table(http, [namespace], "t")
    assert_error(http.delete(url), 409, "NamespaceNotEmptyException")
    assert http.delete(table_path([namespace], "t")).status_code == 204
    create_namespace(http, namespace, "child")
    assert_error(http.delete(url), 409, "NamespaceNotEmptyException")
    assert http.delete(f"{PREFIX}/namespaces/{ns_path(namespace, 'child')}").status_code == 204
    assert http.delete(url).status_code == 204
    assert_error(http.get(url), 404, "NoSuchNamespaceException")
    assert_error(http.delete(url), 404, "NoSuchNamespaceException")
    assert http.head(url).status_code == 404


def test_conflicts_are_worded_as_the_reference_words_them(http: httpx.Client, namespace: str) -> None:
    """The Java client and the REST compatibility kit match these texts and types."""
    levels = [namespace]
    views = f"{PREFIX}/namespaces/{namespace}/views"
    assert http.post(views, json=view_body("v", (namespace,))).status_code == 200
    table = create_table(http, levels, "t")
    ns = namespace
    assert_error(
        rename(http, "tables", (levels, "t"), (levels, "v")),
        409,
        "AlreadyExistsException",
        f"Cannot rename {ns}.t to {ns}.v. View already exists",
    )
    assert_error(
        rename(http, "views", (levels, "v"), (levels, "t")),
        409,
        "AlreadyExistsException",
        f"Cannot rename {ns}.v to {ns}.t. Table already exists",
    )
    create = [{"type": "assert-create"}]
    assert_error(
        commit(http, levels, "v", create, []),
        409,
        "AlreadyExistsException",
        (f"View with same name already exists: {ns}.v"),
    )
    register = {"name": "v", "metadata-location": table["metadata-location"]}
    assert_error(
        http.post(f"{PREFIX}/namespaces/{namespace}/register", json=register),
        409,
        "AlreadyExistsException",
        f"View with same name already exists: {ns}.v",
    )
    view = http.get(f"{views}/v").json()
    register_view = {"name": "t", "metadata-location": view["metadata-location"]}
    assert_error(
        http.post(f"{PREFIX}/namespaces/{namespace}/register-view", json=register_view),
        409,
        "AlreadyExistsException",
        f"Table with same name already exists: {ns}.t",
    )
    # loadView's only 404 is NoSuchViewException, even when the namespace is missing.
    assert_error(
        http.get(f"{PREFIX}/namespaces/missing_ns_for_views/views/v"),
        404,
        "NoSuchViewException",
        "View does not exist: missing_ns_for_views.v",
    )


def test_unregister_keeps_files(http: httpx.Client, namespace: str) -> None:
    created = create_table(http, [namespace], "t")
    location = created["metadata-location"]
    assert file_path(location).exists()
    response = http.post(table_path([namespace], "t") + "/unregister")
    assert response.status_code == 200, response.text
    # The spec's `UnregisterTableResult`: the table's last metadata, to register it again later.
    assert response.json()["metadata-location"] == location
    assert response.json()["metadata"]["table-uuid"] == created["metadata"]["table-uuid"]
    assert_error(http.get(table_path([namespace], "t")), 404, "NoSuchTableException")
    assert file_path(location).exists(), "unregister must keep the table's files"
    assert_error(http.post(table_path([namespace], "t") + "/unregister"), 404, "NoSuchTableException")
    # The kept files can be registered again.
    registered = http.post(
        f"{PREFIX}/namespaces/{namespace}/register", json={"name": "back", "metadata-location": location}
    )
    assert registered.status_code == 200, registered.text
    assert (
        load_table(http, [namespace], "back")["metadata"]["table-uuid"] == created["metadata"]["table-uuid"]
    )


def test_drop_missing_table(http: httpx.Client, namespace: str) -> None:
    assert_error(http.delete(table_path([namespace], "missing")), 404, "NoSuchTableException")
    assert_error(http.delete(table_path(["missing_ns_q"], "missing")), 404, "NoSuchNamespaceException")
    assert http.head(table_path([namespace], "missing")).status_code == 404


# -- metrics and credentials ---------------------------------------------------------------------------

SCAN_REPORT: dict[str, Any] = {
    "report-type": "scan-report",
    "table-name": "t",
    "snapshot-id": 1,
    "filter": True,
    "schema-id": 0,
    "projected-field-ids": [1],
    "projected-field-names": ["id"],
    "metrics": {"total-planning-duration": {"count": 1, "time-unit": "nanoseconds", "total-duration": 5}},
}


async def stored_reports(database_url: str, namespace: str, table: str) -> list[dict[str, Any]]:
    store = create_store(database_url, pool_size=1)
    try:
        warehouse = await store.get_warehouse("default")
        assert warehouse is not None
        record = await store.get_tabular(warehouse.id, namespace, table)
        assert record is not None
        return await store.list_metrics_reports(record.id)
    finally:
        await store.close()


def test_report_metrics(http: httpx.Client, catalog_server: CatalogProcess, namespace: str) -> None:
    create_table(http, [namespace], "t")
    url = table_path([namespace], "t") + "/metrics"
    response = http.post(url, json=SCAN_REPORT)
    assert response.status_code == 204, response.text
    commit_report = {
        "report-type": "commit-report",
        "table-name": "t",
        "snapshot-id": 1,
        "sequence-number": 1,
        "operation": "append",
        "metrics": {},
    }
    assert http.post(url, json=commit_report).status_code == 204
    assert catalog_server.database_url is not None
    reports = asyncio.run(stored_reports(catalog_server.database_url, namespace, "t"))
    assert [r["report-type"] for r in reports] == ["scan-report", "commit-report"]
    assert reports[0]["metrics"] == SCAN_REPORT["metrics"]

    assert_error(http.post(url, json={"report-type": "mood-report"}), 400, "BadRequestException")
    # A table inside an uncommitted create transaction has no row yet: its reports are accepted (as the
    # reference server accepts them) and not kept; a missing namespace is still a 404.
    staged = http.post(
        f"{PREFIX}/namespaces/{namespace}/tables",
        json={"name": "staged", "schema": SCHEMA, "stage-create": True},
    )
    assert staged.status_code == 200, staged.text
    assert http.post(table_path([namespace], "staged") + "/metrics", json=SCAN_REPORT).status_code == 204
    assert http.head(table_path([namespace], "staged")).status_code == 404
    missing_ns = http.post(table_path(["missing_ns_metrics"], "t") + "/metrics", json=SCAN_REPORT)
    assert_error(missing_ns, 404, "NoSuchNamespaceException")


def test_credentials(http: httpx.Client, namespace: str) -> None:
    create_table(http, [namespace], "t")
    response = http.get(table_path([namespace], "t") + "/credentials")
    assert response.status_code == 200
    assert response.json() == {"storage-credentials": []}
    assert_error(http.get(table_path([namespace], "nope") + "/credentials"), 404, "NoSuchTableException")


# -- client errors are never 5xx -----------------------------------------------------------------------

ODD_BODIES: list[Any] = [
    None,
    [],
    "text",
    42,
    {},
    {"namespace": 5},
    {"name": 5, "schema": "x"},
    {"name": "t", "schema": {"type": "struct", "fields": "x"}},
    {"name": "t", "schema": {"type": "struct", "fields": [{"id": "a"}]}},
    {"requirements": "x", "updates": {}},
    {"requirements": [None], "updates": [None]},
    {"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": None}}]},
    {"requirements": [], "updates": [{"action": "remove-properties", "removals": "a"}]},
    {"requirements": [], "updates": [{"action": "add-schema", "schema": {"fields": 3}}]},
    {"requirements": [{"type": "assert-table-uuid"}], "updates": []},
    {"requirements": [{"type": "assert-ref-snapshot-id", "ref": 5, "snapshot-id": "x"}], "updates": []},
    {"table-changes": [{"identifier": {"namespace": "x", "name": "t"}}]},
    {"table-changes": [{"identifier": {"namespace": [], "name": ""}}]},
    {"source": {"namespace": [], "name": ""}, "destination": {}},
    {"removals": [1], "updates": {"a": 1}},
    {"name": "v", "schema": {}, "view-version": "x"},
    {"name": "v", "metadata-location": "file:///nonexistent/x.metadata.json"},
    {"report-type": "scan-report", "metrics": "x"},
]


def test_client_errors_are_never_server_errors(http: httpx.Client, namespace: str) -> None:
    create_table(http, [namespace], "t")
    paths = [
        "/namespaces",
        f"/namespaces/{namespace}/properties",
        f"/namespaces/{namespace}/tables",
        f"/namespaces/{namespace}/tables/t",
        f"/namespaces/{namespace}/tables/t/metrics",
        f"/namespaces/{namespace}/register",
        f"/namespaces/{namespace}/views",
        f"/namespaces/{namespace}/register-view",
        "/tables/rename",
        "/views/rename",
        "/transactions/commit",
    ]
    for path in paths:
        for body in ODD_BODIES:
            response = http.post(PREFIX + path, json=body)
            assert response.status_code < 500, (path, body, response.text)
            if response.status_code >= 400:
                assert_error(response, response.status_code, response.json()["error"]["type"])
    assert load_table(http, [namespace], "t")["metadata"]["properties"] == NEW_TABLE_PROPERTIES
