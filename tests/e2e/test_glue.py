"""AWS Glue Data Catalog publishing, against a real moto server (S3 and Glue) on loopback, both backends.

floe publishes every table of an S3 warehouse to Glue in the background; pyiceberg's own GlueCatalog
and DuckDB then read the tables through what Glue holds, without floe.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import boto3
import httpx
import pyarrow as pa
import pytest
from moto.server import ThreadedMotoServer
from pyiceberg.catalog.glue import GlueCatalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.types import StringType

from catalog.settings import Settings
from catalog.store import create_store
from devtools.catalog_server import CatalogProcess
from devtools.ports import free_port
from tests.e2e.duckdb_client import connect

# Glue on moto end to end, read back by pyiceberg's GlueCatalog and DuckDB: `pytest -m "not e2e"` skips them.
pytestmark = pytest.mark.e2e

REGION = "us-east-1"
KEYS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": REGION,
    "AWS_DEFAULT_REGION": REGION,
}
S3_CLIENT_KEYS = {"s3.access-key-id": "testing", "s3.secret-access-key": "testing"}
DEADLINE_SECONDS = 60.0

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], what: str, timeout: float = DEADLINE_SECONDS) -> T:
    """Poll `probe` until it answers something other than None (or False), up to a deadline."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last is not None and last is not False:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def start_moto(port: int) -> ThreadedMotoServer:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server


@pytest.fixture(scope="module")
def aws_endpoint() -> Iterator[str]:
    """One moto server for S3 and Glue (moto's state is per test process, whatever the port)."""
    port = free_port()
    server = start_moto(port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def glue_client(endpoint: str) -> Any:
    return boto3.client("glue", endpoint_url=endpoint, region_name=REGION, **KEYS)


def new_bucket(endpoint: str) -> str:
    bucket = f"floe-glue-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=endpoint, region_name=REGION, **KEYS).create_bucket(Bucket=bucket)
    return bucket


def server_env(aws_endpoint: str, bucket: str, glue_endpoint: str) -> dict[str, str]:
    return {
        **AWS_ENV,
        "FLOE_WAREHOUSE_NAME": "lake",
        "FLOE_WAREHOUSE": f"s3://{bucket}/lake",
        "FLOE_S3_ENDPOINT": aws_endpoint,
        "FLOE_S3_REGION": REGION,
        "FLOE_S3_PATH_STYLE_ACCESS": "true",
        "FLOE_GLUE_REGION": REGION,
        "FLOE_GLUE_ENDPOINT": glue_endpoint,
        # Short backoff: the outage test waits for the retry after Glue comes back.
        "FLOE_GLUE_RETRY_MAX_SECONDS": "1",
    }


@pytest.fixture(scope="module")
def glue_server(new_database: Callable[[], str], aws_endpoint: str) -> Iterator[CatalogProcess]:
    """floe on an S3 warehouse `lake`, publishing to moto's Glue, for the module (per backend): each
    test works in namespaces of its own."""
    env = server_env(aws_endpoint, new_bucket(aws_endpoint), aws_endpoint)
    with CatalogProcess(new_database(), env=env) as server:
        yield server


def rest_catalog(server: CatalogProcess, warehouse: str = "lake") -> RestCatalog:
    return server.catalog(warehouse=warehouse, **S3_CLIENT_KEYS)


def glue_catalog(endpoint: str) -> GlueCatalog:
    """pyiceberg's GlueCatalog: knows nothing of floe, only Glue and S3."""
    return GlueCatalog(
        "glue",
        **{
            "glue.endpoint": endpoint,
            "glue.region": REGION,
            "glue.access-key-id": "testing",
            "glue.secret-access-key": "testing",
            "s3.endpoint": endpoint,
            "s3.region": REGION,
            **S3_CLIENT_KEYS,
        },
    )


def glue_table(glue: Any, database: str, name: str) -> dict[str, Any] | None:
    try:
        table: dict[str, Any] = glue.get_table(DatabaseName=database, Name=name)["Table"]
        return table
    except glue.exceptions.EntityNotFoundException:
        return None


def wait_for_location(glue: Any, database: str, name: str, location: str | None) -> dict[str, Any]:
    """The Glue table once it points at `location`."""

    def probe() -> dict[str, Any] | None:
        table = glue_table(glue, database, name)
        if table is not None and table["Parameters"].get("metadata_location") == location:
            return table
        return None

    return eventually(probe, f"Glue {database}.{name} at {location}")


def wait_until_gone(glue: Any, database: str, name: str) -> None:
    eventually(lambda: glue_table(glue, database, name) is None, f"Glue {database}.{name} deleted")


def metric(server: CatalogProcess, name: str) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    match = re.search(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def events(start: int, count: int) -> pa.Table:
    ids = pa.array(range(start, start + count), pa.int64())
    return pa.table({"id": ids, "payload": pa.array([f"p{i}" for i in range(start, start + count)])})


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_tables_are_published_and_follow_commits(
    glue_server: CatalogProcess, aws_endpoint: str, tmp_path: Path
) -> None:
    catalog = rest_catalog(glue_server)
    glue = glue_client(aws_endpoint)
    cluster = unique("Cluster")  # a Kafka cluster name: Glue stores names lower-cased
    database = cluster.lower()
    catalog.create_namespace(cluster)
    first = events(0, 50)
    table = catalog.create_table(f"{cluster}.clicks", schema=first.schema, properties={"comment": "clicks"})
    table.append(first)

    published = wait_for_location(glue, database, "clicks", table.metadata_location)
    parameters = published["Parameters"]
    assert published["TableType"] == "EXTERNAL_TABLE"
    assert parameters["table_type"] == "ICEBERG"
    assert parameters["comment"] == "clicks"
    assert published["Description"] == "clicks"
    assert published["StorageDescriptor"]["Location"] == table.location()
    columns = [(c["Name"], c["Type"], c["Parameters"]) for c in published["StorageDescriptor"]["Columns"]]
    assert columns == [
        (
            "id",
            "bigint",
            {"iceberg.field.id": "1", "iceberg.field.optional": "true", "iceberg.field.current": "true"},
        ),
        (
            "payload",
            "string",
            {"iceberg.field.id": "2", "iceberg.field.optional": "true", "iceberg.field.current": "true"},
        ),
    ]
    # The version the append replaced is the table's create version.
    created_location = table.metadata.metadata_log[-1].metadata_file
    assert parameters["previous_metadata_location"] == created_location

    # pyiceberg's GlueCatalog loads what floe published and reads the same rows.
    from_glue = glue_catalog(aws_endpoint).load_table(f"{database}.clicks")
    assert from_glue.metadata_location == table.metadata_location
    assert from_glue.scan().to_arrow().sort_by("id").equals(first)

    # DuckDB reads the metadata file Glue points at.
    duck = connect(tmp_path / "duckdb-ext")
    duck.execute(
        "CREATE SECRET moto (TYPE S3, KEY_ID 'testing', SECRET 'testing', REGION 'us-east-1', "
        f"ENDPOINT '{aws_endpoint.removeprefix('http://')}', URL_STYLE 'path', USE_SSL false)"
    )
    count = duck.execute(f"SELECT count(*), sum(id) FROM iceberg_scan('{parameters['metadata_location']}')")
    assert count.fetchone() == (50, sum(range(50)))

    # Several commits, including a schema change: Glue follows to the last one.
    for start in (50, 100, 150):
        table.append(events(start, 50))
    with table.update_schema() as update:
        update.add_column("source", StringType(), doc="where the event came from")
    table = catalog.load_table(f"{cluster}.clicks")
    latest = wait_for_location(glue, database, "clicks", table.metadata_location)
    assert latest["Parameters"]["previous_metadata_location"] == table.metadata.metadata_log[-1].metadata_file
    assert latest["StorageDescriptor"]["Columns"][-1] == {
        "Name": "source",
        "Type": "string",
        "Comment": "where the event came from",
        "Parameters": {
            "iceberg.field.id": "3",
            "iceberg.field.optional": "true",
            "iceberg.field.current": "true",
        },
    }
    reloaded = glue_catalog(aws_endpoint).load_table(f"{database}.clicks")
    assert reloaded.scan().to_arrow().num_rows == 200
    assert metric(glue_server, "floe_glue_published_total") >= 2


def test_rename_drop_and_register_follow(glue_server: CatalogProcess, aws_endpoint: str) -> None:
    catalog = rest_catalog(glue_server)
    glue = glue_client(aws_endpoint)
    source_ns, target_ns = unique("orders"), unique("archive")
    catalog.create_namespace(source_ns)
    catalog.create_namespace(target_ns)
    catalog.create_namespace((target_ns, "eu"))  # nested: Glue database `<target>_eu`
    table = catalog.create_table(f"{source_ns}.orders", schema=events(0, 1).schema)
    wait_for_location(glue, source_ns, "orders", table.metadata_location)

    renamed = catalog.rename_table(f"{source_ns}.orders", (target_ns, "eu", "orders_2024"))
    moved = wait_for_location(glue, f"{target_ns}_eu", "orders_2024", renamed.metadata_location)
    assert moved["StorageDescriptor"]["Location"] == table.location()
    wait_until_gone(glue, source_ns, "orders")

    catalog.drop_table((target_ns, "eu", "orders_2024"))  # the files stay: it can be registered again
    wait_until_gone(glue, f"{target_ns}_eu", "orders_2024")

    registered = catalog.register_table(f"{source_ns}.restored", renamed.metadata_location)
    wait_for_location(glue, source_ns, "restored", registered.metadata_location)
    glue_catalog(aws_endpoint).load_table(f"{source_ns}.restored")


def test_a_local_warehouse_publishes_nothing(
    glue_server: CatalogProcess, aws_endpoint: str, tmp_path: Path
) -> None:
    assert glue_server.database_url is not None
    url = Settings.from_env({"FLOE_DATABASE_URL": glue_server.database_url}).database_url

    async def add_local_warehouse() -> None:
        store = create_store(url)
        try:
            await store.upsert_warehouse("local", (tmp_path / "local").as_uri(), {})
        finally:
            await store.close()

    asyncio.run(add_local_warehouse())
    local = rest_catalog(glue_server, warehouse="local")
    local_ns = unique("local")
    local.create_namespace(local_ns)
    local.create_table(f"{local_ns}.kept_local", schema=events(0, 1).schema).append(events(0, 10))
    # Then a table of the S3 warehouse: once it is published and nothing is queued, any publish of the
    # local table would have happened.
    s3 = rest_catalog(glue_server)
    s3_ns = unique("s3")
    s3.create_namespace(s3_ns)
    table = s3.create_table(f"{s3_ns}.published", schema=events(0, 1).schema)
    glue = glue_client(aws_endpoint)
    wait_for_location(glue, s3_ns, "published", table.metadata_location)
    eventually(lambda: metric(glue_server, "floe_glue_queue_length") == 0, "an empty Glue queue")
    databases = {d["Name"] for d in glue.get_databases()["DatabaseList"]}
    assert s3_ns in databases
    assert local_ns not in databases


def test_commits_succeed_while_glue_is_down_and_publishing_catches_up(
    fresh_database_url: str, aws_endpoint: str
) -> None:
    glue_port = free_port()  # nothing listens there yet: Glue is down
    glue_endpoint = f"http://127.0.0.1:{glue_port}"
    env = server_env(aws_endpoint, new_bucket(aws_endpoint), glue_endpoint)
    with CatalogProcess(fresh_database_url, env=env) as server:
        catalog = rest_catalog(server)
        namespace = unique("outage")
        catalog.create_namespace(namespace)
        table = catalog.create_table(f"{namespace}.events", schema=events(0, 1).schema)
        for start in (0, 10, 20):
            table.append(events(start, 10))
        assert table.scan().to_arrow().num_rows == 30
        eventually(lambda: metric(server, "floe_glue_failures_total") > 0, "failed publish attempts")
        assert metric(server, "floe_glue_queue_length") == 1
        glue = glue_client(aws_endpoint)  # the same moto state, reached through the port that is up
        assert glue_table(glue, namespace, "events") is None

        moto = start_moto(glue_port)
        try:
            wait_for_location(glue_client(glue_endpoint), namespace, "events", table.metadata_location)
            eventually(lambda: metric(server, "floe_glue_queue_length") == 0, "an empty Glue queue")
        finally:
            moto.stop()


def test_a_starting_server_publishes_tables_committed_without_glue(
    fresh_database_url: str, aws_endpoint: str
) -> None:
    env = server_env(aws_endpoint, new_bucket(aws_endpoint), aws_endpoint)
    without_glue = {k: v for k, v in env.items() if not k.startswith("FLOE_GLUE_")}
    namespace = unique("before")
    with CatalogProcess(fresh_database_url, env=without_glue) as server:
        catalog = rest_catalog(server)
        catalog.create_namespace(namespace)
        table = catalog.create_table(f"{namespace}.events", schema=events(0, 1).schema)
        table.append(events(0, 10))
    glue = glue_client(aws_endpoint)
    assert glue_table(glue, namespace, "events") is None
    # The same database, now with Glue configured: the startup check publishes what is missing.
    with CatalogProcess(fresh_database_url, env=env):
        wait_for_location(glue, namespace, "events", table.metadata_location)


def test_floe_yaml_glue_section_turns_publishing_on(fresh_database_url: str, aws_endpoint: str) -> None:
    """No FLOE_GLUE_* variables: `floe apply` of a floe.yaml with `glue:` publishes its tables."""
    env = {
        k: v
        for k, v in server_env(aws_endpoint, new_bucket(aws_endpoint), aws_endpoint).items()
        if not k.startswith("FLOE_GLUE_")
    }
    with CatalogProcess(fresh_database_url, env=env) as server:
        cluster = unique("yaml")
        config: dict[str, Any] = {
            "source_clusters": [
                {"name": cluster, "bootstrap_brokers": [{"hostname": "127.0.0.1", "port": 9}]}
            ],
            "tables": [
                {
                    "source_cluster_name": cluster,
                    "source_topic": "clicks",
                    "source_format": "json",
                    "schema": {"fields": [{"name": "id", "id": 1, "type": "long"}]},
                }
            ],
        }
        headers = {"Authorization": f"Bearer {server.token()}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=60) as http:
            response = http.put("/management/v1/pipeline", json={"config": config, "dry_run": False})
            assert response.status_code == 200, response.text
            glue = glue_client(aws_endpoint)
            time.sleep(1)
            assert glue_table(glue, cluster, "clicks") is None  # no target yet: nothing published
            config["glue"] = {"region": REGION, "endpoint": aws_endpoint}
            response = http.put("/management/v1/pipeline", json={"config": config, "dry_run": False})
            assert response.status_code == 200, response.text
        table = rest_catalog(server).load_table(f"{cluster}.clicks")
        wait_for_location(glue, cluster, "clicks", table.metadata_location)
        wait_for_location(
            glue,
            cluster,
            "clicks_dlq",
            rest_catalog(server).load_table(f"{cluster}.clicks_dlq").metadata_location,
        )
