"""Trino 476 as a real engine of floe, configured with README's catalog blocks as written.

One Trino coordinator (devtools/trino.py: the server and CLI from Maven Central, Java 24+) serves the
module with three catalogs, each README's block with only the placeholders filled in: `floe`
(`trino-local`, a cluster's writer key on a local warehouse), `floe_reader` (the same block with the
cluster's reader key) and `lake` (`trino-s3`, a writer key on an S3 warehouse of a second floe server
that vends credentials). The S3 warehouse is moto with IAM authentication on: Trino has no storage keys
of its own, so every file it reads or writes there goes through credentials floe vended for that table.

One Spark 4.0 + Iceberg 1.11 session (local[2]) joins the module for the Spark <-> Trino cross reads on
both warehouses and for format v3 tables (Spark's deletion vectors). It is started here, not Trino in
test_format_v3.py, because that module runs once per backend (SQLite, PostgreSQL) and would start Trino
twice. Measured on the shared 2-core machine: the Spark session starts in 13-20 s and the Spark tests add
about a minute in all; this module's moto, two floe servers and Trino take 27-76 s.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from devtools.catalog_server import CatalogProcess
from devtools.trino import LocalTrino, TrinoQueryError
from tests.e2e.duckdb_client import attach_catalog, connect, quote
from tests.e2e.readme_blocks import engine_block, filled
from tests.e2e.test_format_v3 import MERGE_ON_READ, check_row_lineage, stored_metadata
from tests.e2e.test_vending import REGION, Aws, _server_env, moto_aws

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Side:
    """One floe server as Trino sees it: its catalog names in Trino, a cluster, and keys of it."""

    kind: str  # "local" | "s3"
    server: CatalogProcess
    cluster: str
    writer: tuple[str, str]
    reader: tuple[str, str]
    trino_catalog: str

    def pyiceberg(self) -> RestCatalog:
        """pyiceberg with the writer key (and, on S3, only vended storage credentials)."""
        extra = {"header.X-Iceberg-Access-Delegation": "vended-credentials"} if self.kind == "s3" else {}
        return self.server.catalog(credential=":".join(self.writer), **extra)

    def schema(self) -> str:
        return f'{self.trino_catalog}."{self.cluster}"'


def _cluster_with_keys(server: CatalogProcess) -> tuple[str, tuple[str, str], tuple[str, str]]:
    cluster = f"kafka_{uuid.uuid4().hex[:8]}"
    headers = {"Authorization": f"Bearer {server.token()}"}
    with httpx.Client(base_url=server.url, timeout=60, headers=headers) as admin:
        assert admin.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
        keys = []
        for role in ("writer", "reader"):
            created = admin.post("/management/v1/keys", json={"cluster": cluster, "role": role}).json()
            keys.append((created["client_id"], created["client_secret"]))
    return cluster, keys[0], keys[1]


@pytest.fixture(scope="module")
def aws() -> Iterator[Aws]:
    yield from moto_aws()


@pytest.fixture(scope="module")
def sides(aws: Aws, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    """A floe on a local warehouse and one on an S3 warehouse (moto, vending), a cluster and keys each."""
    ambient = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"}
    assert not ambient & set(os.environ), "engines must not find AWS keys of their own"
    local_home = tmp_path_factory.mktemp("trino-floe-local")
    s3_home = tmp_path_factory.mktemp("trino-floe-s3")
    location = f"s3://{aws.bucket}/wh-{uuid.uuid4().hex[:8]}"
    with (
        CatalogProcess(f"sqlite+aiosqlite:///{local_home / 'floe.db'}", home=local_home) as local,
        CatalogProcess(
            f"sqlite+aiosqlite:///{s3_home / 'floe.db'}", home=s3_home, env=_server_env(aws, location)
        ) as s3,
    ):
        local_cluster, local_writer, local_reader = _cluster_with_keys(local)
        s3_cluster, s3_writer, s3_reader = _cluster_with_keys(s3)
        yield {
            "local": Side("local", local, local_cluster, local_writer, local_reader, "floe"),
            "s3": Side("s3", s3, s3_cluster, s3_writer, s3_reader, "lake"),
        }


@pytest.fixture(scope="module")
def trino(sides: dict[str, Side], aws: Aws, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalTrino]:
    local, s3 = sides["local"], sides["s3"]

    def block(name: str, side: Side, key: tuple[str, str], **extra: str) -> str:
        return filled(
            engine_block(name), url=side.server.url, client_id=key[0], client_secret=key[1], **extra
        )

    catalogs = {
        "floe": block("trino-local", local, local.writer),
        "floe_reader": block("trino-local", local, local.reader),
        "lake": block("trino-s3", s3, s3.writer, region=REGION, s3_endpoint=aws.endpoint),
    }
    with LocalTrino(tmp_path_factory.mktemp("trino"), catalogs) as server:
        yield server


@pytest.fixture
def duck(duckdb_extensions: Path) -> Iterator[object]:
    """A DuckDB connection per test. One shared by the local and S3 cases once sent the S3 case's
    `GET /v1/config` (with the S3 server's token) to the local server, which had answered the local
    case a second before: both servers' access logs showed it (401 on the local one, no request on the
    other), as if DuckDB had reused a kept-alive HTTP connection across the two endpoints. A fresh
    connection has none to reuse."""
    connection = connect(duckdb_extensions)
    yield connection
    connection.close()


def _name(prefix: str = "t") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_writer_key_runs_trinos_sql_surface(trino: LocalTrino, sides: dict[str, Side]) -> None:
    s = sides["local"].schema()
    orders, heavy, view = _name("orders"), _name("heavy"), _name("view")
    trino.query(f"CREATE TABLE {s}.{orders} (id bigint, item varchar, qty integer)")
    trino.query(f"INSERT INTO {s}.{orders} VALUES (1, 'apple', 3), (2, 'pear', 5), (3, 'fig', 1)")
    [(first,)] = trino.rows(
        f'SELECT snapshot_id FROM {s}."{orders}$snapshots" ORDER BY committed_at DESC LIMIT 1'
    )
    assert trino.rows(f"CREATE TABLE {s}.{heavy} AS SELECT id, qty FROM {s}.{orders} WHERE qty > 1") == [(2,)]
    assert trino.rows(f"SELECT id FROM {s}.{heavy} ORDER BY id") == [(1,), (2,)]

    trino.query(f"UPDATE {s}.{orders} SET qty = qty + 10 WHERE id = 1")
    trino.query(f"DELETE FROM {s}.{orders} WHERE id = 3")
    trino.query(
        f"MERGE INTO {s}.{orders} t USING (VALUES (2, 'pear', 50), (4, 'kiwi', 7)) AS u(id, item, qty) "
        "ON t.id = u.id WHEN MATCHED THEN UPDATE SET qty = u.qty "
        "WHEN NOT MATCHED THEN INSERT (id, item, qty) VALUES (u.id, u.item, u.qty)"
    )
    trino.query(f"ALTER TABLE {s}.{orders} ADD COLUMN note varchar")
    trino.query(f"INSERT INTO {s}.{orders} VALUES (5, 'plum', 2, 'new')")
    assert trino.rows(f"SELECT * FROM {s}.{orders} ORDER BY id") == [
        (1, "apple", 13, None),
        (2, "pear", 50, None),
        (4, "kiwi", 7, None),
        (5, "plum", 2, "new"),
    ]
    assert trino.rows(f"SELECT id, qty FROM {s}.{orders} FOR VERSION AS OF {first} ORDER BY id") == [
        (1, 3),
        (2, 5),
        (3, 1),
    ]
    trino.query(f"CREATE VIEW {s}.{view} AS SELECT id FROM {s}.{orders} WHERE qty > 5")
    assert trino.rows(f"SELECT id FROM {s}.{view} ORDER BY id") == [(1,), (2,), (4,)]
    [(snapshots,)] = trino.rows(f'SELECT count(*) FROM {s}."{orders}$snapshots"')
    assert snapshots >= 6  # create, insert, update, delete, merge, insert
    # Trino placed the table below the namespace's location, in the cluster's folder.
    side = sides["local"]
    table = side.pyiceberg().load_table(f"{side.cluster}.{orders}")
    assert table.location().startswith(
        f"{side.server.warehouse_path.resolve().as_uri()}/{side.cluster}/{orders}-"
    )


def test_reader_key_selects_and_every_write_is_refused(trino: LocalTrino, sides: dict[str, Side]) -> None:
    side = sides["local"]
    name = _name()
    trino.query(f"CREATE TABLE {side.schema()}.{name} AS SELECT * FROM (VALUES 1, 2, 3) AS v(id)")
    reader = f'floe_reader."{side.cluster}"'
    assert trino.rows(f"SELECT sum(id) FROM {reader}.{name}") == [(6,)]
    for statement, action in (
        (f"INSERT INTO {reader}.{name} VALUES 4", "write"),
        (f"DELETE FROM {reader}.{name} WHERE id = 1", "write"),
        (f"CREATE TABLE {reader}.{_name()} (id integer)", "create"),
        (f"DROP TABLE {reader}.{name}", "drop"),
    ):
        # Trino shows floe's message, or wraps it ("Failed to create transaction", caused by floe's).
        with pytest.raises(
            TrinoQueryError, match=rf"Forbidden: Role reader of key floe_\w+ may not {action}"
        ):
            trino.query(statement)
    assert trino.rows(f"SELECT sum(id) FROM {reader}.{name}") == [(6,)]
    # What a user of Trino's own CLI sees.
    cli = trino.cli("--execute", f"INSERT INTO {reader}.{name} VALUES 4")
    assert cli.returncode != 0
    assert "reader" in cli.stderr + cli.stdout


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_a_table_trino_writes_is_read_by_pyiceberg_and_duckdb(
    trino: LocalTrino, sides: dict[str, Side], duck: object, kind: str
) -> None:
    side = sides[kind]
    name = _name("by_trino")
    trino.query(
        f"CREATE TABLE {side.schema()}.{name} AS "
        "SELECT id, 'item ' || CAST(id AS varchar) AS item FROM UNNEST(sequence(1, 100)) AS v(id)"
    )
    trino.query(f"DELETE FROM {side.schema()}.{name} WHERE id > 90")  # position deletes for readers
    table = side.pyiceberg().load_table(f"{side.cluster}.{name}")
    arrow = table.scan().to_arrow()
    assert sorted(arrow.column("id").to_pylist()) == list(range(1, 91))

    import duckdb

    assert isinstance(duck, duckdb.DuckDBPyConnection)
    alias = f"floe_{kind}"
    attach_catalog(
        duck,
        endpoint=side.server.url,
        warehouse="default",
        client_id=side.reader[0],
        client_secret=side.reader[1],
        alias=alias,
    )
    try:
        answer = duck.execute(
            f"SELECT count(*), sum(id) FROM {alias}.{quote(side.cluster)}.{name}"
        ).fetchone()
        assert answer == (90, sum(range(1, 91)))
    finally:
        duck.execute(f"DETACH {alias}")


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_a_table_pyiceberg_writes_is_read_by_trino(
    trino: LocalTrino, sides: dict[str, Side], kind: str
) -> None:
    side = sides[kind]
    name = _name("by_pyiceberg")
    data = pa.table({"id": pa.array(range(10), pa.int64()), "label": pa.array([f"r{i}" for i in range(10)])})
    table = side.pyiceberg().create_table(f"{side.cluster}.{name}", schema=data.schema)
    table.append(data)
    table.append(data.slice(0, 5))
    assert trino.rows(f"SELECT count(*), sum(id), max(label) FROM {side.schema()}.{name}") == [(15, 55, "r9")]
    # And Trino writes on: the next pyiceberg read sees its rows.
    trino.query(f"INSERT INTO {side.schema()}.{name} VALUES (100, 'trino')")
    assert (
        100
        in side.pyiceberg().load_table(f"{side.cluster}.{name}").scan().to_arrow().column("id").to_pylist()
    )


def test_trino_476_does_not_create_format_v3_tables(trino: LocalTrino, sides: dict[str, Side]) -> None:
    """Measured for README: Trino 476 refuses `format_version = 3` itself, before asking the catalog."""
    s = sides["local"].schema()
    name = _name("v3")
    with pytest.raises(TrinoQueryError, match="format_version must be between 1 and 2"):
        trino.query(f"CREATE TABLE {s}.{name} (id bigint) WITH (format_version = 3)")
    assert not sides["local"].pyiceberg().table_exists(f"{sides['local'].cluster}.{name}")


@pytest.fixture(scope="module")
def spark(sides: dict[str, Side]) -> Iterator[SparkSession]:
    """One Spark 4.0 + Iceberg 1.11 session for the module, its catalogs named as Trino's: `floe` (the
    local warehouse) and `lake` (the S3 warehouse, files only through credentials floe vends)."""
    from runtime.spark import CatalogConnection, spark_session

    local, s3 = sides["local"], sides["s3"]
    lake = CatalogConnection(
        s3.server.url,
        "default",
        *s3.writer,
        extra={"header.X-Iceberg-Access-Delegation": "vended-credentials"},
    )
    session = spark_session(
        "floe-trino-cross-engine",
        CatalogConnection(local.server.url, "default", *local.writer),
        master="local[2]",
        conf={
            "spark.driver.memory": "1g",
            "spark.ui.showConsoleProgress": "false",
            **lake.spark_properties(s3.trino_catalog),
        },
    )
    try:
        yield session
    finally:
        session.stop()


def _spark_rows(spark: SparkSession, table: str) -> list[tuple[object, ...]]:
    return [tuple(row) for row in spark.sql(f"SELECT * FROM {table} ORDER BY id").collect()]


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_spark_and_trino_read_each_others_tables(
    trino: LocalTrino, sides: dict[str, Side], spark: SparkSession, kind: str
) -> None:
    side = sides[kind]
    in_spark = f"{side.trino_catalog}.`{side.cluster}`"
    by_spark, by_trino = _name("by_spark"), _name("by_trino")
    # Spark writes position delete files (merge-on-read, format v2): Trino applies them.
    spark.sql(
        f"CREATE TABLE {in_spark}.{by_spark} (id BIGINT, name STRING) USING iceberg "
        f"TBLPROPERTIES ({MERGE_ON_READ})"
    )
    spark.sql(f"INSERT INTO {in_spark}.{by_spark} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql(f"DELETE FROM {in_spark}.{by_spark} WHERE id = 2")
    assert trino.rows(f"SELECT * FROM {side.schema()}.{by_spark} ORDER BY id") == [(1, "a"), (3, "c")]
    # Trino's table, with Trino's own position deletes: Spark applies them.
    trino.query(
        f"CREATE TABLE {side.schema()}.{by_trino} AS "
        "SELECT * FROM (VALUES (BIGINT '1', 'a'), (2, 'b'), (3, 'c')) AS v(id, name)"
    )
    trino.query(f"DELETE FROM {side.schema()}.{by_trino} WHERE id = 2")
    assert _spark_rows(spark, f"{in_spark}.{by_trino}") == [(1, "a"), (3, "c")]


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_spark_and_trino_read_and_write_a_table_whose_metadata_files_are_gzip(
    trino: LocalTrino, sides: dict[str, Side], spark: SparkSession, kind: str
) -> None:
    """Iceberg's `write.metadata.compression-codec`: floe names each next file `*.gz.metadata.json` and
    writes it gzip; the Java engines (which read such a file by its name) commit on and read back."""
    side = sides[kind]
    name = _name("gz")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})
    created = side.pyiceberg().create_table(
        f"{side.cluster}.{name}", schema=data.schema, properties={"write.metadata.compression-codec": "gzip"}
    )
    created.append(data)
    assert trino.rows(f"SELECT count(*), sum(id) FROM {side.schema()}.{name}") == [(3, 6)]
    trino.query(f"INSERT INTO {side.schema()}.{name} VALUES (4, 'trino')")
    in_spark = f"{side.trino_catalog}.`{side.cluster}`.{name}"
    spark.sql(f"INSERT INTO {in_spark} VALUES (5, 'spark')")
    expected = [(1, "a"), (2, "b"), (3, "c"), (4, "trino"), (5, "spark")]
    assert _spark_rows(spark, in_spark) == expected
    assert trino.rows(f"SELECT * FROM {side.schema()}.{name} ORDER BY id") == expected
    table = side.pyiceberg().load_table(f"{side.cluster}.{name}")
    assert table.metadata_location.endswith(".gz.metadata.json")
    assert len(table.metadata.snapshots) == 3  # pyiceberg's, Trino's and Spark's commits
    # Every file of the table's history was written gzip, whichever engine committed.
    assert all(entry.metadata_file.endswith(".gz.metadata.json") for entry in table.metadata.metadata_log)


def _metadata(side: Side, table: str) -> dict[str, Any]:
    """The table's metadata as floe stores it (read with the admin token)."""
    headers = {"Authorization": f"Bearer {side.server.token()}"}
    with httpx.Client(base_url=side.server.url, timeout=60, headers=headers) as http:
        return stored_metadata(http, side.cluster, table)


def test_trino_476_reads_and_appends_to_v3_tables_but_not_their_deletion_vectors(
    trino: LocalTrino, sides: dict[str, Side], spark: SparkSession
) -> None:
    """Measured for README: Trino 476 (Iceberg 1.9.1 inside) reads and appends to a v3 table Spark
    created, with row lineage kept; its row-level writes are refused by its own Iceberg library, and once
    Spark's merge-on-read DELETE added a deletion vector Trino can no longer read the table."""
    side = sides["local"]
    name = _name("v3_by_spark")
    in_spark, in_trino = f"floe.`{side.cluster}`.{name}", f"{side.schema()}.{name}"
    spark.sql(
        f"CREATE TABLE {in_spark} (id BIGINT, name STRING) USING iceberg "
        f"TBLPROPERTIES ('format-version'='3', {MERGE_ON_READ})"
    )
    spark.sql(f"INSERT INTO {in_spark} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    assert trino.rows(f"SELECT * FROM {in_trino} ORDER BY id") == [(1, "a"), (2, "b"), (3, "c")]
    trino.query(f"INSERT INTO {in_trino} VALUES (4, 'd')")
    # Trino writes position delete files, which v3 forbids: refused before anything reaches floe.
    for statement in (
        f"DELETE FROM {in_trino} WHERE id = 1",
        f"UPDATE {in_trino} SET name = 'B' WHERE id = 2",
    ):
        with pytest.raises(TrinoQueryError, match="Must use DVs for position deletes in V3"):
            trino.query(statement)
    metadata = _metadata(side, name)
    assert metadata["format-version"] == 3
    assert [s["summary"]["engine-name"] for s in metadata["snapshots"]] == ["spark", "trino"]
    check_row_lineage(metadata)  # Trino's append took the row ids after Spark's
    assert metadata["next-row-id"] == 4

    spark.sql(f"DELETE FROM {in_spark} WHERE id = 2")  # a deletion vector (Puffin)
    assert {
        row.file_format for row in spark.sql(f"SELECT file_format FROM {in_spark}.all_delete_files").collect()
    } == {"PUFFIN"}
    with pytest.raises(TrinoQueryError, match="Unexpected PUFFIN file format"):
        trino.rows(f"SELECT * FROM {in_trino}")
    # Spark reads what both engines wrote, the deletion vector applied.
    assert _spark_rows(spark, in_spark) == [(1, "a"), (3, "c"), (4, "d")]


def test_trino_476_reads_and_appends_to_a_v3_table_pyiceberg_created(
    trino: LocalTrino, sides: dict[str, Side]
) -> None:
    """The v3 table pyiceberg 0.12 creates (but cannot append to) takes Trino's INSERT; all read it."""
    side = sides["local"]
    name = _name("v3_by_pyiceberg")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("label", pa.string())])
    created = side.pyiceberg().create_table(
        f"{side.cluster}.{name}", schema=schema, properties={"format-version": "3"}
    )
    # pyiceberg 0.12 creates v3 tables but cannot append to them (its manifest writer stops at v2).
    with pytest.raises(ValueError, match="Cannot write manifest for table version: 3"):
        created.append(pa.table({"id": pa.array([0], pa.int64()), "label": pa.array(["zero"])}))
    assert trino.rows(f"SELECT * FROM {side.schema()}.{name}") == []
    trino.query(f"INSERT INTO {side.schema()}.{name} VALUES (1, 'one'), (2, 'two')")
    assert trino.rows(f"SELECT * FROM {side.schema()}.{name} ORDER BY id") == [(1, "one"), (2, "two")]
    metadata = _metadata(side, name)
    assert (metadata["format-version"], metadata["next-row-id"]) == (3, 2)
    check_row_lineage(metadata)
    table = side.pyiceberg().load_table(f"{side.cluster}.{name}")
    assert table.format_version == 3
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2]
