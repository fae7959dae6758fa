"""`Idempotency-Key` on mutations: a retry replays the first final response and is never applied twice.

Finalized (stored and replayed): 2xx and 4xx. Not finalized: 5xx, so the client may retry those.
Keys belong to their caller, responses carrying secrets are never stored, and a key left pending by a
crashed server is taken over once its lease runs out (a real crash, kill -9, is in tests/e2e).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from catalog.api.middleware import IDEMPOTENCY_LEASE_SECONDS, idempotency_identity
from catalog.migrations import alembic_config, upgrade_database
from catalog.store.schema import idempotency_keys
from devtools.catalog_server import CatalogProcess
from tests.api.test_rest_api import (
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
        snapshot_update(1, 1, parent=None, location=created["metadata"]["location"]),
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
        created = create_table(http, [namespace], "t")
        url = table_path([namespace], "t")
        body: dict[str, object] = {
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}],
            "updates": [
                snapshot_update(1, 1, parent=None, location=created["metadata"]["location"]),
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
    # Inside the warehouse (locations outside it are refused before any I/O: test_confinement.py).
    blocker = catalog_server.warehouse_path.resolve() / f"blocker-{uuid.uuid4().hex[:8]}"
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


# -- helpers for the tests below ---------------------------------------------------------------------


def run_sql(url: str, statement: Any) -> list[Any]:
    """Run one statement on the catalog database, as another process (or a crashed server) would."""

    async def run() -> list[Any]:
        engine = create_async_engine(url, poolclass=NullPool)
        try:
            async with engine.begin() as conn:
                result = await conn.execute(statement)
                return list(result.all()) if result.returns_rows else []
        finally:
            await engine.dispose()

    return asyncio.run(run())


def stored_rows(url: str | None) -> list[Any]:
    assert url is not None
    return run_sql(url, sa.select(idempotency_keys))


def wait_for(condition: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def create_cluster(http: httpx.Client) -> str:
    name = f"kafka_{uuid.uuid4().hex[:8]}"
    response = http.post("/management/v1/clusters", json={"name": name})
    assert response.status_code == 201, response.text
    return name


def create_api_key(http: httpx.Client, cluster: str | None, role: str) -> tuple[str, str]:
    response = http.post("/management/v1/keys", json={"cluster": cluster, "role": role})
    assert response.status_code == 201, response.text
    return response.json()["client_id"], response.json()["client_secret"]


def token(server: CatalogProcess, client_id: str, client_secret: str) -> str:
    return server.token(client_id, client_secret)


class SlowPost:
    """A POST whose body arrives in pieces: the server has claimed its key and waits for the rest."""

    def __init__(self, base_url: str, path: str, body: bytes, headers: dict[str, str]) -> None:
        parts = urlsplit(base_url)
        self.connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
        self.connection.putrequest("POST", path)
        for name, value in {
            **headers,
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
        }.items():
            self.connection.putheader(name, value)
        self.connection.endheaders()
        self.rest = body
        self.send(1)

    def send(self, count: int) -> None:
        self.connection.send(self.rest[:count])
        self.rest = self.rest[count:]

    def finish(self) -> tuple[int, bytes]:
        self.send(len(self.rest))
        response = self.connection.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.connection.close()


def admin_identity(server: CatalogProcess, key: str, path: str) -> tuple[str, str]:
    """The stored key and fingerprint of the bootstrap admin's POST to `path` with `key`."""
    return idempotency_identity(server.admin_client_id, None, key, "POST", path.encode())


# -- secrets are never stored or replayed ------------------------------------------------------------


def test_token_endpoint_ignores_the_key(catalog_server: CatalogProcess) -> None:
    """A victim's Idempotency-Key on the token endpoint gives nobody else the victim's token."""
    key = new_key()
    url = f"{catalog_server.url}/v1/oauth/tokens"
    form = {
        "grant_type": "client_credentials",
        "client_id": catalog_server.admin_client_id,
        "client_secret": catalog_server.admin_client_secret,
    }
    issued = httpx.post(url, data=form, headers=key)
    assert issued.status_code == 200, issued.text
    access_token = issued.json()["access_token"]
    wrong = httpx.post(url, data={**form, "client_secret": "not-the-secret"}, headers=key)
    assert wrong.status_code == 401
    anonymous = httpx.post(url, data={"grant_type": "client_credentials"}, headers=key)
    assert 400 <= anonymous.status_code < 500
    for response in (wrong, anonymous):
        assert access_token not in response.text
        assert "access_token" not in response.json()
    # Neither stored nor a key at all there: the same key still works for a mutation.
    assert not any(
        access_token in (row.response_body or "") for row in stored_rows(catalog_server.database_url)
    )
    again = httpx.post(url, data=form, headers=key)
    assert again.status_code == 200


def test_create_and_rotate_key_secrets_are_not_stored_or_replayed(
    http: httpx.Client, catalog_server: CatalogProcess
) -> None:
    cluster = create_cluster(http)
    create = new_key()
    body = {"cluster": cluster, "role": "reader"}
    first = http.post("/management/v1/keys", json=body, headers=create)
    assert first.status_code == 201, first.text
    client_id, secret = first.json()["client_id"], first.json()["client_secret"]
    retry = http.post("/management/v1/keys", json=body, headers=create)
    message = assert_error(retry, 409, "SecretNotReplayedException")
    assert "already succeeded" in message
    assert "201" in message
    assert secret not in retry.text
    keys = http.get("/management/v1/keys", params={"cluster": cluster}).json()["keys"]
    assert [k["client_id"] for k in keys] == [client_id], "the retry created no second key"

    rotate = new_key()
    rotated = http.post(f"/management/v1/keys/{client_id}/rotate", headers=rotate)
    assert rotated.status_code == 200, rotated.text
    new_secret = rotated.json()["client_secret"]
    retry = http.post(f"/management/v1/keys/{client_id}/rotate", headers=rotate)
    assert_error(retry, 409, "SecretNotReplayedException")
    assert new_secret not in retry.text
    assert token(catalog_server, client_id, new_secret), "the retry did not rotate the secret again"

    for row in stored_rows(catalog_server.database_url):
        assert secret not in (row.response_body or "")
        assert new_secret not in (row.response_body or "")
        assert "client_secret" not in (row.response_body or "")


# -- keys belong to their caller ---------------------------------------------------------------------


def test_keys_are_scoped_by_caller(http: httpx.Client, catalog_server: CatalogProcess) -> None:
    a, b = create_cluster(http), create_cluster(http)
    writer_a = bearer(token(catalog_server, *create_api_key(http, a, "writer")))
    writer_b = bearer(token(catalog_server, *create_api_key(http, b, "writer")))
    shared = new_key()
    # Another tenant using the same key for its own request is not refused (no 422) …
    first_a = http.post(
        f"{PREFIX}/namespaces/{a}/tables",
        json={"name": "t", "schema": SCHEMA},
        headers={**writer_a, **shared},
    )
    assert first_a.status_code == 200, first_a.text
    first_b = http.post(
        f"{PREFIX}/namespaces/{b}/tables",
        json={"name": "t", "schema": SCHEMA},
        headers={**writer_b, **shared},
    )
    assert first_b.status_code == 200, first_b.text
    assert first_b.json()["metadata-location"] != first_a.json()["metadata-location"]
    # … each replays only its own response …
    again_a = http.post(
        f"{PREFIX}/namespaces/{a}/tables",
        json={"name": "t", "schema": SCHEMA},
        headers={**writer_a, **shared},
    )
    assert again_a.content == first_a.content
    # … and sending the victim's key with the victim's request runs as the sender, replaying nothing.
    victim = new_key()
    created = http.post(
        f"{PREFIX}/namespaces/{a}/tables",
        json={"name": "u", "schema": SCHEMA},
        headers={**writer_a, **victim},
    )
    assert created.status_code == 200, created.text
    stolen = http.post(
        f"{PREFIX}/namespaces/{a}/tables",
        json={"name": "u", "schema": SCHEMA},
        headers={**writer_b, **victim},
    )
    assert 400 <= stolen.status_code < 500, stolen.text
    assert stolen.status_code != 422, stolen.text
    assert "metadata-location" not in stolen.text
    # The same caller reusing a key for another request is still refused.
    other = http.post(
        f"{PREFIX}/namespaces/{a}/tables/t", json={"updates": []}, headers={**writer_a, **shared}
    )
    assert_error(other, 422, "BadRequestException")


# -- a crashed owner does not wedge its key ----------------------------------------------------------


def test_key_left_pending_by_a_dead_owner_is_taken_over_once(
    http: httpx.Client, catalog_server: CatalogProcess, namespace: str
) -> None:
    """The row a crashed server leaves behind: pending, its lease about to run out. Concurrent retries
    wait for the lease, then exactly one of them takes the key over and the others get its response."""
    key = new_key()
    url = f"{PREFIX}/namespaces/{namespace}/tables"
    stored, fingerprint = admin_identity(catalog_server, key["Idempotency-Key"], url)
    now = datetime.now(UTC)
    assert catalog_server.database_url is not None
    run_sql(
        catalog_server.database_url,
        sa.insert(idempotency_keys).values(
            key=stored,
            fingerprint=fingerprint,
            state="pending",
            owner="crashed-host:4242/0123456789abcdef",
            lease_until=now + timedelta(seconds=1),
            created_at=now,
        ),
    )
    threads = 6
    barrier = threading.Barrier(threads)
    responses: list[httpx.Response] = []
    lock = threading.Lock()

    def send() -> None:
        with httpx.Client(base_url=str(http.base_url), timeout=60, headers=http.headers) as client:
            barrier.wait()
            response = client.post(url, json={"name": "t", "schema": SCHEMA}, headers=key)
        with lock:
            responses.append(response)

    started = time.monotonic()
    workers = [threading.Thread(target=send) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.monotonic() - started
    assert elapsed < 6, f"served after {elapsed:.1f} s"
    assert {r.status_code for r in responses} == {200}, [r.text for r in responses]
    assert len({r.content for r in responses}) == 1
    loaded = load_table(http, [namespace], "t")
    assert metadata_files(loaded["metadata-location"]) == [file_path(loaded["metadata-location"])]


def test_a_live_owner_keeps_its_key_past_the_lease(
    http: httpx.Client, catalog_server: CatalogProcess, admin_token: str
) -> None:
    """A request running longer than the lease renews it: a retry waits for it, it does not run twice."""
    name = f"idem_{uuid.uuid4().hex[:8]}"
    key = new_key()
    body = json.dumps({"namespace": [name]}).encode()
    slow = SlowPost(catalog_server.url, f"{PREFIX}/namespaces", body, {**bearer(admin_token), **key})
    try:
        stored, _ = admin_identity(catalog_server, key["Idempotency-Key"], f"{PREFIX}/namespaces")
        wait_for(lambda: any(r.key == stored for r in stored_rows(catalog_server.database_url)))
        retried: list[httpx.Response] = []
        retry = threading.Thread(
            target=lambda: retried.append(http.post(f"{PREFIX}/namespaces", content=body, headers=key))
        )
        retry.start()
        # Trickle the body for 1.5 leases; a byte a second keeps any idle timeout away.
        deadline = time.monotonic() + 1.5 * IDEMPOTENCY_LEASE_SECONDS
        while time.monotonic() < deadline and len(slow.rest) > 1:
            time.sleep(1)
            slow.send(1)
        assert retry.is_alive(), "the retry waits for the running request"
        status, content = slow.finish()
    finally:
        slow.close()
    retry.join()
    assert status == 200, content
    assert retried[0].status_code == 200, retried[0].text
    assert retried[0].content == content


# -- migration ---------------------------------------------------------------------------------------


def test_migration_0006_recreates_the_table(fresh_database_url: str) -> None:
    upgrade_database(fresh_database_url, "0005")
    run_sql(
        fresh_database_url,
        sa.text(
            "INSERT INTO idempotency_keys (key, fingerprint, state, created_at) "
            "VALUES ('k', 'f', 'pending', CURRENT_TIMESTAMP)"
        ),
    )
    upgrade_database(fresh_database_url, "0006")

    def columns() -> set[str]:
        async def read() -> set[str]:
            engine = create_async_engine(fresh_database_url, poolclass=NullPool)
            try:
                async with engine.connect() as conn:
                    return set(
                        await conn.run_sync(
                            lambda sync: {c["name"] for c in sa.inspect(sync).get_columns("idempotency_keys")}
                        )
                    )
            finally:
                await engine.dispose()

        return asyncio.run(read())

    assert columns() == {c.name for c in idempotency_keys.columns}
    assert stored_rows(fresh_database_url) == [], "keys stored before are dropped"
    command.downgrade(alembic_config(fresh_database_url), "0005")
    assert not columns() & {"owner", "lease_until"}
    upgrade_database(fresh_database_url, "0006")
    assert columns() == {c.name for c in idempotency_keys.columns}
