"""`floe maintain`: one real pass with Spark, the benchmark, and an action that loses a commit race.

The pass test runs a real `floe serve` of its own per backend (so the pipeline and the tables it sees
are this test's) and one Spark session (local[2]) for the whole module: 200 small appends become one
file per partition, queries answer the same before and after (DuckDB and pyiceberg), snapshots are
expired per policy, an old orphan file and the data file of a write floe refused are removed while a
fresh unreferenced file (a commit in flight) and every referenced file stay, and each table's pass is
recorded in floe.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import msgspec
import pyarrow as pa
import pytest
from click.testing import CliRunner
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import ManifestContent
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import LongType, NestedField

from catalog.kafka_offsets import END_OFFSETS, START_OFFSETS, TOPIC
from catalog.pipelines import load_yaml
from catalog.pipelines.maintenance import (
    DEFAULT_POLICY,
)
from devtools.catalog_server import CatalogProcess
from maintenance.worker import MaintenanceWorker, WorkerOptions
from tests.e2e.duckdb_client import attach_catalog, connect, quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

from tests.unit.test_maintenance import PASSES, PIPELINE_YAML

# -- one real pass with Spark ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """One Spark session (local[2]) for the module; the worker binds its own catalogs on it."""
    from runtime.spark import CatalogConnection, spark_session

    session = spark_session(
        "floe-maintain-tests",
        # Never used: the worker registers a catalog per floe URL and warehouse.
        CatalogConnection("http://127.0.0.1:9", "default", "unused", "unused"),
        master="local[2]",
        conf={
            "spark.driver.memory": "1g",
            "spark.ui.showConsoleProgress": "false",
            # Resolving a procedure's table argument initializes the default catalog: Spark's own.
            "spark.sql.defaultCatalog": "spark_catalog",
        },
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def maintained_server(fresh_database_url: str, tmp_path: Path) -> Iterator[CatalogProcess]:
    with CatalogProcess(fresh_database_url, home=tmp_path / "floe-home") as server:
        yield server


def kafka_rows(schema: pa.Schema, start: int, count: int, day: int) -> pa.Table:
    at = dt.datetime(2024, 3, 1 + day, 12, tzinfo=dt.UTC)
    rows = [
        {
            "id": i,
            "name": f"name-{i}",
            "_kafka": {"partition": 0, "offset": i, "timestamp": at, "key": None, "headers": []},
        }
        for i in range(start, start + count)
    ]
    return pa.Table.from_pylist(rows, schema=schema)


def local_path(location: str) -> Path:
    return Path(urlsplit(location).path)


def referenced_files(table: Table) -> set[Path]:
    """Every file the table's metadata references: metadata files, manifest lists, manifests, data and
    delete files of every snapshot."""
    io = table.io
    found = {local_path(e.metadata_file) for e in table.metadata.metadata_log}
    found.add(local_path(str(table.metadata_location)))
    for snap in table.metadata.snapshots:
        found.add(local_path(snap.manifest_list))
        for manifest in snap.manifests(io):
            found.add(local_path(manifest.manifest_path))
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                found.add(local_path(entry.data_file.file_path))
    return found


def offsets(start: int, end: int) -> dict[str, str]:
    """Snapshot properties of a commit claiming partition 0 of topic `t` from `start` to `end`."""
    return {
        TOPIC: "t",
        START_OFFSETS: json.dumps({"0": start} if start else {}),
        END_OFFSETS: json.dumps({"0": end}),
    }


def data_file_count(table: Table, content: ManifestContent = ManifestContent.DATA) -> int:
    snap = table.current_snapshot()
    if snap is None:
        return 0
    return sum(
        len(m.fetch_manifest_entry(table.io)) for m in snap.manifests(table.io) if m.content == content
    )


def duck_rows(server: CatalogProcess, extensions: Path, ref: str) -> list[tuple[Any, ...]]:
    connection = connect(extensions)
    try:
        attach_catalog(
            connection,
            endpoint=server.url,
            warehouse="default",
            client_id=server.admin_client_id,
            client_secret=server.admin_client_secret,
        )
        rows: list[tuple[Any, ...]] = connection.execute(
            f"SELECT id, name, _kafka.offset, epoch_us(_kafka.timestamp) FROM {ref} ORDER BY id"
        ).fetchall()
        return rows
    finally:
        connection.close()


def backdate(folder: Path, seconds: float) -> None:
    moment = time.time() - seconds
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (moment, moment))


@pytest.mark.e2e
def test_one_pass_compacts_expires_and_removes_orphans(
    spark: SparkSession, maintained_server: CatalogProcess, tmp_path: Path
) -> None:
    from floe.cli.maintain import maintain_command
    from maintenance.metrics import REGISTRY
    from maintenance.spark_actions import SparkActions
    from runtime.spark import CatalogConnection

    server = maintained_server
    cluster = "c1"
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.token()}"}, timeout=60
    ) as http:
        applied = http.put(
            "/management/v1/pipeline",
            json={"config": load_yaml(PIPELINE_YAML.format(cluster=cluster)).to_json()},
        )
        assert applied.status_code == 200, applied.text
        catalog: RestCatalog = server.catalog()
        events = catalog.load_table((cluster, "events"))
        arrow_schema = events.schema().as_arrow()
        for i in range(200):
            events.append(kafka_rows(arrow_schema, i, 1, day=i % 4))
        # A table outside floe.yaml (top-level policy: snapshots kept 7 days), written just now.
        catalog.create_namespace("other")
        other = catalog.create_table(
            ("other", "events"), Schema(NestedField(1, "id", LongType(), required=False))
        )
        for i in range(12):
            other.append(pa.table({"id": pa.array([i], pa.int64())}))
        # A table with position delete files (Spark's merge-on-read DELETE): one per data file, ten in
        # its (hot) partition, enough to compact it.
        deletes = catalog.create_table(
            ("other", "deletes"),
            Schema(NestedField(1, "id", LongType(), required=False)),
            properties={"write.delete.mode": "merge-on-read"},
        )
        for i in range(20):
            deletes.append(pa.table({"id": pa.array([i], pa.int64())}))
        # A write floe refused (its Kafka offsets conflict): pyiceberg uploaded its data file before
        # committing, and nothing references it. Orphan removal is what cleans such files up.
        refused = catalog.create_table(
            ("other", "refused"), Schema(NestedField(1, "id", LongType(), required=False))
        )
        refused.append(pa.table({"id": pa.array([0], pa.int64())}), snapshot_properties=offsets(0, 10))
        refused_folder = local_path(refused.location())
        with pytest.raises(CommitFailedException, match="Kafka offsets conflict"):
            refused.append(pa.table({"id": pa.array([1], pa.int64())}), snapshot_properties=offsets(3, 12))
        refused = catalog.load_table(("other", "refused"))
        left_behind = {p for p in refused_folder.rglob("*") if p.is_file()} - referenced_files(refused)
        assert any(p.suffix == ".parquet" for p in left_behind), left_behind
        backdate(refused_folder, 2 * 86_400)

        spark_catalog = SparkActions(spark).catalog(
            CatalogConnection(server.url, "default", server.admin_client_id, server.admin_client_secret)
        )
        spark.sql(f"DELETE FROM `{spark_catalog}`.`other`.`deletes` WHERE id % 2 = 0")
        deletes = catalog.load_table(("other", "deletes"))
        assert data_file_count(deletes, ManifestContent.DELETES) == 10

        events = catalog.load_table((cluster, "events"))
        assert data_file_count(events) == 200
        assert len(events.metadata.snapshots) == 200
        ref = f"floe.{quote(cluster)}.{quote('events')}"
        extensions = tmp_path / "duckdb-extensions"
        duck_before = duck_rows(server, extensions, ref)
        arrow_before = events.scan().to_arrow().sort_by("id").to_pylist()
        assert len(duck_before) == 200

        # Everything the table holds is two days old; one unreferenced file is too (an orphan),
        # another was written a moment ago (a commit in flight): only the old one may go.
        folder = local_path(events.location())
        backdate(folder, 2 * 86_400)
        orphan = folder / "data" / f"orphan-{uuid.uuid4().hex}.parquet"
        orphan.write_bytes(b"not referenced")
        os.utime(orphan, (time.time() - 2 * 86_400,) * 2)
        in_flight = folder / "data" / f"in-flight-{uuid.uuid4().hex}.parquet"
        in_flight.write_bytes(b"a commit still in flight")

        pass_started_ms = int(time.time() * 1000)
        result = CliRunner().invoke(
            maintain_command,
            ["--once", "--url", server.url, "--metrics-port", "0"],
            env={
                "FLOE_CLIENT_ID": server.admin_client_id,
                "FLOE_CLIENT_SECRET": server.admin_client_secret,
            },
            catch_exceptions=False,
        )
        assert result.exit_code == 0, result.output

        # One file per partition (4 days), the same rows for DuckDB and pyiceberg.
        events = catalog.load_table((cluster, "events"))
        assert data_file_count(events) == 4
        assert duck_rows(server, extensions, ref) == duck_before
        assert events.scan().to_arrow().sort_by("id").to_pylist() == arrow_before

        # Snapshots older than the pass are gone but for the newest three (the policy).
        ancestry = [s.snapshot_id for s in events.snapshots()][::-1]
        snapshots = events.metadata.snapshots
        kept_old = {s.snapshot_id for s in snapshots if s.timestamp_ms < pass_started_ms}
        assert kept_old <= set(ancestry[:3])
        assert len(snapshots) < 10

        # The old orphan is removed; the fresh file and everything referenced stay.
        assert not orphan.exists()
        assert in_flight.exists()
        missing = [p for p in referenced_files(events) if not p.exists()]
        assert not missing

        # What the refused write left is gone (older than orphan_file_age); the table is intact.
        refused = catalog.load_table(("other", "refused"))
        assert not [p for p in left_behind if p.exists()]
        assert all(p.exists() for p in referenced_files(refused))
        assert refused.scan().to_arrow()["id"].to_pylist() == [0]

        # The table outside floe.yaml was written just now (a hot partition with few files: not
        # compacted) and keeps its snapshots for 7 days (its 12 small manifests may be rewritten).
        other = catalog.load_table(("other", "events"))
        assert data_file_count(other) == 12
        assert len(other.metadata.snapshots) >= 12
        assert sorted(other.scan().to_arrow()["id"].to_pylist()) == list(range(12))

        # The deletes are applied by compaction and the delete files dropped; the rows stay the same.
        deletes = catalog.load_table(("other", "deletes"))
        assert data_file_count(deletes, ManifestContent.DELETES) == 0, str(
            http.get(PASSES, params={"table": "deletes"}).json()["passes"][0]["actions"]
        )
        assert data_file_count(deletes) == 1
        assert sorted(deletes.scan().to_arrow()["id"].to_pylist()) == list(range(1, 20, 2))

        # Every table's pass is recorded in floe.
        passes = http.get(PASSES, params={"limit": 100}).json()["passes"]
        by_table = {(tuple(p["namespace"]), p["table"]): p for p in passes}
        assert set(by_table) == {
            ((cluster,), "events"),
            ((cluster,), "events_dlq"),
            (("other",), "events"),
            (("other",), "deletes"),
            (("other",), "refused"),
        }
        record = by_table[((cluster,), "events")]
        assert record["error"] is None
        actions = {a["name"]: a for a in record["actions"]}
        assert all("error" not in a for a in record["actions"]), record["actions"]
        assert {"rewrite_data_files", "expire_snapshots", "remove_orphan_files"} <= set(actions)
        assert actions["rewrite_data_files"]["result"]["rewritten_data_files_count"] == 200
        assert actions["remove_orphan_files"]["result"]["orphan_files_removed"] == 1
        assert [local_path(p) for p in actions["remove_orphan_files"]["result"]["removed"]] == [orphan]
        assert (record["before"]["data_files"], record["after"]["data_files"]) == (200, 4)
        assert record["before"]["snapshots"] == 200
        assert record["after"]["snapshots"] == len(snapshots)
        assert "rewrite_data_files" not in {a["name"] for a in by_table[(("other",), "events")]["actions"]}
        assert "expire_snapshots" not in {a["name"] for a in by_table[(("other",), "events")]["actions"]}

    labels = {"warehouse": "default", "table": f"{cluster}.events"}
    assert REGISTRY.get_sample_value("floe_maintenance_data_files", labels) == 4
    assert REGISTRY.get_sample_value("floe_maintenance_snapshots", labels) == len(snapshots)
    assert (REGISTRY.get_sample_value("floe_maintenance_last_pass_timestamp_seconds", labels) or 0) > (
        pass_started_ms / 1000
    )

    # The long-running worker: a pass over every table right away, the next one an interval later.
    worker = MaintenanceWorker(
        spark, WorkerOptions(server.url, server.admin_client_id, server.admin_client_secret)
    )
    stop = threading.Event()
    loop = threading.Thread(target=worker.run_forever, args=(stop,), daemon=True)
    loop.start()
    try:
        deadline = time.monotonic() + 300
        recorded: list[dict[str, Any]] = []
        while time.monotonic() < deadline and len(recorded) < 2 * len(by_table):
            time.sleep(1)
            recorded = [msgspec.to_builtins(p) for p in worker.control.passes(limit=100)]
        assert len(recorded) == 2 * len(by_table)
        newest = recorded[: len(by_table)]
        assert {(tuple(p["namespace"]), p["table"]) for p in newest} == set(by_table)
        assert all(p["error"] is None for p in newest)
        # Compacted and expired already: only the metadata properties are in place now.
        again = {
            a["name"]
            for a in next(p for p in newest if p["table"] == "events" and p["namespace"] == [cluster])[
                "actions"
            ]
        }
        assert "rewrite_data_files" not in again
        assert "set_properties" not in again
    finally:
        stop.set()
        loop.join(timeout=120)
        worker.close()
    assert not loop.is_alive()


# -- the benchmark, tiny ---------------------------------------------------------------------------


@pytest.mark.e2e
def test_the_benchmark_runs(spark: SparkSession, tmp_path: Path) -> None:
    """`python -m benchmarks.maintenance` at a tiny size, on the module's Spark session, so its code does
    not rot; no timing is asserted."""
    import json

    from benchmarks.maintenance.report import render_markdown, write_results
    from benchmarks.maintenance.run import parse_args, run

    args = parse_args(["--files", "20", "--rows-per-file", "10", "--repetitions", "2"])
    doc = run(args, spark)
    table = doc["table"]
    assert (table["before"]["data_files"], table["after"]["data_files"]) == (20, 4)
    assert {q["key"] for q in doc["queries"]} == {"count", "aggregate", "filter", "one_day"}
    assert all(q["before_median_ms"] > 0 and q["after_median_ms"] > 0 for q in doc["queries"])
    assert doc["maintenance"]["peak_rss_mb"]["spark_jvm"] > 0
    assert "rewrite_data_files" in doc["maintenance"]["actions"]
    json_path, md_path = write_results(doc, tmp_path)
    assert json.loads(json_path.read_text())["table"]["after"]["data_files"] == 4
    assert md_path.read_text() == render_markdown(doc)


@pytest.mark.e2e
def test_an_action_that_loses_a_commit_race_runs_again(
    spark: SparkSession, maintained_server: CatalogProcess
) -> None:
    """The race CI once hit with ingestion: a manifest rewrite planned on a snapshot with a manifest
    that lists only deleted files, then an append (which drops such manifests), then the rewrite's
    commit, which Iceberg refuses without retrying. The worker runs the action again on the table as
    it is now."""
    from maintenance.spark_actions import TableRef, describe_error, is_commit_conflict
    from maintenance.worker import MaintainedTable, PassResult
    from runtime.spark import CatalogConnection

    server = maintained_server
    worker = MaintenanceWorker(
        spark, WorkerOptions(server.url, server.admin_client_id, server.admin_client_secret)
    )
    spark_catalog = worker.actions.catalog(
        CatalogConnection(server.url, "default", server.admin_client_id, server.admin_client_secret)
    )
    name = f"`{spark_catalog}`.`race`.`events`"
    spark.sql(f"CREATE NAMESPACE `{spark_catalog}`.`race`")
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING iceberg")
    spark.sql(f"INSERT INTO {name} VALUES (1), (2)")
    spark.sql(f"INSERT INTO {name} VALUES (3)")
    # A metadata-only delete of the first file: its manifest now lists one deleted file.
    spark.sql(f"DELETE FROM {name} WHERE id IN (1, 2)")
    jvm: Any = spark._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, name)
    manifests = table.currentSnapshot().dataManifests(table.io())
    deleted_only = [
        m for m in manifests if not m.hasAddedFiles() and not m.hasExistingFiles() and m.hasDeletedFiles()
    ]
    assert len(deleted_only) == 1
    # Ingestion appends: Iceberg leaves manifests of only deleted files out of the new snapshot.
    spark.sql(f"INSERT INTO {name} VALUES (4)")

    attempts: list[str] = []

    def rewrite_manifests() -> dict[str, Any]:
        if not attempts:
            attempts.append("stale")
            table.refresh()
            stale = table.rewriteManifests()
            stale.deleteManifest(deleted_only[0])
            stale.commit()  # planned before the append: Iceberg refuses it
        attempts.append("fresh")
        return worker.actions.rewrite_manifests(TableRef(spark_catalog, ("race",), "events"))

    result = PassResult(
        MaintainedTable("default", ("race",), "events", DEFAULT_POLICY), dt.datetime.now(dt.UTC)
    )
    assert worker.run_action(result, "rewrite_manifests", rewrite_manifests)
    assert attempts == ["stale", "fresh"]
    [outcome] = result.actions
    assert outcome.error is None, outcome
    assert outcome.result["attempts"] == 2, outcome
    assert int(outcome.result["rewritten_manifests_count"]) >= 2
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {name}").collect()) == [3, 4]

    # What Iceberg raised is a conflict; an error that is not one is recorded at once.
    stale = table.rewriteManifests()
    stale.deleteManifest(deleted_only[0])
    with pytest.raises(Exception, match="could not be found in the latest snapshot") as raised:
        stale.commit()
    assert is_commit_conflict(raised.value), describe_error(raised.value)

    calls: list[int] = []

    def missing_table() -> dict[str, Any]:
        calls.append(1)
        return worker.actions.rewrite_manifests(TableRef(spark_catalog, ("race",), "missing"))

    assert not worker.run_action(result, "rewrite_manifests", missing_table)
    assert len(calls) == 1
    assert result.actions[-1].error
    assert "attempts" not in result.actions[-1].result
    worker.close()
