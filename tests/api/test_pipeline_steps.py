"""The request pipeline's steps run once, in order, before Litestar (catalog/api/pipeline.py): audit →
authentication → idempotency → handler, for the operation floe's route table finds."""

from __future__ import annotations

import uuid

import httpx

from devtools.catalog_server import CatalogProcess
from tests.api.test_commit_records import entries_of


def test_authentication_comes_before_idempotency_and_is_audited(
    catalog_server: CatalogProcess, namespace: str, database_url: str
) -> None:
    # A key the idempotency step would refuse (over 64 characters): the caller is refused first.
    response = httpx.delete(
        f"{catalog_server.url}/v1/default/namespaces/{namespace}/tables/t",
        headers={"Idempotency-Key": "k" * 65, "X-Request-Id": f"steps-{uuid.uuid4().hex}"},
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="floe"'
    # Recorded under the operation the route table found, before Litestar ran.
    assert entries_of(database_url, response.headers["x-request-id"]) == [("dropTable", "denied", 401)]


def test_an_authenticated_mutation_runs_every_step_once(
    http: httpx.Client, namespace: str, database_url: str
) -> None:
    key = str(uuid.uuid4())
    path = f"/v1/default/namespaces/{namespace}/properties"
    body = {"updates": {"steps": "1"}, "removals": []}
    first = http.post(path, json=body, headers={"Idempotency-Key": key})
    assert first.status_code == 200, first.text
    replay = http.post(path, json=body, headers={"Idempotency-Key": key})
    assert (replay.status_code, replay.json()) == (200, first.json())
    assert entries_of(database_url, first.headers["x-request-id"]) == [("updateProperties", "ok", 200)]
    assert entries_of(database_url, replay.headers["x-request-id"]) == [("updateProperties", "ok", 200)]
    refused = http.post(path, json=body, headers={"Idempotency-Key": "k" * 65})
    assert refused.status_code == 400
    assert entries_of(database_url, refused.headers["x-request-id"]) == [("updateProperties", "failed", 400)]


def test_requests_no_route_serves_are_neither_authenticated_nor_audited(
    catalog_server: CatalogProcess, database_url: str
) -> None:
    for method, path, status in [
        ("POST", "/no/such/route", 404),
        ("DELETE", "/v1/oauth/tokens", 405),
        ("POST", "/v1/default/namespaces/n/tables/t/nothing", 404),
    ]:
        response = httpx.request(method, f"{catalog_server.url}{path}")
        assert response.status_code == status, (method, path)
        assert entries_of(database_url, response.headers["x-request-id"]) == [], (method, path)
    # Litestar routes `/v1/config/namespaces` to listNamespaces (a warehouse named `config`): so does
    # the route table, which asks for a token first.
    assert httpx.get(f"{catalog_server.url}/v1/config/namespaces").status_code == 401
