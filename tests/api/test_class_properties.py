"""Properties that make clients load code are refused wherever properties come in.

pyiceberg imports and calls a loaded table's `py-io-impl` (the table's properties are merged into its
FileIO settings) and a written table's `write.py-location-provider.impl`; Iceberg's Java client (Spark:
floe's ingestion and maintenance) instantiates `write.location-provider.impl`. A writer who could set one
would pick code that runs in every reader's and writer's process. Each way in is tried: create (pyiceberg
and the REST API), a table commit, a multi-table transaction, register, a view, a namespace; each answers
400 in the spec's error JSON and leaves the catalog as it was.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import BadRequestError, NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from catalog.class_properties import names_a_class
from devtools.catalog_server import CatalogProcess
from tests.api.test_quotas import SCHEMA as SCHEMA_JSON
from tests.api.test_quotas import VIEW_VERSION

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))
CLASS_PROPERTIES = [
    "py-io-impl",
    "write.py-location-provider.impl",
    "write.location-provider.impl",
    "io-impl",
    " Py-IO-Impl ",
]


@pytest.fixture
def http(catalog_server: CatalogProcess) -> Iterator[httpx.Client]:
    token = catalog_server.token()
    with httpx.Client(
        base_url=catalog_server.url, timeout=60, headers={"Authorization": f"Bearer {token}"}
    ) as client:
        yield client


def _refused(response: httpx.Response, name: str) -> None:
    assert response.status_code == 400, response.text[:500]
    error = response.json()["error"]
    assert error["type"] == "BadRequestException"
    assert repr(name) in error["message"], error["message"]
    assert "names a class" in error["message"]


def test_the_names_refused_are_the_class_naming_ones() -> None:
    for name in CLASS_PROPERTIES:
        assert names_a_class(name)
    for name in (
        "write.parquet.compression-codec",
        "write.metadata.previous-versions-max",
        "owner",
        "simple",
    ):
        assert not names_a_class(name)


def test_create_refuses_a_class_property(
    rest_catalog: RestCatalog, http: httpx.Client, namespace: str
) -> None:
    with pytest.raises(BadRequestError, match="names a class"):
        rest_catalog.create_table(f"{namespace}.t", SCHEMA, properties={"py-io-impl": "subprocess.Popen"})
    with pytest.raises(NoSuchTableError):
        rest_catalog.load_table(f"{namespace}.t")
    for name in CLASS_PROPERTIES:
        body = {"name": "t", "schema": SCHEMA_JSON, "properties": {"owner": "a", name: "os.system"}}
        _refused(http.post(f"/v1/default/namespaces/{namespace}/tables", json=body), name)
        staged = {**body, "stage-create": True}
        _refused(http.post(f"/v1/default/namespaces/{namespace}/tables", json=staged), name)
    # Ordinary properties are taken as before.
    table = rest_catalog.create_table(
        f"{namespace}.t", SCHEMA, properties={"write.parquet.compression-codec": "zstd"}
    )
    assert table.properties["write.parquet.compression-codec"] == "zstd"


def test_commits_and_transactions_refuse_a_class_property(
    rest_catalog: RestCatalog, http: httpx.Client, namespace: str
) -> None:
    table = rest_catalog.create_table(f"{namespace}.t", SCHEMA)
    before = http.get(f"/v1/default/namespaces/{namespace}/tables/t").json()
    for name in CLASS_PROPERTIES:
        commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {name: "x.Y"}}]}
        _refused(http.post(f"/v1/default/namespaces/{namespace}/tables/t", json=commit), name)
        change = {"identifier": {"namespace": [namespace], "name": "t"}, **commit}
        _refused(http.post("/v1/default/transactions/commit", json={"table-changes": [change]}), name)
    with pytest.raises(BadRequestError, match="names a class"):
        table.transaction().set_properties({"write.location-provider.impl": "x.Y"}).commit_transaction()
    after = http.get(f"/v1/default/namespaces/{namespace}/tables/t").json()
    assert after["metadata-location"] == before["metadata-location"]
    assert not any(names_a_class(k) for k in after["metadata"].get("properties", {}))


def test_register_refuses_metadata_holding_a_class_property(
    catalog_server: CatalogProcess, rest_catalog: RestCatalog, http: httpx.Client, namespace: str
) -> None:
    table = rest_catalog.create_table(f"{namespace}.source", SCHEMA)
    document = json.loads(Path(table.metadata_location.removeprefix("file://")).read_text())
    document["properties"] = {"py-io-impl": "subprocess.Popen"}
    planted = (
        Path(table.location().removeprefix("file://")) / "metadata" / f"00009-{uuid.uuid4()}.metadata.json"
    )
    planted.write_text(json.dumps(document))
    response = http.post(
        f"/v1/default/namespaces/{namespace}/register",
        json={"name": "registered", "metadata-location": planted.as_uri()},
    )
    _refused(response, "py-io-impl")
    assert http.get(f"/v1/default/namespaces/{namespace}/tables/registered").status_code == 404


def test_views_and_namespaces_refuse_a_class_property(http: httpx.Client, namespace: str) -> None:
    view = {
        "name": "v",
        "schema": SCHEMA_JSON,
        "view-version": VIEW_VERSION,
        "properties": {"io-impl": "x.Y"},
    }
    _refused(http.post(f"/v1/default/namespaces/{namespace}/views", json=view), "io-impl")
    created = http.post(
        "/v1/default/namespaces", json={"namespace": [f"{namespace}_x"], "properties": {"py-io-impl": "x.Y"}}
    )
    _refused(created, "py-io-impl")
    updated = http.post(
        f"/v1/default/namespaces/{namespace}/properties", json={"updates": {"py-io-impl": "x.Y"}}
    )
    _refused(updated, "py-io-impl")
    assert "py-io-impl" not in http.get(f"/v1/default/namespaces/{namespace}").json()["properties"]
