"""Format v3 end to end: Spark 4.0 with Iceberg 1.11 writes v3 tables through floe, other engines read them.

One Spark session (local[2]) for the module, bound to each backend's session `floe serve` as its own
catalog. A v3 table in merge-on-read mode takes an INSERT, a DELETE, an UPDATE and a MERGE: Spark writes
deletion vectors (Puffin files) and floe tracks row lineage (each snapshot's `first-row-id` is the table's
`next-row-id` before it, which then advances by the snapshot's `added-rows`). Spark, pyiceberg 0.12 and
DuckDB 1.5.5 (offline extensions) read the same rows back; a purge empties the table's folder.
A v2 table upgraded with `ALTER TABLE ... SET TBLPROPERTIES ('format-version'='3')` keeps its rows and
starts row lineage at 0; DuckDB then appends to it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import duckdb
import httpx
import pytest

from devtools.catalog_server import CatalogProcess
from tests.e2e.duckdb_client import attach_catalog, connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MERGE_ON_READ = ", ".join(
    f"'write.{operation}.mode'='merge-on-read'" for operation in ("delete", "update", "merge")
)


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    from runtime.spark import CatalogConnection, spark_session

    session = spark_session(
        "floe-format-v3-tests",
        # Never used: each test binds a catalog to its backend's server (`floe_catalog`).
        CatalogConnection("http://127.0.0.1:9", "default", "unused", "unused"),
        master="local[2]",
        conf={"spark.driver.memory": "1g", "spark.ui.showConsoleProgress": "false"},
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def floe_catalog(spark: SparkSession, catalog_server: CatalogProcess) -> str:
    """The Spark catalog of this backend's server (Spark loads catalogs lazily, by name)."""
    from runtime.spark import CatalogConnection

    name = "floe_" + hashlib.sha256(str(catalog_server.url).encode()).hexdigest()[:8]
    connection = CatalogConnection(
        catalog_server.url, "default", catalog_server.admin_client_id, catalog_server.admin_client_secret
    )
    for key, value in connection.spark_properties(name).items():
        spark.conf.set(key, value)
    return name


@pytest.fixture
def duck(catalog_server: CatalogProcess, duckdb_extensions: Path) -> Iterator[Any]:
    connection = connect(duckdb_extensions)
    attach_catalog(
        connection,
        endpoint=catalog_server.url,
        warehouse="default",
        client_id=catalog_server.admin_client_id,
        client_secret=catalog_server.admin_client_secret,
    )
    try:
        yield connection
    finally:
        connection.close()


def stored_metadata(http: httpx.Client, namespace: str, table: str) -> dict[str, Any]:
    response = http.get(f"/v1/default/namespaces/{namespace}/tables/{table}")
    assert response.status_code == 200, response.text
    metadata: dict[str, Any] = response.json()["metadata"]
    return metadata


def check_row_lineage(metadata: dict[str, Any], lineage_from: int = 0) -> None:
    """Snapshots from `lineage_from` on took disjoint, consecutive row id ranges from next-row-id."""
    next_row_id = 0
    for snapshot in metadata["snapshots"][lineage_from:]:
        assert snapshot["first-row-id"] == next_row_id, metadata["snapshots"]
        next_row_id += snapshot["added-rows"]
    assert metadata["next-row-id"] == next_row_id


def test_spark_writes_deletion_vectors_to_a_v3_table_and_every_engine_reads_it(
    spark: SparkSession,
    floe_catalog: str,
    catalog_server: CatalogProcess,
    http: httpx.Client,
    duck: duckdb.DuckDBPyConnection,
    namespace: str,
) -> None:
    table = f"`{floe_catalog}`.`{namespace}`.`events`"

    def sql(statement: str) -> list[Any]:
        return spark.sql(statement).collect()

    sql(
        f"CREATE TABLE {table} (id BIGINT, name STRING) USING iceberg "
        f"TBLPROPERTIES ('format-version'='3', {MERGE_ON_READ})"
    )
    sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')")
    sql(f"DELETE FROM {table} WHERE id = 2")
    sql(f"UPDATE {table} SET name = 'C' WHERE id = 3")
    spark.createDataFrame([(4, "D"), (5, "e")], "id BIGINT, name STRING").createOrReplaceTempView("changes")
    sql(
        f"MERGE INTO {table} t USING changes c ON t.id = c.id "
        "WHEN MATCHED THEN UPDATE SET name = c.name WHEN NOT MATCHED THEN INSERT *"
    )
    expected = [(1, "a"), (3, "C"), (4, "D"), (5, "e")]
    assert sorted((row.id, row.name) for row in sql(f"SELECT id, name FROM {table}")) == expected

    # Deletion vectors, not position delete files: what makes these commits v3.
    delete_files = sql(f"SELECT file_format FROM {table}.all_delete_files")
    assert delete_files
    assert {row.file_format for row in delete_files} == {"PUFFIN"}
    metadata = stored_metadata(http, namespace, "events")
    assert metadata["format-version"] == 3
    assert [s["summary"]["operation"] for s in metadata["snapshots"]] == [
        "append",
        "delete",
        "overwrite",
        "overwrite",
    ]
    assert all(s["summary"].get("added-dvs") == "1" for s in metadata["snapshots"][1:])
    check_row_lineage(metadata)
    assert metadata["next-row-id"] > 0
    # Row ids Spark reads are the ones the catalog's lineage assigned: unique, below next-row-id.
    row_ids = [row._row_id for row in sql(f"SELECT _row_id FROM {table}")]
    assert len(set(row_ids)) == len(expected)
    assert all(0 <= row_id < metadata["next-row-id"] for row_id in row_ids)

    loaded = catalog_server.catalog().load_table((namespace, "events"))
    assert loaded.format_version == 3
    pyiceberg_rows = loaded.scan(selected_fields=("id", "name")).to_arrow().to_pylist()
    assert sorted((row["id"], row["name"]) for row in pyiceberg_rows) == expected
    duck_rows = duck.execute(f'SELECT id, name FROM floe."{namespace}".events ORDER BY id').fetchall()
    assert duck_rows == expected

    # The table is in the folder floe assigned it: a purge leaves nothing of it. (Spark's DROP TABLE ...
    # PURGE drops without `purgeRequested` and deletes the reachable files itself; pyiceberg asks floe.)
    folder = Path(unquote(urlparse(metadata["location"]).path))
    assert any(folder.rglob("*.puffin"))
    catalog_server.catalog().purge_table((namespace, "events"))
    assert not folder.exists()


def test_spark_upgrades_a_v2_table_to_v3(
    spark: SparkSession,
    floe_catalog: str,
    catalog_server: CatalogProcess,
    http: httpx.Client,
    duck: duckdb.DuckDBPyConnection,
    namespace: str,
) -> None:
    table = f"`{floe_catalog}`.`{namespace}`.`old`"
    spark.sql(f"CREATE TABLE {table} (id BIGINT) USING iceberg TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO {table} VALUES (1), (2)")
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('format-version'='3', {MERGE_ON_READ})")
    upgraded = stored_metadata(http, namespace, "old")
    assert (upgraded["format-version"], upgraded["next-row-id"]) == (3, 0)
    assert "first-row-id" not in upgraded["snapshots"][0]
    spark.sql(f"INSERT INTO {table} VALUES (3)")
    spark.sql(f"DELETE FROM {table} WHERE id = 1")
    assert sorted(row.id for row in spark.sql(f"SELECT id FROM {table}").collect()) == [2, 3]

    metadata = stored_metadata(http, namespace, "old")
    check_row_lineage(metadata, lineage_from=1)
    # The first v3 snapshot assigned row ids to the rows written before the upgrade too.
    assert metadata["snapshots"][1]["added-rows"] == 3
    loaded = catalog_server.catalog().load_table((namespace, "old"))
    assert sorted(loaded.scan().to_arrow().column("id").to_pylist()) == [2, 3]
    assert duck.execute(f'SELECT id FROM floe."{namespace}".old ORDER BY id').fetchall() == [(2,), (3,)]

    # DuckDB writes to the v3 table too, taking its row ids after Spark's.
    duck.execute(f'INSERT INTO floe."{namespace}".old VALUES (4), (5)')
    after = stored_metadata(http, namespace, "old")
    check_row_lineage(after, lineage_from=1)
    assert after["next-row-id"] == metadata["next-row-id"] + 2
    assert sorted(row.id for row in spark.sql(f"SELECT id FROM {table}").collect()) == [2, 3, 4, 5]
