"""The documentation's engine blocks work as written: each is copied from docs/engines.md (where they
moved from README), placeholders filled, and run.

pyiceberg and DuckDB blocks run as Python programs of their own (DuckDB's with a fresh HOME, so its
extensions install from the wheels into an empty directory: nothing is downloaded); the Spark block's
properties configure a PySpark session in a process of its own (`spark.jars.packages` resolves the
Iceberg runtime from Maven Central once, into an Ivy cache kept in floe's cache directory). The Trino
blocks are Trino's catalog files in tests/e2e/test_trino.py. One floe server serves the module, with
the blocks' example cluster `orders_kafka` and its table `orders`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from devtools.catalog_server import CatalogProcess
from runtime.artifacts import cache_dir
from runtime.java import java_home
from tests.e2e.duckdb_client import printed_lines
from tests.e2e.readme_blocks import ENGINES_PAGE, engine_block, filled, properties

CLUSTER = "orders_kafka"  # the names the blocks query
ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "item": pa.array(["a", "b", "c"])})
# Every marked block, and the test that runs it as written.
COVERED = {
    "pyiceberg": "test_pyiceberg_block",
    "duckdb": "test_duckdb_block",
    "spark": "test_spark_block",
    "trino-local": "tests/e2e/test_trino.py",
    "trino-s3": "tests/e2e/test_trino.py",
}


@dataclass(frozen=True)
class Floe:
    server: CatalogProcess
    client_id: str
    client_secret: str

    def fill(self, block: str) -> str:
        return filled(block, url=self.server.url, client_id=self.client_id, client_secret=self.client_secret)


@pytest.fixture(scope="module")
def floe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Floe]:
    """floe with cluster `orders_kafka`, its table `orders` (three rows) and a writer key of it."""
    home = tmp_path_factory.mktemp("readme-floe")
    with CatalogProcess(f"sqlite+aiosqlite:///{home / 'floe.db'}", home=home) as server:
        headers = {"Authorization": f"Bearer {server.token()}"}
        with httpx.Client(base_url=server.url, timeout=60, headers=headers) as admin:
            assert admin.post("/management/v1/clusters", json={"name": CLUSTER}).status_code == 201
            key = admin.post("/management/v1/keys", json={"cluster": CLUSTER, "role": "writer"}).json()
        server.catalog().create_table(f"{CLUSTER}.orders", schema=ROWS.schema).append(ROWS)
        yield Floe(server, key["client_id"], key["client_secret"])


def _run_python(program: str, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    result = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


def test_every_engine_block_is_run_by_a_test() -> None:
    marked = re.findall(r"<!-- engine: ([\w-]+) -->", ENGINES_PAGE.read_text(encoding="utf-8"))
    assert sorted(marked) == sorted(COVERED)


def test_pyiceberg_block(floe: Floe) -> None:
    output = _run_python(floe.fill(engine_block("pyiceberg")))
    assert output.splitlines() == [f"[('{CLUSTER}', 'orders')]", "3"]


def test_duckdb_block(floe: Floe, tmp_path: Path) -> None:
    # A fresh HOME: DuckDB's extension directory (~/.duckdb) starts empty, so the block's own INSTALL
    # from the wheels is what makes the extensions available, with automatic downloads switched off.
    output = _run_python(floe.fill(engine_block("duckdb")), env={"HOME": str(tmp_path)})
    assert printed_lines(output) == ["[(3,)]"], output
    assert list((tmp_path / ".duckdb" / "extensions").rglob("iceberg.duckdb_extension"))


SPARK_PROGRAM = """
import json, sys
from pyspark.sql import SparkSession

builder = SparkSession.builder.master("local[1]").appName("readme-spark")
for key, value in json.loads(sys.argv[1]).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
table = sys.argv[2]
print(spark.sql("SELECT count(*) FROM floe.orders_kafka.orders").collect()[0][0])
spark.sql(f"CREATE TABLE floe.orders_kafka.{table} (id bigint, item string) USING iceberg")
spark.sql(f"INSERT INTO floe.orders_kafka.{table} SELECT id, item FROM floe.orders_kafka.orders")
spark.sql(
    f"MERGE INTO floe.orders_kafka.{table} t USING (SELECT 2L AS id, 'B' AS item UNION ALL SELECT 9L, 'z') s "
    "ON t.id = s.id WHEN MATCHED THEN UPDATE SET item = s.item WHEN NOT MATCHED THEN INSERT *"
)
spark.sql(f"DELETE FROM floe.orders_kafka.{table} WHERE id = 1")
view = f"floe.orders_kafka.{table}_view"
spark.sql(f"CREATE VIEW {view} AS SELECT id FROM floe.orders_kafka.{table} WHERE id > 2")
print(sorted(row[0] for row in spark.sql(f"SELECT id FROM {view}").collect()))
spark.stop()
"""


def test_spark_block(floe: Floe, tmp_path: Path) -> None:
    conf = properties(floe.fill(engine_block("spark")))
    # The test's own session settings (not the catalog's): a small local session on loopback, and the
    # Ivy cache of `spark.jars.packages` in floe's download cache rather than ~/.ivy2.
    conf |= {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.jars.ivy": str(cache_dir() / "ivy"),
    }
    table = f"by_spark_{uuid.uuid4().hex[:6]}"
    env = {"JAVA_HOME": java_home() or "", "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SPARK_PROGRAM), json.dumps(conf), table],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.splitlines()[-2:] == ["3", "[3, 9]"]
    # Another engine reads what Spark wrote.
    written = floe.server.catalog().load_table(f"{CLUSTER}.{table}").scan().to_arrow()
    assert sorted(zip(written.column("id").to_pylist(), written.column("item").to_pylist(), strict=True)) == [
        (2, "B"),
        (3, "c"),
        (9, "z"),
    ]
