"""A cluster key never escapes its cluster through storage paths (issue 9, items 1-4): the attacks.

Each attack runs as a hostile tenant would, against floe servers on both database backends, with a
local warehouse and with an S3 warehouse (moto): locations, path properties, set-location, stage-create,
views, transactions, register and purge. Every refusal leaves storage and catalog unchanged. The pure
pieces (canonical locations, purge, the storage pool) are in tests/unit/test_confinement.py.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from catalog.locations import is_within, normalize_location
from devtools.catalog_server import CatalogProcess
from devtools.moto_server import threaded_moto
from tests.api.catalog_thread import CatalogThread
from tests.unit.test_confinement import SCHEMA, _metadata

S3_KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64())})

# -- attacks against servers ----------------------------------------------------------------------------


@dataclass
class Tenancy:
    """Two clusters in one warehouse of a running server, and keys of each."""

    kind: str
    server: CatalogProcess
    warehouse: str  # canonical location
    cluster_a: str
    cluster_b: str
    admin: httpx.Client
    clients: dict[str, httpx.Client]
    credentials: dict[str, str]
    s3: Any = None
    bucket: str = ""

    def folder(self, cluster: str) -> str:
        return f"{self.warehouse}/{cluster}"

    def tables(self, namespace: str) -> str:
        return f"/v1/default/namespaces/{namespace}/tables"

    def views(self, namespace: str) -> str:
        return f"/v1/default/namespaces/{namespace}/views"

    def pyiceberg(self, who: str) -> RestCatalog:
        extra: dict[str, str] = {}
        if self.s3 is not None:
            extra = {"s3.access-key-id": "testing", "s3.secret-access-key": "testing"}
        return self.server.catalog(credential=self.credentials[who], **extra)

    def files(self) -> set[str]:
        """Every file in the warehouse's storage (and, locally, the server's home)."""
        if self.s3 is not None:
            pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
            return {o["Key"] for page in pages for o in page.get("Contents", [])}
        return {
            str(p)
            for p in self.server.home.rglob("*")
            if p.is_file() and p.name != "server.log" and not p.name.startswith("floe.db")
        }

    def put(self, location: str, content: bytes) -> None:
        if self.s3 is not None:
            key = location.removeprefix(f"s3://{self.bucket}/")
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=content)
        else:
            path = Path(location.removeprefix("file://"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)

    def exists(self, location: str) -> bool:
        if self.s3 is not None:
            key = location.removeprefix(f"s3://{self.bucket}/")
            return "Contents" in self.s3.list_objects_v2(Bucket=self.bucket, Prefix=key)
        return Path(location.removeprefix("file://")).exists()

    def outside_the_warehouse(self) -> str:
        if self.s3 is not None:
            return f"s3://{self.bucket}-other/lake"
        return self.server.home.as_uri()


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    with threaded_moto() as endpoint:
        yield endpoint


# The S3 warehouse's server takes its AWS keys from environment variables, so it is a process of its own
# (`floe serve` with moto): that parameter is end-to-end, as the PostgreSQL backend is.
@pytest.fixture(scope="module", params=["local", pytest.param("s3", marks=pytest.mark.e2e)])
def tenancy(
    request: pytest.FixtureRequest,
    backend: str,
    moto_endpoint: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Tenancy]:
    kind = str(request.param)
    home = tmp_path_factory.mktemp("confinement-home")
    if backend == "postgres":
        database_url = request.getfixturevalue("postgres").create_database(f"floe_{uuid.uuid4().hex[:8]}")
    else:  # where `floe up` keeps it: the database a purge once deleted
        database_url = f"sqlite+aiosqlite:///{home / 'floe.db'}"
    env: dict[str, str] = {}
    s3 = None
    bucket = ""
    if kind == "s3":
        bucket = f"lake-{uuid.uuid4().hex[:8]}"
        s3 = boto3.client(
            "s3",
            endpoint_url=moto_endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        s3.create_bucket(Bucket=bucket)
        s3.create_bucket(Bucket=f"{bucket}-other")
        env = {
            **S3_KEYS,
            "AWS_REGION": "us-east-1",
            "FLOE_WAREHOUSE": f"s3://{bucket}/lake",
            "FLOE_S3_ENDPOINT": moto_endpoint,
            "FLOE_S3_REGION": "us-east-1",
            "FLOE_S3_PATH_STYLE_ACCESS": "true",
        }
    server_type = CatalogProcess if kind == "s3" else CatalogThread
    with server_type(database_url, home=home, env=env) as server:
        admin = httpx.Client(
            base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {server.token()}"}
        )
        warehouse = normalize_location(
            f"s3://{bucket}/lake" if kind == "s3" else server.warehouse_path.resolve().as_uri()
        )
        clusters = [f"kafka_{uuid.uuid4().hex[:6]}a", f"kafka_{uuid.uuid4().hex[:6]}b"]
        for name in clusters:
            assert admin.post("/management/v1/clusters", json={"name": name}).status_code == 201
        clients: dict[str, httpx.Client] = {}
        credentials: dict[str, str] = {}
        for who, cluster, role in [
            ("a_admin", clusters[0], "admin"),
            ("a_writer", clusters[0], "writer"),
            ("b_writer", clusters[1], "writer"),
        ]:
            created = admin.post("/management/v1/keys", json={"cluster": cluster, "role": role}).json()
            credentials[who] = f"{created['client_id']}:{created['client_secret']}"
            token = server.token(created["client_id"], created["client_secret"])
            clients[who] = httpx.Client(
                base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {token}"}
            )
        yield Tenancy(
            kind, server, warehouse, clusters[0], clusters[1], admin, clients, credentials, s3, bucket
        )
        for client in [admin, *clients.values()]:
            client.close()


@pytest.fixture(scope="module")
def victim(tenancy: Tenancy) -> dict[str, Any]:
    """A table of cluster B with data, written by B's own writer."""
    table = tenancy.pyiceberg("b_writer").create_table(f"{tenancy.cluster_b}.victim", schema=ROWS.schema)
    table.append(ROWS)
    data_files = [task.file.file_path for task in table.scan().plan_files()]
    return {
        "location": table.location(),
        "metadata_location": table.metadata_location,
        "data_files": data_files,
        "snapshot_id": table.current_snapshot().snapshot_id,
    }


def _error(response: httpx.Response, status: int, error_type: str) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == error_type
    return str(error["message"])


def _name() -> str:
    return f"t_{uuid.uuid4().hex[:8]}"


def _attack_locations(t: Tenancy, victim: dict[str, Any]) -> list[tuple[str, int]]:
    a, b = t.folder(t.cluster_a), t.folder(t.cluster_b)
    scheme_alias = b.replace("s3://", "s3a://") if t.kind == "s3" else b.replace("file:///", "/")
    return [
        (f"{b}/planted", 403),  # another cluster's folder
        (f"{victim['location']}", 403),  # another cluster's table
        (f"{t.warehouse}/planted", 403),  # the warehouse root, outside every cluster
        (t.outside_the_warehouse(), 403),  # FLOE_HOME, or another bucket
        (f"{a}/x/../../{t.cluster_b}/planted", 403),  # traversal
        (f"{a}/../{t.cluster_a}b/planted", 403),  # a sibling that shares the prefix
        (f"{scheme_alias}/planted", 403),  # scheme alias of B's folder
        (f"{a}/%2e%2e/{t.cluster_b}", 400),  # percent-encoded traversal
        ("relative/planted", 400),  # server's working directory
        ("gs://bucket/planted", 400),  # a scheme floe cannot store to
    ]


def test_table_locations_are_confined_to_the_callers_cluster(
    tenancy: Tenancy, victim: dict[str, Any]
) -> None:
    t = tenancy
    writer = t.clients["a_writer"]
    before = t.files()
    for location, status in _attack_locations(t, victim):
        for body in (
            {"name": _name(), "schema": SCHEMA, "location": location},
            {"name": _name(), "schema": SCHEMA, "location": location, "stage-create": True},
            {"name": _name(), "schema": SCHEMA, "properties": {"write.metadata.path": location}},
            {"name": _name(), "schema": SCHEMA, "properties": {"write.data.path": location}},
        ):
            answer = writer.post(t.tables(t.cluster_a), json=body)
            _error(answer, status, "ForbiddenException" if status == 403 else "BadRequestException")
    assert t.files() == before, "a refused create wrote files"
    assert writer.get(t.tables(t.cluster_a)).json()["identifiers"] == []


def test_commits_and_transactions_cannot_move_a_table_out(tenancy: Tenancy, victim: dict[str, Any]) -> None:
    t = tenancy
    writer = t.clients["a_writer"]
    name = _name()
    created = writer.post(t.tables(t.cluster_a), json={"name": name, "schema": SCHEMA})
    assert created.status_code == 200, created.text
    own = created.json()["metadata"]["location"]
    assert is_within(own, t.folder(t.cluster_a))
    stats = {
        "snapshot-id": victim["snapshot_id"],
        "statistics-path": victim["data_files"][0],
        "file-size-in-bytes": 1,
        "file-footer-size-in-bytes": 1,
        "blob-metadata": [],
    }
    snapshot = {
        "snapshot-id": 7,
        "sequence-number": 1,
        "timestamp-ms": int(time.time() * 1000),
        "summary": {"operation": "append"},
        "manifest-list": f"{victim['location']}/metadata/snap.avro",
        "schema-id": 0,
    }
    for location, status in _attack_locations(t, victim):
        for updates in (
            [{"action": "set-location", "location": location}],
            [{"action": "set-properties", "updates": {"write.metadata.path": location}}],
            [{"action": "set-properties", "updates": {"write.object-storage.path": location}}],
        ):
            answer = writer.post(
                f"{t.tables(t.cluster_a)}/{name}", json={"requirements": [], "updates": updates}
            )
            _error(answer, status, "ForbiddenException" if status == 403 else "BadRequestException")
    smuggled = {**snapshot, "snapshot-id": 8}
    legit = {**snapshot, "manifest-list": f"{own}/metadata/snap-7.avro"}
    committed = writer.post(
        f"{t.tables(t.cluster_a)}/{name}",
        json={"requirements": [], "updates": [{"action": "add-snapshot", "snapshot": legit}]},
    )
    assert committed.status_code == 200, committed.text
    statistics = {**stats, "snapshot-id": 7}
    partition_statistics = {
        "snapshot-id": 7,
        "statistics-path": victim["data_files"][0],
        "file-size-in-bytes": 1,
    }
    for update in (
        {"action": "add-snapshot", "snapshot": smuggled},
        {"action": "set-statistics", "snapshot-id": 7, "statistics": statistics},
        {"action": "set-partition-statistics", "partition-statistics": partition_statistics},
    ):
        answer = writer.post(
            f"{t.tables(t.cluster_a)}/{name}", json={"requirements": [], "updates": [update]}
        )
        _error(answer, 403, "ForbiddenException")
    # A multi-table transaction that creates a table elsewhere is refused as a whole.
    transaction = {
        "table-changes": [
            {
                "identifier": {"namespace": [t.cluster_a], "name": _name()},
                "requirements": [{"type": "assert-create"}],
                "updates": [
                    {"action": "assign-uuid", "uuid": str(uuid.uuid4())},
                    {"action": "upgrade-format-version", "format-version": 2},
                    {"action": "add-schema", "schema": SCHEMA},
                    {"action": "set-current-schema", "schema-id": -1},
                    {"action": "set-location", "location": f"{t.folder(t.cluster_b)}/tx"},
                ],
            }
        ]
    }
    answer = writer.post("/v1/default/transactions/commit", json=transaction)
    _error(answer, 403, "ForbiddenException")
    loaded = writer.get(f"{t.tables(t.cluster_a)}/{name}").json()["metadata"]
    assert loaded["location"] == own
    assert loaded.get("statistics", []) == []
    assert loaded.get("partition-statistics", []) == []
    assert [snap["snapshot-id"] for snap in loaded["snapshots"]] == [7]
    assert writer.get(t.tables(t.cluster_a)).json()["identifiers"] == [
        {"namespace": [t.cluster_a], "name": name}
    ]


def test_canonical_locations_inside_the_cluster_are_accepted(tenancy: Tenancy) -> None:
    t = tenancy
    writer = t.clients["a_writer"]
    a = t.folder(t.cluster_a)
    messy = a.replace("s3://", "s3a://") if t.kind == "s3" else a
    location = f"{messy}//custom/./x/../tbl/"
    created = writer.post(
        t.tables(t.cluster_a), json={"name": _name(), "schema": SCHEMA, "location": location}
    )
    assert created.status_code == 200, created.text
    assert created.json()["metadata"]["location"] == f"{a}/custom/tbl"
    assert created.json()["metadata-location"].startswith(f"{a}/custom/tbl/metadata/")
    # Another plain spelling of a location inside the folder is kept as the client sent it (Java clients
    # compare it with what they sent); the file still lands at the canonical place.
    plain = a.replace("s3://", "s3a://") if t.kind == "s3" else a.replace("file:///", "file:/")
    kept = writer.post(
        t.tables(t.cluster_a), json={"name": _name(), "schema": SCHEMA, "location": f"{plain}/spelled/"}
    )
    assert kept.status_code == 200, kept.text
    assert kept.json()["metadata"]["location"] == f"{plain}/spelled"
    assert kept.json()["metadata-location"].startswith(f"{plain}/spelled/metadata/")
    assert t.exists(normalize_location(kept.json()["metadata-location"]))


def test_namespace_locations_are_confined(tenancy: Tenancy, victim: dict[str, Any]) -> None:
    """A namespace's `location` places its tables: one in another cluster's folder is refused on create
    and on update, and a table created below an accepted one stays in the caller's folder."""
    t = tenancy
    writer = t.clients["a_writer"]
    namespaces = "/v1/default/namespaces"
    before = t.files()
    for location, status in _attack_locations(t, victim):
        kind = "ForbiddenException" if status == 403 else "BadRequestException"
        child = [t.cluster_a, _name()]
        created = writer.post(namespaces, json={"namespace": child, "properties": {"location": location}})
        _error(created, status, kind)
        updated = writer.post(
            f"{namespaces}/{t.cluster_a}/properties", json={"updates": {"location": location}}
        )
        _error(updated, status, kind)
    assert t.files() == before, "a refused namespace location wrote files"
    loaded = writer.get(f"{namespaces}/{t.cluster_a}").json()["properties"]
    assert loaded["location"] == t.folder(t.cluster_a)

    child = [t.cluster_a, _name()]
    placed = f"{t.folder(t.cluster_a)}/placed//here/"
    assert writer.post(namespaces, json={"namespace": child, "properties": {"location": placed}}).is_success
    key = "%1F".join(child)
    assert (
        writer.get(f"{namespaces}/{key}").json()["properties"]["location"]
        == f"{t.folder(t.cluster_a)}/placed/here"
    )
    table = writer.post(t.tables(key), json={"name": "t", "schema": SCHEMA})
    assert table.status_code == 200, table.text
    assert table.json()["metadata"]["location"].startswith(f"{t.folder(t.cluster_a)}/placed/here/t-")


def test_views_are_confined(tenancy: Tenancy, victim: dict[str, Any]) -> None:
    t = tenancy
    writer = t.clients["a_writer"]
    version = {
        "version-id": 1,
        "schema-id": 0,
        "timestamp-ms": int(time.time() * 1000),
        "summary": {"engine-name": "test"},
        "representations": [{"type": "sql", "sql": "select 1", "dialect": "spark"}],
        "default-namespace": [t.cluster_a],
    }
    base = {"schema": SCHEMA, "view-version": version, "properties": {}}
    for location, status in _attack_locations(t, victim):
        answer = writer.post(t.views(t.cluster_a), json={**base, "name": _name(), "location": location})
        _error(answer, status, "ForbiddenException" if status == 403 else "BadRequestException")
    name = _name()
    assert writer.post(t.views(t.cluster_a), json={**base, "name": name}).status_code == 200
    moved = writer.post(
        f"{t.views(t.cluster_a)}/{name}",
        json={
            "requirements": [],
            "updates": [{"action": "set-location", "location": f"{t.folder(t.cluster_b)}/v"}],
        },
    )
    _error(moved, 403, "ForbiddenException")


def test_register_reads_only_metadata_inside_the_callers_cluster(
    tenancy: Tenancy, victim: dict[str, Any]
) -> None:
    t = tenancy
    writer = t.clients["a_writer"]
    register = f"/v1/default/namespaces/{t.cluster_a}/register"
    register_view = f"/v1/default/namespaces/{t.cluster_a}/register-view"
    # Another cluster's metadata file: refused before anything is read.
    for url in (register, register_view):
        answer = writer.post(url, json={"name": _name(), "metadata-location": victim["metadata_location"]})
        _error(answer, 403, "ForbiddenException")
    # Foreign schemes answer at once.
    for location in ("gs://bucket/m.metadata.json", "http://127.0.0.1:1/m.json", "abfs://c@a/m.json"):
        started = time.monotonic()
        _error(
            writer.post(register, json={"name": _name(), "metadata-location": location}),
            400,
            "BadRequestException",
        )
        assert time.monotonic() - started < 5
    # A file in the caller's own folder that is not metadata: its content is never echoed.
    secret = f"SECRET-{uuid.uuid4().hex}"
    planted = f"{t.folder(t.cluster_a)}/planted/shadow.json"
    t.put(planted, f"root:{secret}:19000:0:99999:7:::\n{secret}".encode())
    message = _error(
        writer.post(register, json={"name": _name(), "metadata-location": planted}),
        400,
        "BadRequestException",
    )
    assert secret not in message
    assert "root:" not in message
    t.put(f"{t.folder(t.cluster_a)}/planted/json.json", json.dumps({"format-version": secret}).encode())
    message = _error(
        writer.post(
            register,
            json={"name": _name(), "metadata-location": f"{t.folder(t.cluster_a)}/planted/json.json"},
        ),
        400,
        "BadRequestException",
    )
    assert secret not in message
    # A missing file and a folder answer alike (no existence oracle).
    missing = writer.post(
        register, json={"name": "m", "metadata-location": f"{t.folder(t.cluster_a)}/nope.json"}
    )
    folder = writer.post(
        register, json={"name": "m", "metadata-location": f"{t.folder(t.cluster_a)}/planted"}
    )
    missing_message = _error(missing, 400, "BadRequestException")
    folder_message = _error(folder, 400, "BadRequestException")
    assert missing_message.replace("nope.json", "X") == folder_message.replace("planted", "X")
    # Metadata inside the caller's folder that describes a table elsewhere is refused too.
    document = json.loads(_metadata(f"{t.folder(t.cluster_b)}/victim-copy").model_dump_json())
    smuggled = f"{t.folder(t.cluster_a)}/planted/00001-x.metadata.json"
    t.put(smuggled, json.dumps(document).encode())
    _error(
        writer.post(register, json={"name": _name(), "metadata-location": smuggled}),
        403,
        "ForbiddenException",
    )
    assert writer.get(t.tables(t.cluster_a)).json()["identifiers"] == [] or all(
        i["name"] != "m" for i in writer.get(t.tables(t.cluster_a)).json()["identifiers"]
    )


def test_purge_deletes_only_the_tables_own_files(tenancy: Tenancy, victim: dict[str, Any]) -> None:
    t = tenancy
    a_admin = t.clients["a_admin"]
    # A global administrator may place a table of cluster A in B's folder (the audited exception)...
    name = _name()
    placed = t.admin.post(
        t.tables(t.cluster_a), json={"name": name, "schema": SCHEMA, "location": victim["location"]}
    )
    assert placed.status_code == 200, placed.text
    # ...but cluster A's admin purging it deletes nothing of B's.
    dropped = a_admin.delete(f"{t.tables(t.cluster_a)}/{name}", params={"purgeRequested": "true"})
    assert dropped.status_code == 204, dropped.text
    assert all(t.exists(f) for f in victim["data_files"])
    assert t.exists(victim["metadata_location"])
    assert t.pyiceberg("b_writer").load_table(f"{t.cluster_b}.victim").scan().to_arrow().num_rows == 3
    if (t.server.database_url or "").startswith("sqlite"):
        assert (t.server.home / "floe.db").exists()
    # A snapshot whose manifest list is missing does not turn the drop into a 500.
    broken = _name()
    assert a_admin.post(t.tables(t.cluster_a), json={"name": broken, "schema": SCHEMA}).status_code == 200
    snapshot = {
        "snapshot-id": 11,
        "sequence-number": 1,
        "timestamp-ms": int(time.time() * 1000),
        "summary": {"operation": "append"},
        "manifest-list": f"{t.folder(t.cluster_a)}/gone/snap-11.avro",
        "schema-id": 0,
    }
    committed = a_admin.post(
        f"{t.tables(t.cluster_a)}/{broken}",
        json={"requirements": [], "updates": [{"action": "add-snapshot", "snapshot": snapshot}]},
    )
    assert committed.status_code == 200, committed.text
    gone = a_admin.delete(f"{t.tables(t.cluster_a)}/{broken}", params={"purgeRequested": "true"})
    assert gone.status_code == 204, gone.text
    _error(a_admin.get(f"{t.tables(t.cluster_a)}/{broken}"), 404, "NoSuchTableException")
    # A table of A's own, with data: purge removes its files.
    own = t.pyiceberg("a_writer").create_table(f"{t.cluster_a}.{_name()}", schema=ROWS.schema)
    own.append(ROWS)
    own_files = [task.file.file_path for task in own.scan().plan_files()]
    name = own.name()[-1]
    assert (
        a_admin.delete(f"{t.tables(t.cluster_a)}/{name}", params={"purgeRequested": "true"}).status_code
        == 204
    )
    assert not any(t.exists(f) for f in own_files)
    assert not t.exists(own.metadata_location)
    assert all(t.exists(f) for f in victim["data_files"])
