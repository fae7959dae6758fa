"""Maintenance under a pipeline key (issue 29, item 13), as `floe up` runs it: the worker holds the
cluster's `pipeline-maintain-<cluster>` writer key, not the admin key. It compacts and expires its
cluster's tables, records its passes, and its commits are audited under that key; another cluster's
tables it never sees."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from catalog.client import FloeClient
from catalog.pipelines import load_yaml
from devtools.catalog_server import CatalogProcess
from floe.cli.pipeline_keys import MAINTAIN, PipelineKeys
from maintenance.worker import MaintenanceWorker, WorkerOptions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.e2e

TABLE = """\
  - source_cluster_name: {cluster}
    source_topic: events
    source_format: json
    partitioning_scheme: day
    schema:
      fields:
        - {{name: id, id: 1, type: long}}
    maintenance: {{target_file_size_mb: 1, snapshot_retention: 1s, min_snapshots_to_keep: 2, cold_after: 0s}}
"""
PIPELINE = """\
source_clusters:
  - {{name: mine, bootstrap_brokers: [{{hostname: localhost, port: 9092}}]}}
  - {{name: theirs, bootstrap_brokers: [{{hostname: localhost, port: 9092}}]}}
tables:
{mine}{theirs}"""


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    from runtime.spark import spark_session

    # No catalog of its own, as in floe up: the worker registers its key's catalogs.
    session = spark_session(
        "floe-pipeline-maintenance-tests",
        None,
        master="local[1]",
        conf={"spark.driver.memory": "768m", "spark.ui.showConsoleProgress": "false"},
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[CatalogProcess]:
    """floe up's embedded SQLite catalog."""
    with CatalogProcess(home=tmp_path / "floe-home") as process:
        yield process


def _row(offset: int, schema: pa.Schema) -> pa.Table:
    at = dt.datetime(2024, 3, 1, 12, tzinfo=dt.UTC)
    kafka = {"partition": 0, "offset": offset, "timestamp": at, "key": None, "headers": []}
    return pa.Table.from_pylist([{"id": offset, "_kafka": kafka}], schema=schema)


def test_maintenance_under_its_pipeline_key(
    spark: SparkSession, server: CatalogProcess, tmp_path: Path
) -> None:
    pipeline = PIPELINE.format(mine=TABLE.format(cluster="mine"), theirs=TABLE.format(cluster="theirs"))
    with FloeClient(server.url, server.admin_client_id, server.admin_client_secret) as admin:
        admin.apply_pipeline(load_yaml(pipeline).to_json())
        catalog = server.catalog()
        for cluster in ("mine", "theirs"):
            table = catalog.load_table((cluster, "events"))
            schema = table.schema().as_arrow()
            for offset in range(6):
                table.append(_row(offset, schema))
        key = PipelineKeys(admin, tmp_path).key(MAINTAIN, "mine")
        options = WorkerOptions(url=server.url, client_id=key.client_id, client_secret=key.client_secret)
        last_entry = admin.audit(limit=1).entries[0].id
        worker = MaintenanceWorker(spark, options)
        try:
            results = worker.run_once()
        finally:
            worker.close()
        assert [str(r.table) for r in results] == ["mine.events", "mine.events_dlq"], results
        mine = next(r for r in results if str(r.table) == "mine.events")
        assert not mine.failed, mine.summary()
        assert mine.before is not None
        assert mine.after is not None
        assert (mine.before.data_files, mine.after.data_files) == (6, 1)
        assert catalog.load_table(("theirs", "events")).inspect.files().num_rows == 6  # untouched

        entries = [e for e in admin.audit(limit=500).entries if e.id > last_entry]
        commits = [
            e for e in entries if e.action in ("updateTable", "commitTransaction") and "mine" in e.target
        ]
        assert commits
        assert {e.subject for e in commits} == {key.client_id}
        recorded = {
            e.target for e in entries if e.action == "recordMaintenancePass" and e.subject == key.client_id
        }
        assert recorded, [(e.subject, e.action) for e in entries]
