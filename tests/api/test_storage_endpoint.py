"""The S3 endpoint engines are told: `FLOE_S3_CLIENT_ENDPOINT` when set (storage reached at another
address than the catalog's, as the host reaches compose's MinIO), the catalog's own `FLOE_S3_ENDPOINT` to
engines that ask with `X-Floe-Storage-Endpoint: internal` — in `/v1/config`, in table answers and in
vended credentials. Against moto (S3, STS, IAM): its two names here are `127.0.0.1` (the catalog's) and
`localhost` (the clients'), and both reach it, so a client really reads and writes through the endpoint
it was told.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from catalog.pipelines.maintenance import DEFAULT_POLICY
from catalog.storage import STORAGE_ENDPOINT_HEADER
from runtime.spark import STORAGE_ENDPOINT_HEADER as SPARK_STORAGE_ENDPOINT_HEADER
from runtime.spark import CatalogConnection
from tests.api.catalog_thread import CatalogThread
from tests.e2e.test_vending import DELEGATION, REGION, Aws, _create_body, moto_aws

INTERNAL = {STORAGE_ENDPOINT_HEADER: "internal"}


@pytest.fixture(scope="module")
def aws() -> Iterator[Aws]:
    yield from moto_aws()


@pytest.fixture(scope="module")
def client_endpoint(aws: Aws) -> str:
    return aws.endpoint.replace("127.0.0.1", "localhost")


@pytest.fixture(scope="module")
def server(
    aws: Aws, client_endpoint: str, new_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CatalogThread]:
    env = {
        "FLOE_WAREHOUSE": f"s3://{aws.bucket}/endpoints-{uuid.uuid4().hex[:8]}",
        "FLOE_S3_ENDPOINT": aws.endpoint,
        "FLOE_S3_CLIENT_ENDPOINT": client_endpoint,
        "FLOE_S3_REGION": REGION,
        "FLOE_S3_PATH_STYLE_ACCESS": "true",
        # The catalog's own identity (an in-process server cannot have AWS_* of its own).
        "FLOE_S3_ACCESS_KEY_ID": aws.server_keys["aws_access_key_id"],
        "FLOE_S3_SECRET_ACCESS_KEY": aws.server_keys["aws_secret_access_key"],
        "FLOE_STS_ROLE_ARN": aws.role_arn,
        "FLOE_STS_ENDPOINT": aws.endpoint,
    }
    home = Path(tmp_path_factory.mktemp("endpoints-home"))
    process = CatalogThread(new_database(), home=home, env=env).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def admin(server: CatalogThread) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {server.token()}"}
    with httpx.Client(base_url=server.url, timeout=60, headers=headers) as client:
        yield client


def test_config_tells_engines_the_client_endpoint_unless_they_ask_for_the_internal_one(
    admin: httpx.Client, aws: Aws, client_endpoint: str
) -> None:
    assert admin.get("/v1/config").json()["defaults"]["s3.endpoint"] == client_endpoint
    assert admin.get("/v1/config", headers={STORAGE_ENDPOINT_HEADER: "client"}).json()["defaults"][
        "s3.endpoint"
    ] == (client_endpoint)
    assert admin.get("/v1/config", headers=INTERNAL).json()["defaults"]["s3.endpoint"] == aws.endpoint
    refused = admin.get("/v1/config", headers={STORAGE_ENDPOINT_HEADER: "elsewhere"})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["type"] == "BadRequestException"
    assert STORAGE_ENDPOINT_HEADER in refused.json()["error"]["message"]


def test_tables_and_vended_credentials_carry_the_chosen_endpoint(
    admin: httpx.Client, aws: Aws, client_endpoint: str
) -> None:
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/default/namespaces", json={"namespace": [namespace]}).status_code == 200
    tables = f"/v1/default/namespaces/{namespace}/tables"
    created = admin.post(tables, json=_create_body("t"), headers=DELEGATION)
    assert created.status_code == 200, created.text
    assert created.json()["config"]["s3.endpoint"] == client_endpoint
    [credential] = created.json()["storage-credentials"]
    assert credential["config"]["s3.endpoint"] == client_endpoint

    for headers, endpoint in (({}, client_endpoint), (INTERNAL, aws.endpoint)):
        loaded = admin.get(f"{tables}/t", headers={**DELEGATION, **headers}).json()
        assert loaded["config"]["s3.endpoint"] == endpoint
        assert loaded["storage-credentials"][0]["config"]["s3.endpoint"] == endpoint
        plain = admin.get(f"{tables}/t", headers=headers).json()
        assert plain["config"]["s3.endpoint"] == endpoint
        assert "storage-credentials" not in plain
        vended = admin.get(f"{tables}/t/credentials", headers=headers).json()["storage-credentials"]
        assert vended[0]["config"]["s3.endpoint"] == endpoint
    # The catalog itself keeps using its own endpoint; the client endpoint is no storage setting of its.
    warehouse = admin.get("/v1/config", headers=INTERNAL).json()["defaults"]
    assert "s3.client-endpoint" not in warehouse


def test_a_client_reads_and_writes_through_the_endpoint_it_is_told(
    server: CatalogThread, client_endpoint: str
) -> None:
    """pyiceberg with no storage settings of its own: endpoint and keys both come from the catalog."""
    catalog = server.catalog(**{"header.X-Iceberg-Access-Delegation": "vended-credentials"})
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    data = pa.table({"id": pa.array(range(20), pa.int64())})
    table = catalog.create_table(f"{namespace}.rows", schema=data.schema)
    assert table.io.properties["s3.endpoint"] == client_endpoint
    table.append(data)
    loaded = catalog.load_table(f"{namespace}.rows")
    assert loaded.io.properties["s3.endpoint"] == client_endpoint
    assert loaded.scan().to_arrow().sort_by("id").equals(data)


def test_spark_sends_the_header_the_catalog_reads() -> None:
    assert SPARK_STORAGE_ENDPOINT_HEADER == STORAGE_ENDPOINT_HEADER
    uri = "http://catalog:8181"
    connection = CatalogConnection(uri, "default", "id", "secret", storage_endpoint="internal")
    header = f"spark.sql.catalog.floe.header.{STORAGE_ENDPOINT_HEADER}"
    assert connection.spark_properties()[header] == "internal"
    client = CatalogConnection(uri, "default", "id", "secret", storage_endpoint="client")
    assert header not in client.spark_properties()


def test_maintenance_reads_table_state_through_the_internal_endpoint_when_told(
    server: CatalogThread, aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`floe maintain` in compose (FLOE_SPARK_STORAGE_ENDPOINT=internal) reads manifests with pyiceberg
    where its Spark reads them: the catalog's own endpoint."""
    from maintenance.table_state import read_table_state
    from maintenance.worker import MaintainedTable, MaintenanceWorker, WorkerOptions

    catalog = server.catalog(**{"header.X-Iceberg-Access-Delegation": "vended-credentials"})
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    data = pa.table({"id": pa.array(range(5), pa.int64())})
    catalog.create_table(f"{namespace}.state", schema=data.schema).append(data)

    monkeypatch.setenv("FLOE_SPARK_STORAGE_ENDPOINT", "internal")
    # Its storage keys come from the AWS variables, as in compose.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", aws.tester_keys["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", aws.tester_keys["aws_secret_access_key"])
    options = WorkerOptions(server.url, server.admin_client_id, server.admin_client_secret)
    # Reading a table's state is pyiceberg only: this worker never starts a Spark action.
    worker = MaintenanceWorker(None, options)  # type: ignore[arg-type]
    try:
        table = MaintainedTable("default", (namespace,), "state", DEFAULT_POLICY)
        loaded = worker._catalog("default").load_table((namespace, "state"))
        assert loaded.io.properties["s3.endpoint"] == aws.endpoint
        state = read_table_state(worker._load_table(table), DEFAULT_POLICY.target_file_size_bytes)
        assert state.stats.data_files == 1
    finally:
        worker.close()


def test_maintenance_removes_orphans_on_s3_without_spark(
    server: CatalogThread, aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Orphan removal lists an S3 table through pyarrow with the table's own FileIO (vended
    credentials, the endpoint it was told) and deletes there: no Spark job."""
    import time

    from maintenance.table_state import read_table_state
    from maintenance.worker import MaintainedTable, MaintenanceWorker, WorkerOptions

    catalog = server.catalog(**{"header.X-Iceberg-Access-Delegation": "vended-credentials"})
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    data = pa.table({"id": pa.array(range(5), pa.int64())})
    table = catalog.create_table(f"{namespace}.orphans", schema=data.schema)
    table.append(data)
    table.append(data)
    prefix = table.location().split(f"{aws.bucket}/", 1)[1]
    s3 = aws.client("s3")
    s3.put_object(Bucket=aws.bucket, Key=f"{prefix}/data/orphan.parquet", Body=b"x")
    s3.put_object(Bucket=aws.bucket, Key=f"{prefix}/data/_hidden", Body=b"x")
    referenced = aws.keys_under(prefix + "/") - {f"{prefix}/data/orphan.parquet", f"{prefix}/data/_hidden"}

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", aws.tester_keys["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", aws.tester_keys["aws_secret_access_key"])
    options = WorkerOptions(server.url, server.admin_client_id, server.admin_client_secret)
    worker = MaintenanceWorker(None, options)  # type: ignore[arg-type]
    try:
        maintained = MaintainedTable("default", (namespace,), "orphans", DEFAULT_POLICY)
        # A horizon a minute ahead: every file is old enough, only references protect them.
        result = worker._remove_orphans(maintained, int(time.time() * 1000) + 60_000)
        # Old metadata files are listed the same way (none is older than the log here).
        loaded = worker._load_table(maintained)
        state = read_table_state(loaded, DEFAULT_POLICY.target_file_size_bytes)
        assert worker._remove_old_metadata(loaded, state) == {"metadata_files_removed": 0}
    finally:
        worker.close()
    assert result["orphan_files_removed"] == 1, result
    assert result["removed"] == [f"s3://{aws.bucket}/{prefix}/data/orphan.parquet"]
    # (pyarrow leaves a directory marker `data/` where it deleted: an empty object engines ignore.)
    left = {key for key in aws.keys_under(prefix + "/") if not key.endswith("/")}
    assert left == referenced | {f"{prefix}/data/_hidden"}
    assert catalog.load_table(f"{namespace}.orphans").scan().to_arrow().num_rows == 10
