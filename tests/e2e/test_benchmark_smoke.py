"""The catalog benchmark's floe side, run for about a second so its code does not rot.

It seeds a small data set through the benchmark's own code, drives every workload briefly with the
benchmark's load generator and renders the results; no timings are asserted (the Java reference
server is not started here: `python -m benchmarks.catalog` does that).

The ingestion benchmark's throughput phase runs for each system on a few thousand records, with its
real broker, catalog and Spark ingester.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from pathlib import Path

import pytest

from benchmarks.catalog import scale_out
from benchmarks.catalog.report import FLOE, WorkloadResult, render_markdown, results_document, write_results
from benchmarks.catalog.run import Server, measure_server
from benchmarks.catalog.workloads import Dataset, discover, seed, workloads
from benchmarks.ingest import run as ingest_benchmark
from benchmarks.ingest.ingesters import FLOE as INGEST_FLOE
from benchmarks.ingest.ingesters import PLAIN as INGEST_PLAIN
from devtools.catalog_server import CatalogProcess

# The catalog and ingest benchmarks (Kafka and Spark on the ingest side): `pytest -m "not e2e"` skips them.
pytestmark = pytest.mark.e2e

SECONDS_PER_WORKLOAD = 0.2


def test_floe_side_of_the_benchmark_runs(catalog_server: CatalogProcess, tmp_path: Path) -> None:
    target = discover(FLOE, catalog_server.url, catalog_server.token())
    dataset = Dataset(suffix=f"_{uuid.uuid4().hex[:8]}", list_tables=5, appends=2, rows_per_append=10)
    seeded = seed(target, dataset)
    assert seeded.snapshots == 2
    assert seeded.metadata_json_bytes > 0

    def pids() -> list[int]:
        return [catalog_server.process.pid] if catalog_server.process else []

    server = Server(target, "floe under test", pids)
    rows: list[WorkloadResult] = []
    for workload in workloads(clients=4):
        row = WorkloadResult.of(workload)
        row.results[FLOE] = measure_server(server, dataset, workload, SECONDS_PER_WORKLOAD, warmup_s=0.0)
        rows.append(row)

    measured = {row.key: row.results[FLOE] for row in rows}
    for key in ("load_table", "load_table_etag", "list_tables", "commit_1"):
        assert measured[key].requests > 0, key
        assert measured[key].errors == 0, (key, measured[key].statuses)
    assert set(measured["load_table"].statuses) == {"200"}
    assert set(measured["load_table_etag"].statuses) == {"304"}
    assert measured["load_table_etag"].notes["etag_supported"] is True
    # Eight writers on one table may lose races; some of their commits must land all the same.
    assert measured["commit_8"].statuses.get("200", 0) > 0

    doc = results_document(
        settings={"started_at": "now", "duration_s": SECONDS_PER_WORKLOAD, "warmup_s": 0.0},
        machine={"cpus": 1, "cpu_model": "test", "memory_gb": 1, "os": "test", "load_average_before": []},
        version_info={"floe": "test"},
        servers={FLOE: server.description},
        seeds={FLOE: seeded},
        workload_results=rows,
    )
    json_path, md_path = write_results(doc, tmp_path)
    assert json.loads(json_path.read_text())["workloads"][0]["results"][FLOE]["requests"] > 0
    assert "loadTable (full response)" in md_path.read_text()
    assert render_markdown(doc) == md_path.read_text()


def test_scale_out_mode_measures_and_audits_commits(catalog_server: CatalogProcess, tmp_path: Path) -> None:
    """`python -m benchmarks.catalog.scale_out`'s pieces on one server: loads spread over two ports (the
    same server twice here), CPU split between the catalog and its database, the lost-commit audit and
    the report (the full mode starts three floe setups and the reference)."""
    target = discover(FLOE, catalog_server.url, catalog_server.token())
    target = dataclasses.replace(target, more_ports=(catalog_server.port,))
    dataset = Dataset(suffix=f"_{uuid.uuid4().hex[:8]}", list_tables=1, appends=1, rows_per_append=10)
    seed(target, dataset)
    assert catalog_server.process is not None
    setup = scale_out.Setup("floe-under-test", target, [catalog_server.process.pid], [])
    chosen = {w.key: w for w in workloads(clients=4)}
    rows = {key: scale_out.Row() for key in ("load_table", "commit_8")}
    for key, row in rows.items():
        scale_out.sample(setup, dataset, chosen[key], row, SECONDS_PER_WORKLOAD, 0.0)
    loads = rows["load_table"].summary()
    assert loads["requests"] > 0
    assert loads["statuses"] == {"200": loads["requests"]}
    assert rows["commit_8"].summary()["statuses"].get("200", 0) > 0
    audit = asyncio.run(scale_out._audit_commits(target, dataset))
    assert audit["commits"] == scale_out.AUDIT_WRITERS * scale_out.AUDIT_COMMITS_PER_WRITER
    assert audit["lost"] == audit["applied_though_refused"] == audit["unaccounted"] == 0
    doc = {
        "settings": {
            "started_at": "now", "duration_s": 0.2, "rounds": 1, "warmup_s": 0.0,
            "server_warmup_s": 0.0, "clients": 4, "git_commit": "test",
        },
        "machine": {"cpus": 1, "load_average_before": [], "load_average_after": []},
        "versions": {"floe": "test"},
        "setups": {setup.name: "under test"},
        "workloads": [
            {"key": key, "title": chosen[key].title, "clients": 4, "results": {setup.name: row.summary()}}
            for key, row in rows.items()
        ],
        "commit_audit": {setup.name: audit},
    }  # fmt: skip
    markdown = scale_out.render_markdown(doc)
    assert "| floe-under-test |" in markdown
    assert "No lost commits" in markdown


INGEST_RECORDS = 8_000
INGEST_RECORDS_PER_BATCH = 2_000


@pytest.mark.parametrize("system", [INGEST_FLOE, INGEST_PLAIN])
def test_ingest_benchmark_throughput_phase_runs(system: str, tmp_path: Path) -> None:
    """The ingestion benchmark's throughput phase for one system on a few thousand records (floe on
    each format), with its real broker, catalog and Spark ingester (no timings asserted;
    `python -m benchmarks.ingest` runs both systems, freshness and the diagnosis)."""
    code = ingest_benchmark.main(
        [
            "--records",
            str(INGEST_RECORDS),
            "--records-per-batch",
            str(INGEST_RECORDS_PER_BATCH),
            "--rounds",
            "1",
            "--only",
            system,
            "--skip-freshness",
            "--diagnosis-rounds",
            "0",
            "--output",
            str(tmp_path),
            "--name",
            "ingest-smoke",
            # A Parquet writer experiment on floe's tables (the plain job's table keeps floe's defaults).
            "--floe-table-property",
            "write.parquet.compression-level=3",
        ]
    )
    assert code == 0
    doc = json.loads((tmp_path / "ingest-smoke.json").read_text())
    assert doc["settings"]["floe_table_properties"] == {"write.parquet.compression-level": "3"}
    # floe ingests the same records as JSON, Avro and Protobuf; the plain job reads JSON only.
    formats = ["json", "avro", "protobuf"] if system == INGEST_FLOE else ["json"]
    assert [run["format"] for run in doc["throughput"]] == formats
    assert [b["records"] for b in doc["backlogs"].values()] == [INGEST_RECORDS] * len(formats)
    for run in doc["throughput"]:
        assert run["system"] == system
        # Every record decoded into the table (none dead-lettered), in every format.
        assert run["records"] == INGEST_RECORDS, run["format"]
        # maxOffsetsPerTrigger / --max-records-per-batch cap every batch: at least four commits.
        assert run["commits"] >= INGEST_RECORDS // INGEST_RECORDS_PER_BATCH
        assert run["window_records"] > 0
        assert run["records_per_s"] > 0
        assert run["cpu_cores"]["ingester"] > 0
        # What readers pay: the table's data files and DuckDB's time for each query over them.
        assert run["data_file_bytes"] > 0
        assert set(run["duckdb_query_ms"]) == set(ingest_benchmark.READER_QUERIES)
        assert all(ms > 0 for ms in run["duckdb_query_ms"].values())
        if system == INGEST_FLOE:
            assert run["notes"]["floe_ingest_batch_seconds"]["count"] >= run["commits"]
        else:
            assert run["notes"]["spark_progress"]["batches"] >= run["commits"]
        assert doc["throughput_summary"][run["variant"]]["mib_per_s"] > 0
    markdown = (tmp_path / "ingest-smoke.md").read_text()
    assert "Throughput into committed Iceberg tables" in markdown
    if system == INGEST_FLOE:
        assert "floe ingest, Protobuf" in markdown
        assert doc["targets"]["floe_protobuf_vs_json_records_ratio"] > 0
