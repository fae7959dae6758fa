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
from moto.server import ThreadedMotoServer

from devtools.catalog_server import CatalogProcess
from devtools.ports import free_port

AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


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
