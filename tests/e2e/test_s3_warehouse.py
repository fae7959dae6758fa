"""An S3 warehouse on an S3-compatible endpoint (moto server on loopback), on both database backends.

The server writes metadata files to the bucket with its own credentials (the standard AWS chain, read from
the environment of its process: a real `floe serve` here); engines get the endpoint, region and addressing
style from `/v1/config` and bring their own keys.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import boto3
import pyarrow as pa
import pytest

from devtools.catalog_server import CatalogProcess
from devtools.moto_server import threaded_moto

AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with threaded_moto() as endpoint:
        yield endpoint


@pytest.fixture
def s3_catalog(fresh_database_url: str, s3_endpoint: str) -> Iterator[tuple[CatalogProcess, str]]:
    bucket = f"floe-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", **_keys())
    s3.create_bucket(Bucket=bucket)
    env = {
        **AWS_ENV,
        "FLOE_WAREHOUSE_NAME": f"s3wh_{bucket[-8:]}",
        "FLOE_WAREHOUSE": f"s3://{bucket}/lake",
        "FLOE_S3_ENDPOINT": s3_endpoint,
        "FLOE_S3_REGION": "us-east-1",
        "FLOE_S3_PATH_STYLE_ACCESS": "true",
    }
    with CatalogProcess(fresh_database_url, env=env) as server:
        yield server, bucket


def _keys() -> dict[str, str]:
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def test_tables_live_in_the_bucket(s3_catalog: tuple[CatalogProcess, str], s3_endpoint: str) -> None:
    server, bucket = s3_catalog
    warehouse = f"s3wh_{bucket[-8:]}"
    catalog = server.catalog(
        warehouse=warehouse, **{"s3.access-key-id": "testing", "s3.secret-access-key": "testing"}
    )
    # The endpoint and region come from the server's /v1/config defaults, not from the client.
    assert catalog.properties["s3.endpoint"] == s3_endpoint
    assert catalog.properties["s3.region"] == "us-east-1"

    catalog.create_namespace("events")
    ids = pa.array(range(100), pa.int64())
    data = pa.table({"id": ids, "payload": pa.array([f"p{i}" for i in range(100)])})
    table = catalog.create_table("events.clicks", schema=data.schema)
    assert table.location().startswith(f"s3://{bucket}/lake/events/clicks-")
    table.append(data)

    loaded = catalog.load_table("events.clicks")
    assert loaded.scan().to_arrow().sort_by("id").equals(data)
    assert loaded.metadata_location.startswith(f"s3://{bucket}/lake/events/clicks-")

    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", **_keys())
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert sum(k.endswith(".metadata.json") for k in keys) == 2
    assert any(k.endswith(".parquet") for k in keys)

    catalog.purge_table("events.clicks")
    # pyarrow leaves empty "folder/" marker objects behind after deleting the last file of a prefix.
    remaining = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert [k for k in remaining if not k.endswith("/")] == []


def test_compose_readme_duckdb_block_reads_a_table_through_the_client_endpoint(
    fresh_database_url: str, s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """compose/README.md's DuckDB block, run as written (values and ports substituted): the catalog uses
    `127.0.0.1` (as compose's catalog uses `minio`) and tells engines `localhost` (`FLOE_S3_CLIENT_ENDPOINT`),
    and DuckDB on "the host" reads the table with the MinIO-style S3 secret."""
    import re
    from pathlib import Path

    from tests.e2e.duckdb_client import connect

    bucket = f"floe-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", **_keys())
    s3.create_bucket(Bucket=bucket)
    port = s3_endpoint.rsplit(":", 1)[1]
    client_endpoint = f"http://localhost:{port}"
    env = {
        **AWS_ENV,
        "FLOE_WAREHOUSE": f"s3://{bucket}/warehouse",
        "FLOE_S3_ENDPOINT": s3_endpoint,
        "FLOE_S3_CLIENT_ENDPOINT": client_endpoint,
        "FLOE_S3_REGION": "us-east-1",
        "FLOE_S3_PATH_STYLE_ACCESS": "true",
    }
    with CatalogProcess(fresh_database_url, env=env) as server:
        catalog = server.catalog(**{"s3.access-key-id": "testing", "s3.secret-access-key": "testing"})
        assert catalog.properties["s3.endpoint"] == client_endpoint
        catalog.create_namespace("compose")
        data = pa.table({"id": pa.array(range(42), pa.int64())})
        table = catalog.create_table("compose.events", schema=data.schema)
        assert table.io.properties["s3.endpoint"] == client_endpoint
        table.append(data)

        readme = (Path(__file__).resolve().parents[2] / "compose" / "README.md").read_text()
        [block] = [b for b in re.findall(r"```sql\n(.*?)```", readme, re.DOTALL) if "TYPE ICEBERG" in b]
        sql = (
            block.replace("127.0.0.1:9000", f"localhost:{port}")
            .replace("http://127.0.0.1:8181", server.url)
            .replace("KEY_ID 'floe'", "KEY_ID 'testing'")
            .replace("<MINIO_ROOT_PASSWORD>", "testing")
            .replace("'floe-admin'", f"'{server.admin_client_id}'")
            .replace("<FLOE_ADMIN_CLIENT_SECRET>", server.admin_client_secret)
        )
        statements = [s.strip() for s in sql.split(";") if s.strip()]
        # The extensions come from the installed wheels (no network): connect() installs and loads them.
        connection = connect(tmp_path_factory.mktemp("duckdb-ext"))
        *setup, query = [s for s in statements if not s.startswith(("INSTALL", "LOAD"))]
        for statement in setup:
            connection.execute(statement)
        assert connection.execute(query).fetchone() == (42,)
