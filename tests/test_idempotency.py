"""`Idempotency-Key` on mutations: a retry replays the first final response and is never applied twice.

Finalized (stored and replayed): 2xx and 4xx. Not finalized: 5xx, so the client may retry those.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import httpx
import pytest

from catalog.dev.server import CatalogProcess
from tests.test_rest_api import (
    PREFIX,
    SCHEMA,
    assert_error,
    commit,
    create_table,
    file_path,
    load_table,
    set_prop,
    snapshot_update,
    table_path,
)


def new_key() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


def metadata_files(metadata_location: str) -> list[Path]:
    return sorted(file_path(metadata_location).parent.glob("*.metadata.json"))


def test_config_advertises_the_key_lifetime(http: httpx.Client) -> None:
    assert http.get("/v1/config").json()["idempotency-key-lifetime"] == "PT30M"


def test_create_namespace_retry_replays_the_first_response(http: httpx.Client) -> None:
    name = f"idem_{uuid.uuid4().hex[:8]}"
    key = new_key()
    body = {"namespace": [name], "properties": {"owner": "a"}}
    first = http.post(f"{PREFIX}/namespaces", json=body, headers=key)
    assert first.status_code == 200, first.text
    retry = http.post(f"{PREFIX}/namespaces", json=body, headers=key)
    assert retry.status_code == first.status_code
    assert retry.content == first.content
    assert retry.headers["content-type"].startswith("application/json")
    # Without the key (or with a new one) the same request is a new operation: it already exists.
    assert_error(http.post(f"{PREFIX}/namespaces", json=body), 409, "AlreadyExistsException")
    assert_error(
        http.post(f"{PREFIX}/namespaces", json=body, headers=new_key()), 409, "AlreadyExistsException"
    )


def test_create_table_retry_creates_one_table(http: httpx.Client, namespace: str) -> None:
    key = new_key()
    url = f"{PREFIX}/namespaces/{namespace}/tables"
    first = http.post(url, json={"name": "t", "schema": SCHEMA}, headers=key)
    assert first.status_code == 200, first.text
    retry = http.post(url, json={"name": "t", "schema": SCHEMA}, headers=key)
    assert retry.status_code == 200
    assert retry.content == first.content
    location = first.json()["metadata-location"]
    assert load_table(http, [namespace], "t")["metadata-location"] == location
    assert metadata_files(location) == [file_path(location)]
    assert http.get(url).json()["identifiers"] == [{"namespace": [namespace], "name": "t"}]


def test_commit_retry_is_applied_once(http: httpx.Client, namespace: str) -> None:
    created = create_table(http, [namespace], "t")
    key = new_key()
    updates = [
        set_prop("written-by", "retry-test"),
        snapshot_update(1, 1, parent=None),
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 1},
    ]
    requirements = [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}]
    first = commit(http, [namespace], "t", requirements, updates, headers=key)
    assert first.status_code == 200, first.text
    for _ in range(3):
        retry = commit(http, [namespace], "t", requirements, updates, headers=key)
        assert retry.status_code == 200
        assert retry.content == first.content
    loaded = load_table(http, [namespace], "t")
    assert loaded["metadata-location"] == first.json()["metadata-location"]
    assert len(loaded["metadata"]["metadata-log"]) == 1, "one metadata version after the create"
    assert [s["snapshot-id"] for s in loaded["metadata"]["snapshots"]] == [1]
    assert len(metadata_files(created["metadata-location"])) == 2
    # Without the key the same commit is a new operation and its requirement no longer holds.
    assert_error(
        commit(http, [namespace], "t", requirements, updates),
        409,
        "CommitFailedException",
        "Requirement failed: branch main was created concurrently",
    )


def test_client_error_is_finalized(http: httpx.Client, namespace: str) -> None:
    """A 4xx is final: replayed even when the same request would now succeed."""
    create_table(http, [namespace], "t")
    key = new_key()
    requirements = [{"type": "assert-current-schema-id", "current-schema-id": 1}]
    first = commit(http, [namespace], "t", requirements, [set_prop("x", "1")], headers=key)
    assert_error(first, 409, "CommitFailedException")
    evolved = {
        **SCHEMA,
        "schema-id": 1,
        "fields": [*SCHEMA["fields"], {"id": 3, "name": "z", "type": "int", "required": False}],
    }
    evolve = commit(
        http,
        [namespace],
        "t",
        [],
        [
            {"action": "add-schema", "schema": evolved, "last-column-id": 3},
            {"action": "set-current-schema", "schema-id": -1},
        ],
    )
    assert evolve.status_code == 200, evolve.text
    retry = commit(http, [namespace], "t", requirements, [set_prop("x", "1")], headers=key)
    assert retry.status_code == 409
    assert retry.content == first.content
    assert "x" not in load_table(http, [namespace], "t")["metadata"]["properties"]


def test_drop_retry_replays_success(http: httpx.Client, namespace: str) -> None:
    create_table(http, [namespace], "t")
    key = new_key()
    assert http.delete(table_path([namespace], "t"), headers=key).status_code == 204
    retry = http.delete(table_path([namespace], "t"), headers=key)
    assert retry.status_code == 204
    assert retry.content == b""
    assert_error(http.delete(table_path([namespace], "t")), 404, "NoSuchTableException")


@pytest.mark.parametrize("kind", ["create-table", "commit"])
def test_concurrent_duplicates_apply_once(http: httpx.Client, namespace: str, kind: str) -> None:
    threads = 8
    key = new_key()
    if kind == "commit":
        create_table(http, [namespace], "t")
        url = table_path([namespace], "t")
        body: dict[str, object] = {
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}],
            "updates": [
                snapshot_update(1, 1, parent=None),
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 1},
            ],
        }
    else:
        url = f"{PREFIX}/namespaces/{namespace}/tables"
        body = {"name": "t", "schema": SCHEMA}
    barrier = threading.Barrier(threads)
    responses: list[httpx.Response] = []
    lock = threading.Lock()

    def send() -> None:
        with httpx.Client(base_url=str(http.base_url), timeout=60, headers=http.headers) as client:
            barrier.wait()
            response = client.post(url, json=body, headers=key)
        with lock:
            responses.append(response)

    workers = [threading.Thread(target=send) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(responses) == threads
    assert {r.status_code for r in responses} == {200}, [r.text for r in responses if r.status_code != 200]
    assert len({r.content for r in responses}) == 1, "every duplicate gets the first response"
    loaded = load_table(http, [namespace], "t")
    assert loaded["metadata-location"] == responses[0].json()["metadata-location"]
    expected_versions = 2 if kind == "commit" else 1
    assert len(metadata_files(loaded["metadata-location"])) == expected_versions


def test_key_reused_for_a_different_route_is_refused(http: httpx.Client, namespace: str) -> None:
    key = new_key()
    name = f"idem_{uuid.uuid4().hex[:8]}"
    assert http.post(f"{PREFIX}/namespaces", json={"namespace": [name]}, headers=key).status_code == 200
    other = http.post(
        f"{PREFIX}/namespaces/{namespace}/tables", json={"name": "t", "schema": SCHEMA}, headers=key
    )
    assert 400 <= other.status_code < 500
    assert_error(other, other.status_code, "BadRequestException")
    assert_error(http.get(table_path([namespace], "t")), 404, "NoSuchTableException")
    # The key still replays its own first response.
    again = http.post(f"{PREFIX}/namespaces", json={"namespace": [name]}, headers=key)
    assert again.status_code == 200


def test_invalid_key_is_refused(http: httpx.Client, namespace: str) -> None:
    response = http.post(
        f"{PREFIX}/namespaces/{namespace}/tables",
        json={"name": "t", "schema": SCHEMA},
        headers={"Idempotency-Key": "k" * 65},
    )
    assert_error(response, 400, "BadRequestException")
    assert_error(http.get(table_path([namespace], "t")), 404, "NoSuchTableException")


def test_reads_ignore_the_key(http: httpx.Client, namespace: str) -> None:
    create_table(http, [namespace], "t")
    key = new_key()
    assert http.get(table_path([namespace], "t"), headers=key).status_code == 200
    # The key was not consumed by the read: a mutation can still use it.
    response = commit(http, [namespace], "t", [], [set_prop("a", "1")], headers=key)
    assert response.status_code == 200, response.text


def test_server_error_is_not_finalized(
    http: httpx.Client, catalog_server: CatalogProcess, namespace: str
) -> None:
    """A 5xx is not stored: the retry with the same key runs again and can succeed."""
    blocker = catalog_server.home / f"blocker-{uuid.uuid4().hex[:8]}"
    blocker.write_text("a file where the table's folder should go")
    key = new_key()
    body = {"name": "t", "schema": SCHEMA, "location": f"{blocker.as_uri()}/t"}
    url = f"{PREFIX}/namespaces/{namespace}/tables"
    failed = http.post(url, json=body, headers=key)
    assert failed.status_code >= 500
    assert_error(failed, failed.status_code, failed.json()["error"]["type"])
    assert_error(http.get(table_path([namespace], "t")), 404, "NoSuchTableException")
    blocker.unlink()
    retry = http.post(url, json=body, headers=key)
    assert retry.status_code == 200, retry.text
    assert load_table(http, [namespace], "t")["metadata"]["location"] == f"{blocker.as_uri()}/t"
    again = http.post(url, json=body, headers=key)
    assert again.status_code == 200
    assert again.content == retry.content
