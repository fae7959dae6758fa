"""Per-cluster quotas and size limits (issue 29, item 9): a cluster admin cannot fill the catalog.

A server with small quotas (so the tests stay quick) and the default size limits: each quota breaks with
a 403 `QuotaExceededException` naming the quota, each limit with a 400, and nothing already created is
lost. Quota counts are taken inside the creating transaction: concurrent creates never overshoot.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pyiceberg.exceptions import BadRequestError, ForbiddenError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
from sqlalchemy import update

from catalog.store.schema import api_keys
from devtools.catalog_server import CatalogProcess
from tests.api.catalog_thread import CatalogThread
from tests.api.test_token_endpoint import run_db

QUOTAS = {
    "FLOE_QUOTA_NAMESPACES": "20",
    "FLOE_QUOTA_TABLES": "3",
    "FLOE_QUOTA_VIEWS": "2",
    "FLOE_QUOTA_KEYS": "3",
    "FLOE_MAX_TRANSACTION_TABLES": "5",
}
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}],
}
VIEW_VERSION = {
    "version-id": 1,
    "schema-id": 0,
    "timestamp-ms": 1_700_000_000_000,
    "summary": {},
    "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}],
    "default-namespace": [],
}


@dataclass
class Cluster:
    name: str
    admin: httpx.Client  # the cluster's admin key
    writer: httpx.Client
    writer_credential: str  # `client_id:secret`, for pyiceberg


@dataclass
class Quotas:
    server: CatalogProcess
    operator: httpx.Client  # the global admin
    new_cluster: Callable[[], Cluster]


@pytest.fixture(scope="module")
def quotas(new_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Quotas]:
    home = Path(tmp_path_factory.mktemp("quota-home"))
    clients: list[httpx.Client] = []
    with CatalogThread(new_database(), home=home, env=QUOTAS) as server:

        def client(token: str) -> httpx.Client:
            made = httpx.Client(base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {token}"})
            clients.append(made)
            return made

        operator = client(server.token())

        def new_cluster() -> Cluster:
            name = f"kafka_{uuid.uuid4().hex[:8]}"
            assert operator.post("/management/v1/clusters", json={"name": name}).status_code == 201
            keys, credentials = {}, {}
            for role in ("admin", "writer"):
                created = operator.post("/management/v1/keys", json={"cluster": name, "role": role}).json()
                keys[role] = client(server.token(created["client_id"], created["client_secret"]))
                credentials[role] = f"{created['client_id']}:{created['client_secret']}"
            return Cluster(name, keys["admin"], keys["writer"], credentials["writer"])

        yield Quotas(server, operator, new_cluster)
        for made in clients:
            made.close()


def _refused(response: httpx.Response, status: int, error_type: str, *words: str) -> str:
    assert response.status_code == status, response.text[:500]
    error = response.json()["error"]
    assert error["type"] == error_type
    assert error["code"] == status
    for word in words:
        assert word in error["message"], error["message"]
    return str(error["message"])


def _namespaces(prefix: str = "default") -> str:
    return f"/v1/{prefix}/namespaces"


def _tables(namespace: str) -> str:
    return f"/v1/default/namespaces/{namespace}/tables"


def _views(namespace: str) -> str:
    return f"/v1/default/namespaces/{namespace}/views"


def _create_table(http: httpx.Client, namespace: str, name: str, schema: Any = SCHEMA) -> httpx.Response:
    return http.post(_tables(namespace), json={"name": name, "schema": schema})


def _create_view(http: httpx.Client, namespace: str, name: str) -> httpx.Response:
    body = {"name": name, "schema": SCHEMA, "view-version": VIEW_VERSION, "properties": {}}
    return http.post(_views(namespace), json=body)


def _wide_schema(columns: int) -> dict[str, Any]:
    fields = [{"id": i + 1, "name": f"c{i}", "required": False, "type": "long"} for i in range(columns)]
    return {"type": "struct", "schema-id": 1, "fields": fields}


# -- quotas ----------------------------------------------------------------------------------------------


def test_namespace_quota_counts_the_whole_cluster(quotas: Quotas) -> None:
    cluster = quotas.new_cluster()
    # The cluster's own namespace is the first of its 20; namespaces at any depth count.
    created = [[cluster.name, "a"], [cluster.name, "a", "b"]]
    created += [[cluster.name, f"n{i}"] for i in range(17)]
    for levels in created:
        response = cluster.admin.post(_namespaces(), json={"namespace": levels})
        assert response.status_code == 200, response.text
    refused = cluster.admin.post(_namespaces(), json={"namespace": [cluster.name, "one_too_many"]})
    _refused(refused, 403, "QuotaExceededException", cluster.name, "20", "FLOE_QUOTA_NAMESPACES")
    # The global administrator is held to the cluster's quota as well.
    by_operator = quotas.operator.post(_namespaces(), json={"namespace": [cluster.name, "a", "more"]})
    _refused(by_operator, 403, "QuotaExceededException")
    # Nothing already created was lost; dropping one frees its place.
    for levels in created:
        assert cluster.admin.get(f"{_namespaces()}/{'%1F'.join(levels)}").status_code == 200
    assert cluster.admin.delete(f"{_namespaces()}/{cluster.name}%1Fn0").status_code == 204
    again = cluster.admin.post(_namespaces(), json={"namespace": [cluster.name, "one_too_many"]})
    assert again.status_code == 200, again.text


def test_table_quota_holds_for_create_transaction_and_register(quotas: Quotas) -> None:
    cluster = quotas.new_cluster()
    assert cluster.admin.post(_namespaces(), json={"namespace": [cluster.name, "sub"]}).status_code == 200
    made = []
    for namespace, name in [(cluster.name, "t0"), (cluster.name, "t1"), (f"{cluster.name}%1Fsub", "t2")]:
        response = _create_table(cluster.writer, namespace, name)
        assert response.status_code == 200, response.text
        made.append(response.json())
    _refused(
        _create_table(cluster.writer, cluster.name, "t3"),
        403,
        "QuotaExceededException",
        "3 tables",
        "FLOE_QUOTA_TABLES",
    )
    # A create transaction (stage-create, then a commit that asserts the create) is counted as well.
    staged = cluster.writer.post(
        _tables(cluster.name), json={"name": "staged", "schema": SCHEMA, "stage-create": True}
    )
    assert staged.status_code == 200, staged.text
    metadata = staged.json()["metadata"]
    commit = {
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": metadata["table-uuid"]},
            {"action": "upgrade-format-version", "format-version": metadata["format-version"]},
            {"action": "add-schema", "schema": metadata["schemas"][0]},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": metadata["location"]},
        ],
    }
    committed = cluster.writer.post(f"{_tables(cluster.name)}/staged", json=commit)
    _refused(committed, 403, "QuotaExceededException", "FLOE_QUOTA_TABLES")
    # Registering an existing metadata file as a new table is a create too.
    register = {"name": "copy", "metadata-location": made[0]["metadata-location"]}
    registered = cluster.admin.post(f"/v1/default/namespaces/{cluster.name}/register", json=register)
    _refused(registered, 403, "QuotaExceededException")
    # Views have their own quota: a full table quota does not stop one.
    assert _create_view(cluster.writer, cluster.name, "v0").status_code == 200
    # What exists is intact; a drop frees a place.
    for namespace, name in [(cluster.name, "t0"), (cluster.name, "t1"), (f"{cluster.name}%1Fsub", "t2")]:
        assert cluster.writer.get(f"{_tables(namespace)}/{name}").status_code == 200
    assert cluster.writer.get(f"{_tables(cluster.name)}/staged").status_code == 404
    assert cluster.admin.delete(f"{_tables(cluster.name)}/t0").status_code == 204
    assert _create_table(cluster.writer, cluster.name, "t3").status_code == 200


def test_pyiceberg_reports_a_quota_as_forbidden_and_a_limit_as_bad_request(quotas: Quotas) -> None:
    """What a client shows: pyiceberg raises ForbiddenError for the 403 (and does not retry it) and
    BadRequestError for a limit, each with floe's message."""
    cluster = quotas.new_cluster()
    catalog = quotas.server.catalog(credential=cluster.writer_credential)
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    for name in ("t0", "t1", "t2"):
        catalog.create_table(f"{cluster.name}.{name}", schema=schema)
    with pytest.raises(ForbiddenError, match=r"Quota exceeded.*FLOE_QUOTA_TABLES"):
        catalog.create_table(f"{cluster.name}.t3", schema=schema)
    with pytest.raises(BadRequestError, match="FLOE_MAX_NAME_BYTES"):
        catalog.create_namespace((cluster.name, "n" * 256))
    assert len(catalog.list_tables(cluster.name)) == 3


def test_view_quota(quotas: Quotas) -> None:
    cluster = quotas.new_cluster()
    for name in ("v0", "v1"):
        assert _create_view(cluster.writer, cluster.name, name).status_code == 200
    _refused(
        _create_view(cluster.writer, cluster.name, "v2"), 403, "QuotaExceededException", "FLOE_QUOTA_VIEWS"
    )
    assert cluster.writer.get(f"{_views(cluster.name)}/v0").status_code == 200
    assert _create_table(cluster.writer, cluster.name, "t0").status_code == 200


def test_key_quota_counts_active_keys_and_those_revoked_in_the_last_day(quotas: Quotas) -> None:
    cluster = quotas.new_cluster()  # its admin and writer keys are two of its three
    first = cluster.admin.post("/management/v1/keys", json={"cluster": cluster.name, "role": "reader"})
    assert first.status_code == 201, first.text
    refused = cluster.admin.post("/management/v1/keys", json={"cluster": cluster.name, "role": "reader"})
    _refused(refused, 403, "QuotaExceededException", "3 keys", "FLOE_QUOTA_KEYS")
    by_operator = quotas.operator.post(
        "/management/v1/keys", json={"cluster": cluster.name, "role": "reader"}
    )
    _refused(by_operator, 403, "QuotaExceededException")
    # A revoked key still counts for a day: creating and revoking keys in a loop cannot fill the table.
    client_id = first.json()["client_id"]
    assert cluster.admin.delete(f"/management/v1/keys/{client_id}").status_code == 204
    again = cluster.admin.post("/management/v1/keys", json={"cluster": cluster.name, "role": "reader"})
    _refused(again, 403, "QuotaExceededException", "revoked in the last 24 hours")
    _revoked_days_ago(quotas.server, client_id, 2)
    later = cluster.admin.post("/management/v1/keys", json={"cluster": cluster.name, "role": "reader"})
    assert later.status_code == 201, later.text


def _revoked_days_ago(server: CatalogProcess, client_id: str, days: int) -> None:
    """Move a key's revocation into the past, as if that much time had gone by."""
    assert server.database_url is not None
    moved = datetime.now(UTC) - timedelta(days=days)
    run_db(
        server.database_url,
        update(api_keys).where(api_keys.c.client_id == client_id).values(revoked_at=moved),
    )


def test_a_rename_into_a_full_cluster_is_refused(quotas: Quotas) -> None:
    full, other = quotas.new_cluster(), quotas.new_cluster()
    for name in ("t0", "t1", "t2"):
        assert _create_table(full.writer, full.name, name).status_code == 200
    assert _create_table(other.writer, other.name, "moving").status_code == 200
    # Only a global administrator reaches two clusters.
    rename = {
        "source": {"namespace": [other.name], "name": "moving"},
        "destination": {"namespace": [full.name], "name": "moved"},
    }
    refused = quotas.operator.post("/v1/default/tables/rename", json=rename)
    _refused(refused, 403, "QuotaExceededException", "FLOE_QUOTA_TABLES")
    assert other.writer.get(f"{_tables(other.name)}/moving").status_code == 200
    # Within a cluster a rename creates nothing.
    within = {
        "source": {"namespace": [full.name], "name": "t0"},
        "destination": {"namespace": [full.name], "name": "t9"},
    }
    assert full.admin.post("/v1/default/tables/rename", json=within).status_code == 204


@pytest.mark.parametrize("kind", ["table", "view"])
def test_concurrent_creates_never_exceed_the_quota(quotas: Quotas, kind: str) -> None:
    cluster = quotas.new_cluster()
    create = _create_table if kind == "table" else _create_view
    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda i: create(cluster.writer, cluster.name, f"x{i}"), range(12)))
    statuses = sorted(r.status_code for r in responses)
    limit = 3 if kind == "table" else 2
    assert statuses == [200] * limit + [403] * (12 - limit), [r.text[:200] for r in responses]
    listed = cluster.writer.get(_tables(cluster.name) if kind == "table" else _views(cluster.name))
    assert len(listed.json()["identifiers"]) == limit


def test_concurrent_namespace_creates_never_exceed_the_quota(quotas: Quotas) -> None:
    cluster = quotas.new_cluster()
    with ThreadPoolExecutor(8) as pool:
        responses = list(
            pool.map(
                lambda i: cluster.admin.post(_namespaces(), json={"namespace": [cluster.name, f"n{i}"]}),
                range(25),
            )
        )
    assert sorted(r.status_code for r in responses) == [200] * 19 + [403] * 6
    listed = cluster.admin.get(_namespaces(), params={"parent": cluster.name}).json()["namespaces"]
    assert len(listed) == 19


# -- size limits -----------------------------------------------------------------------------------------


def test_long_names_are_refused(quotas: Quotas) -> None:
    cluster = quotas.new_cluster()
    huge = "n" * (1024 * 1024)
    for levels in ([cluster.name, huge], [cluster.name, "x" * 256], [cluster.name, "é" * 128]):
        response = cluster.admin.post(_namespaces(), json={"namespace": levels})
        message = _refused(response, 400, "BadRequestException", "FLOE_MAX_NAME_BYTES")
        assert len(message) < 300  # the name is not echoed whole
    assert cluster.admin.post(_namespaces(), json={"namespace": [cluster.name, "x" * 255]}).status_code == 200
    assert cluster.admin.post(_namespaces(), json={"namespace": [cluster.name, "é" * 127]}).status_code == 200
    for name in (huge, "t" * 256):
        _refused(_create_table(cluster.writer, cluster.name, name), 400, "BadRequestException", "255")
        _refused(_create_view(cluster.writer, cluster.name, name), 400, "BadRequestException", "255")
    assert _create_table(cluster.writer, cluster.name, "t" * 255).status_code == 200
    rename = {
        "source": {"namespace": [cluster.name], "name": "t" * 255},
        "destination": {"namespace": [cluster.name], "name": "r" * 256},
    }
    _refused(cluster.admin.post("/v1/default/tables/rename", json=rename), 400, "BadRequestException")
    assert cluster.writer.get(f"{_tables(cluster.name)}/{'t' * 255}").status_code == 200


def test_deep_namespaces_are_refused(quotas: Quotas) -> None:
    cluster = quotas.new_cluster()
    for depth in (300, 17):
        levels = [cluster.name] + [f"l{i}" for i in range(depth - 1)]
        response = cluster.admin.post(_namespaces(), json={"namespace": levels})
        _refused(response, 400, "BadRequestException", f"{depth} levels", "FLOE_MAX_NAMESPACE_DEPTH")
    levels = [cluster.name]
    for i in range(15):  # 16 levels in all
        levels.append(f"l{i}")
        assert cluster.admin.post(_namespaces(), json={"namespace": levels}).status_code == 200
    # Also for the global administrator, outside any cluster.
    deep = [f"deep_{uuid.uuid4().hex[:6]}"] + [f"l{i}" for i in range(299)]
    _refused(quotas.operator.post(_namespaces(), json={"namespace": deep}), 400, "BadRequestException")


def test_wide_schemas_are_refused_on_create_and_commit(quotas: Quotas) -> None:
    cluster = quotas.new_cluster()
    wide = _wide_schema(100_000)
    message = _refused(
        _create_table(cluster.writer, cluster.name, "wide", wide),
        400,
        "BadRequestException",
        "10000 fields",
        "FLOE_MAX_SCHEMA_FIELDS",
    )
    assert "c99999" not in message
    assert cluster.writer.get(f"{_tables(cluster.name)}/wide").status_code == 404
    # Nested fields count: 6,000 columns and a list of a 4,001-field struct.
    nested = _wide_schema(6_000)
    inner = [{"id": 10_000 + i, "name": f"i{i}", "required": False, "type": "int"} for i in range(4_001)]
    nested["fields"].append(
        {
            "id": 9_000,
            "name": "items",
            "required": False,
            "type": {
                "type": "list",
                "element-id": 9_001,
                "element-required": False,
                "element": {"type": "struct", "fields": inner},
            },
        }
    )
    _refused(_create_table(cluster.writer, cluster.name, "nested", nested), 400, "BadRequestException")
    assert _create_table(cluster.writer, cluster.name, "edge", _wide_schema(10_000)).status_code == 200

    created = _create_table(cluster.writer, cluster.name, "narrow")
    assert created.status_code == 200
    before = created.json()["metadata-location"]
    commit = {
        "requirements": [{"type": "assert-current-schema-id", "current-schema-id": 0}],
        "updates": [
            {"action": "add-schema", "schema": wide},
            {"action": "set-current-schema", "schema-id": -1},
        ],
    }
    refused = cluster.writer.post(f"{_tables(cluster.name)}/narrow", json=commit)
    _refused(refused, 400, "BadRequestException", "add-schema", "FLOE_MAX_SCHEMA_FIELDS")
    loaded = cluster.writer.get(f"{_tables(cluster.name)}/narrow").json()
    assert loaded["metadata-location"] == before
    assert len(loaded["metadata"]["schemas"]) == 1
    # The same through a multi-table transaction.
    transaction = {
        "table-changes": [{"identifier": {"namespace": [cluster.name], "name": "narrow"}, **commit}]
    }
    _refused(
        cluster.writer.post("/v1/default/transactions/commit", json=transaction), 400, "BadRequestException"
    )
    # Views' schemas too.
    body = {"name": "wide_view", "schema": wide, "view-version": VIEW_VERSION, "properties": {}}
    _refused(cluster.writer.post(_views(cluster.name), json=body), 400, "BadRequestException")


def test_properties_are_bounded(quotas: Quotas) -> None:
    cluster = quotas.new_cluster()
    many = {f"k{i}": "v" for i in range(1_001)}
    response = cluster.admin.post(_namespaces(), json={"namespace": [cluster.name, "p"], "properties": many})
    _refused(response, 400, "BadRequestException", "1001 properties", "FLOE_MAX_PROPERTIES")
    assert cluster.admin.post(_namespaces(), json={"namespace": [cluster.name, "p"]}).status_code == 200
    half = {f"a{i}": "v" for i in range(600)}
    path = f"{_namespaces()}/{cluster.name}%1Fp/properties"
    assert cluster.admin.post(path, json={"updates": half}).status_code == 200
    more = {f"b{i}": "v" for i in range(600)}
    _refused(cluster.admin.post(path, json={"updates": more}), 400, "BadRequestException", "1200 properties")
    big = {"big": "x" * (1024 * 1024 + 1)}
    _refused(
        cluster.writer.post(_tables(cluster.name), json={"name": "t", "schema": SCHEMA, "properties": big}),
        400,
        "BadRequestException",
        "FLOE_MAX_PROPERTIES_BYTES",
    )
    created = _create_table(cluster.writer, cluster.name, "t")
    assert created.status_code == 200
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": many}]}
    _refused(cluster.writer.post(f"{_tables(cluster.name)}/t", json=commit), 400, "BadRequestException")


def test_a_transaction_of_too_many_tables_is_refused_before_its_changes_are_read(quotas: Quotas) -> None:
    """A multi-table commit names at most FLOE_MAX_TRANSACTION_TABLES tables: a writer cannot hold a
    thousand tables' locks and the database in one request. The count is checked before any change is
    parsed (these changes are not even valid), and nothing is committed."""
    cluster = quotas.new_cluster()
    assert _create_table(cluster.writer, cluster.name, "t").status_code == 200
    garbage = [
        {"identifier": {"namespace": [cluster.name], "name": f"t{i}"}, "updates": "x"} for i in range(6)
    ]
    response = cluster.writer.post("/v1/default/transactions/commit", json={"table-changes": garbage})
    _refused(
        response, 400, "BadRequestException", "6 table changes", "limit of 5", "FLOE_MAX_TRANSACTION_TABLES"
    )
    # At the limit, the changes are read (and these are refused for what they are).
    response = cluster.writer.post("/v1/default/transactions/commit", json={"table-changes": garbage[:5]})
    message = _refused(response, 400, "BadRequestException")
    assert "FLOE_MAX_TRANSACTION_TABLES" not in message
    change = {
        "identifier": {"namespace": [cluster.name], "name": "t"},
        "requirements": [],
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
    }
    assert (
        cluster.writer.post("/v1/default/transactions/commit", json={"table-changes": [change]}).status_code
        == 204
    )
