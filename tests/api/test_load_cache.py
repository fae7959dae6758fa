"""loadTable's hot path and its response cache: the same answers as the Litestar route, a commit from
another catalog process seen by the next load, 304 only for the current version, and nothing cached for
one caller served to a caller who may not see the table."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from devtools.catalog_server import CatalogProcess
from tests.api.catalog_thread import CatalogThread
from tests.api.test_security import bearer, new_cluster, new_key, token_for

# A query parameter the hot path does not know sends the request through Litestar's loadTable route.
VIA_LITESTAR = "via=litestar"
# Headers whose values differ between any two responses.
VARYING_HEADERS = {"date", "x-request-id", "server"}


def _set_property(client: httpx.Client, table_path: str, value: str) -> httpx.Response:
    body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": value}}]}
    return client.post(table_path, json=body)


def _compared(response: httpx.Response) -> tuple[int, dict[str, str], bytes]:
    headers = {k: v for k, v in response.headers.items() if k not in VARYING_HEADERS}
    return response.status_code, headers, response.content


def test_hot_path_answers_as_the_litestar_route(
    catalog_server: CatalogProcess, http: httpx.Client, namespace: str
) -> None:
    catalog_server.catalog().create_table(f"{namespace}.t", schema=pa.schema([("id", pa.int64())]))
    table = f"/v1/default/namespaces/{namespace}/tables/t"
    etag = http.get(table).headers["etag"]
    cluster = new_cluster(http)
    outsider = bearer(token_for(catalog_server, new_key(http, cluster, "reader")))
    cases: list[tuple[str, str, dict[str, str]]] = [
        (table, "", {}),
        (table, "snapshots=refs", {}),
        (table, "snapshots=all", {"If-None-Match": etag}),
        (table, "", {"If-None-Match": '"stale"'}),
        (table, "", {"If-None-Match": "*"}),
        (table, "snapshots=bogus", {}),
        (table, "", {"X-Iceberg-Access-Delegation": "vended-credentials"}),
        (f"/v1/default/namespaces/{namespace}/tables/missing", "", {}),
        (f"/v1/default/namespaces/{namespace}_missing/tables/t", "", {}),
        (f"/v1/nowhere/namespaces/{namespace}/tables/t", "", {}),
        (f"/v1/default/namespaces/{namespace}/tables/nul%00", "", {}),
        (table, "", outsider),
        (table, "", {"Authorization": "Bearer not-a-token"}),
        (table, "", {"Authorization": ""}),
        # listTables and listViews, with and without paging.
        (f"/v1/default/namespaces/{namespace}/tables", "", {}),
        (f"/v1/default/namespaces/{namespace}/views", "", {}),
        (f"/v1/default/namespaces/{namespace}/tables", "pageSize=1", {}),
        (f"/v1/default/namespaces/{namespace}/tables", "pageSize=1&pageToken=dA%3D%3D", {}),
        (f"/v1/default/namespaces/{namespace}/views", "pageToken=&pageSize=5", {}),
        (f"/v1/default/namespaces/{namespace}/tables", "pageSize=0", {}),
        (f"/v1/default/namespaces/{namespace}/tables", "pageSize=100000000000000000", {}),
        (f"/v1/default/namespaces/{namespace}/tables", "pageToken=%25%25", {}),
        (f"/v1/default/namespaces/{namespace}_missing/views", "pageSize=1", {}),
        (f"/v1/default/namespaces/{namespace}/views", "pageSize=1", outsider),
        (f"/v1/default/namespaces/{namespace}_missing/tables", "", {}),
        (f"/v1/default/namespaces/{namespace}/tables", "", outsider),
        (f"/v1/default/namespaces/{namespace}/tables", "", {"Authorization": "Bearer not-a-token"}),
        (f"/v1/default/namespaces/{cluster}/tables", "", outsider),
        (f"/v1/nowhere/namespaces/{namespace}/tables", "", {}),
    ]
    for path, query, headers in cases:
        hot = http.get(f"{path}?{query}" if query else path, headers=headers)
        reference = http.get(f"{path}?{query}&{VIA_LITESTAR}".replace("?&", "?"), headers=headers)
        assert _compared(hot) == _compared(reference), (path, query, headers)
        assert hot.headers["x-request-id"]
    # A page size Python would refuse to parse goes to Litestar: a 400 there too, not a 500.
    huge = http.get(f"/v1/default/namespaces/{namespace}/tables", params={"pageSize": "9" * 5000})
    assert huge.status_code == 400, huge.text
    lines = catalog_server.log_path.read_text().splitlines()
    logged = {json.loads(line).get("path") for line in lines if line.startswith("{")}
    assert "/v1/{prefix:str}/namespaces/{namespace:str}/tables/{table:str}" in logged
    assert "/v1/{prefix:str}/namespaces/{namespace:str}/tables" in logged
    assert "/v1/{prefix:str}/namespaces/{namespace:str}/views" in logged


def test_etag_is_current_until_a_commit(
    http: httpx.Client, catalog_server: CatalogProcess, namespace: str
) -> None:
    catalog_server.catalog().create_table(f"{namespace}.t", schema=pa.schema([("id", pa.int64())]))
    table = f"/v1/default/namespaces/{namespace}/tables/t"
    first = http.get(table)
    assert first.status_code == 200
    assert http.get(table, headers={"If-None-Match": first.headers["etag"]}).status_code == 304
    assert _set_property(http, table, "1").status_code == 200
    changed = http.get(table, headers={"If-None-Match": first.headers["etag"]})
    assert changed.status_code == 200
    assert changed.json()["metadata"]["properties"]["k"] == "1"
    assert changed.headers["etag"] != first.headers["etag"]
    assert http.get(table, headers={"If-None-Match": changed.headers["etag"]}).status_code == 304
    # The other snapshot mode is a different response with its own ETag.
    refs = http.get(f"{table}?snapshots=refs", headers={"If-None-Match": changed.headers["etag"]})
    assert refs.status_code == 200
    assert refs.headers["etag"] != changed.headers["etag"]


@pytest.fixture
def two_servers(fresh_database_url: str, tmp_path: Path) -> Iterator[tuple[CatalogProcess, CatalogProcess]]:
    """Two catalog servers (as two `floe serve` processes would be) on one database."""
    env = {"FLOE_ADMIN_CLIENT_ID": "floe-admin", "FLOE_ADMIN_CLIENT_SECRET": uuid.uuid4().hex}
    home = tmp_path / "home"
    with (
        CatalogThread(fresh_database_url, home=home, env=env) as one,
        CatalogThread(fresh_database_url, home=home, env=env) as two,
    ):
        yield one, two


def test_a_commit_through_another_server_is_seen_at_once(
    two_servers: tuple[CatalogProcess, CatalogProcess],
) -> None:
    one, two = two_servers
    one.catalog().create_namespace("ns")
    one.catalog().create_table("ns.t", schema=pa.schema([("id", pa.int64())]))
    table = "/v1/default/namespaces/ns/tables/t"
    with (
        httpx.Client(base_url=one.url, headers=bearer(one.token())) as via_one,
        httpx.Client(base_url=two.url, headers=bearer(two.token())) as via_two,
    ):
        for value in ("1", "2", "3"):
            before = via_one.get(table)  # cached by server one
            assert before.status_code == 200
            assert via_one.get(table).content == before.content
            committed = _set_property(via_two, table, value)
            assert committed.status_code == 200, committed.text
            after = via_one.get(table, headers={"If-None-Match": before.headers["etag"]})
            assert after.status_code == 200
            assert after.json()["metadata-location"] == committed.json()["metadata-location"]
            assert after.json()["metadata"]["properties"]["k"] == value
        # A table dropped through the other server is gone here too, cached or not.
        assert via_two.delete(table).status_code == 204
        assert via_one.get(table).status_code == 404


def test_cached_tables_stay_inside_their_cluster(catalog_server: CatalogProcess, http: httpx.Client) -> None:
    a, b = new_cluster(http), new_cluster(http)
    catalog_server.catalog().create_table(f"{a}.events", schema=pa.schema([("id", pa.int64())]))
    table = f"/v1/default/namespaces/{a}/tables/events"
    a_reader = bearer(token_for(catalog_server, new_key(http, a, "reader")))
    b_admin = bearer(token_for(catalog_server, new_key(http, b, "admin")))
    cached = http.get(table, headers=a_reader)
    assert cached.status_code == 200
    assert http.get(table).status_code == 200  # the global admin too: the response is cached
    etag = cached.headers["etag"]
    for headers in (b_admin, {**b_admin, "If-None-Match": etag}, {**b_admin, "If-None-Match": "*"}):
        refused = http.get(table, headers=headers)
        assert refused.status_code == 404, refused.text
        assert refused.json()["error"]["type"] == "NoSuchTableException"
        assert b"metadata" not in refused.content
    # Revocation still ends the reader's access with the cached response in place.
    reader_key = new_key(http, a, "reader")
    reader = bearer(token_for(catalog_server, reader_key))
    assert http.get(table, headers=reader).status_code == 200
    assert http.delete(f"/management/v1/keys/{reader_key.client_id}").status_code == 204
    deadline = time.monotonic() + 5
    while http.get(table, headers=reader).status_code != 401:
        assert time.monotonic() < deadline, "a revoked key kept loading a cached table"
        time.sleep(0.2)
