"""`floe maintain` over several real tables at once (`WorkerOptions.parallel`), skipping the tables whose
metadata shows nothing to do (`maintenance.quick_check`, issue 31): a skipped table's manifests are not
read, a table that has work gets its full pass, and every table keeps its rows."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.manifest import ManifestFile

from catalog.pipelines.maintenance import MaintenancePolicy
from devtools.catalog_server import CatalogProcess
from maintenance.worker import MaintainedTable, MaintenanceWorker, PassResult, WorkerOptions

SCHEMA = pa.schema([pa.field("id", pa.int64())])
POLICY = MaintenancePolicy(cold_after=0, hot_partition_max_files=10)


def _no_spark() -> Any:
    raise AssertionError("a small append-only table needed Spark")


def _append(table: Any, first: int, count: int) -> None:
    for i in range(first, first + count):
        table.append(pa.table({"id": pa.array([i], pa.int64())}, schema=SCHEMA))


def _skipped(result: PassResult) -> bool:
    return any("quick_check" in a.result for a in result.actions)


def _by_name(results: list[PassResult]) -> dict[str, PassResult]:
    for result in results:
        assert not result.failed, result.summary()
    return {r.table.name: r for r in results}


def test_passes_skip_tables_with_nothing_to_do_and_run_in_parallel(
    catalog_server: CatalogProcess,
    rest_catalog: RestCatalog,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = ["quiet", "busy", "growing"]
    tables = {name: rest_catalog.create_table((namespace, name), SCHEMA) for name in names}
    _append(tables["quiet"], 0, 1)
    _append(tables["busy"], 0, 6)  # six small files: compacted
    _append(tables["growing"], 0, 2)
    maintained = [MaintainedTable("default", (namespace,), name, POLICY) for name in names]
    options = WorkerOptions(
        catalog_server.url, catalog_server.admin_client_id, catalog_server.admin_client_secret, parallel=3
    )
    worker = MaintenanceWorker(_no_spark, options)

    # Which threads read manifests, and whose.
    original = ManifestFile.fetch_manifest_entry
    reads: list[tuple[str, str]] = []
    threads: set[str] = set()

    def counting(self: ManifestFile, io: Any, discard_deleted: bool = True) -> Any:
        reads.append((self.manifest_path, threading.current_thread().name))
        return original(self, io, discard_deleted)

    monkeypatch.setattr(ManifestFile, "fetch_manifest_entry", counting)
    original_maintain = worker.maintain

    def maintain(table: MaintainedTable, **kwargs: Any) -> PassResult:
        threads.add(threading.current_thread().name)
        return original_maintain(table, **kwargs)

    monkeypatch.setattr(worker, "maintain", maintain)
    try:
        # First pass: every table gets the metadata properties (work), "busy" is compacted.
        first = _by_name(worker.run_once(maintained))
        assert not any(_skipped(r) for r in first.values())
        compaction = [a for a in first["busy"].actions if a.name == "rewrite_data_files"]
        assert compaction, first["busy"].summary()
        assert compaction[0].result["rewritten_data_files_count"] == 6, compaction
        assert len(threads) > 1, threads  # the tables were visited by several threads

        # Second pass, nothing changed: every table is skipped without reading a manifest.
        reads.clear()
        second = _by_name(worker.run_once(maintained))
        assert all(_skipped(r) for r in second.values()), [r.summary() for r in second.values()]
        assert reads == []
        assert all("nothing to do (table metadata)" in r.summary() for r in second.values())
        assert second["busy"].after is not None
        assert second["busy"].after.data_files == 1

        # Two appends to "growing" (4 files, fewer than a compaction needs): still skipped; three more
        # make it 7 files, past the bound: its full pass compacts them.
        _append(tables["growing"], 2, 2)
        third = _by_name(worker.run_once(maintained))
        assert _skipped(third["growing"]), third["growing"].summary()
        _append(tables["growing"], 4, 3)
        fourth = _by_name(worker.run_once(maintained))
        assert not _skipped(fourth["growing"]), fourth["growing"].summary()
        assert _skipped(fourth["quiet"])
        assert _skipped(fourth["busy"])
        rewritten = [a.result for a in fourth["growing"].actions if a.name == "rewrite_data_files"]
        assert rewritten, fourth["growing"].summary()
        assert rewritten[0]["rewritten_data_files_count"] == 7, rewritten

        # Every table keeps its rows.
        expected = {"quiet": [0], "busy": list(range(6)), "growing": list(range(7))}
        for name, ids in expected.items():
            rows = rest_catalog.load_table((namespace, name)).scan().to_arrow()["id"].to_pylist()
            assert sorted(rows) == ids, name
    finally:
        worker.close()


def test_an_in_process_compaction_is_not_followed_by_a_manifest_rewrite(
    catalog_server: CatalogProcess,
    rest_catalog: RestCatalog,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In-process compaction commits with the data manifests merged into one: an append landing right
    after it (ingestion's, in production) leaves two small manifests, which after a Spark compaction
    would be rewritten at once, but here wait for the usual threshold (no second commit per visit)."""
    from maintenance import inprocess

    table = rest_catalog.create_table((namespace, "merged"), SCHEMA)
    _append(table, 0, 6)
    original = inprocess.compact

    def compact_then_append(*args: Any, **kwargs: Any) -> dict[str, Any]:
        outcome = original(*args, **kwargs)
        _append(rest_catalog.load_table((namespace, "merged")), 100, 1)  # ingestion's next commit
        return outcome

    monkeypatch.setattr(inprocess, "compact", compact_then_append)
    options = WorkerOptions(
        catalog_server.url, catalog_server.admin_client_id, catalog_server.admin_client_secret
    )
    worker = MaintenanceWorker(_no_spark, options)
    try:
        result = worker.maintain(MaintainedTable("default", (namespace,), "merged", POLICY))
    finally:
        worker.close()
    assert not result.failed, result.summary()
    names = [a.name for a in result.actions]
    assert "rewrite_data_files" in names, names
    assert "rewrite_manifests" not in names, names
    loaded = rest_catalog.load_table((namespace, "merged"))
    snapshot = loaded.current_snapshot()
    assert snapshot is not None
    assert len([m for m in snapshot.manifests(loaded.io) if m.content == 0]) == 2
    assert sorted(loaded.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2, 3, 4, 5, 100]
