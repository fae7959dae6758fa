"""One request pipeline (catalog/api/pipeline.py): the hot routes' plain handlers and Litestar's routes
get the same request id, refusals and error answers."""

from __future__ import annotations

from typing import Any

import httpx

from devtools.catalog_server import CatalogProcess


def _requests(url: str, namespace: str) -> dict[str, tuple[str, str, dict[str, str]]]:
    table = f"/v1/default/namespaces/{namespace}/tables/missing"
    return {
        # answered by a hot route's handler
        "loadTable (hot)": ("GET", table, {}),
        # the same operation through Litestar (a query parameter the hot route does not take)
        "loadTable (Litestar)": ("GET", table, {"snapshots": "all", "unknown": "1"}),
        "listTables (hot)": ("GET", f"/v1/default/namespaces/{namespace}_missing/tables", {}),
        "listTables (Litestar)": ("GET", f"/v1/default/namespaces/{namespace}_missing/tables", {"x": "1"}),
    }


def test_both_routes_answer_a_failure_alike(
    catalog_server: CatalogProcess, http: httpx.Client, namespace: str
) -> None:
    answers: dict[str, tuple[int, Any]] = {}
    for label, (method, path, params) in _requests(catalog_server.url, namespace).items():
        response = http.request(method, path, params=params, headers={"X-Request-Id": f"id-{len(answers)}"})
        assert response.headers["x-request-id"] == f"id-{len(answers)}", label
        assert response.headers["content-type"] == "application/json", label
        answers[label] = (response.status_code, response.json())
    assert answers["loadTable (hot)"] == answers["loadTable (Litestar)"]
    assert answers["loadTable (hot)"][0] == 404
    assert answers["loadTable (hot)"][1]["error"]["type"] == "NoSuchTableException"
    assert answers["listTables (hot)"] == answers["listTables (Litestar)"]
    assert answers["listTables (hot)"][1]["error"]["type"] == "NoSuchNamespaceException"


def test_both_routes_refuse_alike(catalog_server: CatalogProcess, namespace: str) -> None:
    refusals = []
    for label, (method, path, params) in _requests(catalog_server.url, namespace).items():
        response = httpx.request(method, f"{catalog_server.url}{path}", params=params)
        assert response.status_code == 401, label
        assert response.headers["www-authenticate"] == 'Bearer realm="floe"', label
        assert response.headers["x-request-id"], label
        refusals.append(response.json())
    assert all(refusal == refusals[0] for refusal in refusals)


def test_every_request_gets_an_id_and_is_counted(
    catalog_server: CatalogProcess, http: httpx.Client, namespace: str
) -> None:
    # A path no route serves (Litestar's 404) passes through the pipeline too.
    unknown = http.get("/no/such/route", headers={"X-Request-Id": "unrouted-1"})
    assert unknown.status_code == 404
    assert unknown.headers["x-request-id"] == "unrouted-1"
    assert unknown.json()["error"]["type"] == "NotFoundException"
    token = httpx.post(f"{catalog_server.url}/v1/oauth/tokens", data={"grant_type": "client_credentials"})
    assert token.status_code in (400, 401)
    assert token.headers["x-request-id"]
    assert "error" in token.json()  # OAuth2 error JSON, not the Iceberg error model
    # A hot route's request (its 404) is counted under its route template, as Litestar's are.
    assert http.get(f"/v1/default/namespaces/{namespace}/tables/missing").status_code == 404
    metrics = http.get("/metrics").text
    assert 'route="unmatched"' in metrics
    assert 'route="/v1/{prefix:str}/namespaces/{namespace:str}/tables/{table:str}"' in metrics
