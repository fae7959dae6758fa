"""DuckDB reads and writes an S3 warehouse (moto) with nothing but the credentials floe vends: a reader's
key may read and not write, a writer's may do both. The rest of vending is in tests/api/test_vending.py,
whose scene (moto with IAM auth on, a real `floe serve` vending for one cluster) this module shares."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

from devtools.catalog_server import CatalogProcess
from tests.api.test_vending import Aws, Vending, moto_aws, serve_vending
from tests.e2e.duckdb_client import attach_catalog, connect


@pytest.fixture(scope="module")
def aws() -> Iterator[Aws]:
    yield from moto_aws()


@pytest.fixture
def vending(aws: Aws, fresh_database_url: str) -> Iterator[Vending]:
    yield from serve_vending(CatalogProcess, aws, fresh_database_url)


@pytest.mark.e2e
def test_duckdb_reads_and_writes_with_vended_credentials_only(
    vending: Vending, aws: Aws, tmp_path_factory: pytest.TempPathFactory
) -> None:
    v = vending
    data = pa.table({"id": pa.array(range(50), pa.int64())})
    created = v.catalog(v.writer).create_table(f"{v.cluster}.events", schema=data.schema)
    created.append(data)
    prefix = created.location().removeprefix(f"s3://{aws.bucket}/")

    connection = connect(tmp_path_factory.mktemp("duckdb-ext"))
    # No S3 secret exists: the only storage credentials DuckDB can use are the ones floe vends
    # (DuckDB asks for them by default: ACCESS_DELEGATION_MODE 'vended_credentials').
    assert connection.execute("SELECT count(*) FROM duckdb_secrets() WHERE type = 's3'").fetchone() == (0,)
    attach_catalog(
        connection,
        endpoint=v.server.url,
        warehouse="default",
        client_id=v.reader.client_id,
        client_secret=v.reader.client_secret,
        alias="as_reader",
    )
    table = f'as_reader."{v.cluster}".events'
    assert connection.execute(f"SELECT count(*), sum(id) FROM {table}").fetchone() == (50, sum(range(50)))
    before = aws.keys_under(prefix)
    # S3 refuses the reader's data file (floe would refuse the commit as well).
    with pytest.raises(Exception, match=r"(?i)403|forbidden|access denied"):
        connection.execute(f"INSERT INTO {table} VALUES (1000)")
    assert aws.keys_under(prefix) == before

    attach_catalog(
        connection,
        endpoint=v.server.url,
        warehouse="default",
        client_id=v.writer.client_id,
        client_secret=v.writer.client_secret,
        alias="as_writer",
    )
    connection.execute(f'INSERT INTO as_writer."{v.cluster}".events VALUES (1000), (1001)')
    assert connection.execute(f'SELECT count(*), max(id) FROM as_writer."{v.cluster}".events').fetchone() == (
        52,
        1001,
    )
    assert v.catalog(v.reader).load_table(f"{v.cluster}.events").scan().to_arrow().num_rows == 52
