"""`floe maintain` through the catalog's API: floe.yaml maintenance policies refused by apply, and pass
records (both backends, the session server). The planner and policies are in tests/unit, one real pass
with Spark in tests/e2e; orphan removal (no Spark) on a real table here.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from catalog.pipelines import load_yaml
from devtools.catalog_server import CatalogProcess

if TYPE_CHECKING:
    pass

from tests.unit.test_maintenance import PASSES, PIPELINE_YAML


def test_bad_maintenance_policy_is_refused_by_apply(http: httpx.Client) -> None:
    config = load_yaml(PIPELINE_YAML.format(cluster=f"c_{uuid.uuid4().hex[:8]}")).to_json()
    config["tables"][0]["maintenance"]["min_snapshots_to_keep"] = 0
    response = http.put("/management/v1/pipeline", json={"config": config})
    assert response.status_code == 400, response.text
    errors = {e["path"]: e["message"] for e in response.json()["error"]["errors"]}
    assert set(errors) == {"tables[0].maintenance.min_snapshots_to_keep"}
    assert "must be between 1 and" in errors["tables[0].maintenance.min_snapshots_to_keep"]


# -- pass records (both backends, the session server) -----------------------------------------------


def pass_body(namespace: list[str], table: str, **changes: Any) -> dict[str, Any]:
    stats = {"data_files": 3, "data_bytes": 300, "delete_files": 0, "delete_bytes": 0, "manifests": 3}
    body = {
        "warehouse": "default",
        "namespace": namespace,
        "table": table,
        "started_at": dt.datetime.now(dt.UTC).isoformat(),
        "duration_seconds": 2.5,
        "actions": [
            {
                "name": "rewrite_data_files",
                "duration_seconds": 2.0,
                "result": {"rewritten_data_files_count": 3},
            },
            {"name": "expire_snapshots", "duration_seconds": 0.5, "error": "boom"},
        ],
        "before": {**stats, "snapshots": 5},
        "after": {**stats, "data_files": 1, "snapshots": 2},
        "error": None,
    }
    return {**body, **changes}


def test_pass_records_through_the_management_api(catalog_server: CatalogProcess, http: httpx.Client) -> None:
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    recorded = http.post(PASSES, json=pass_body([namespace], "t1"))
    assert recorded.status_code == 201, recorded.text
    record = recorded.json()
    assert record["recorded_by"] == catalog_server.admin_client_id
    assert record["actions"][1] == {"name": "expire_snapshots", "duration_seconds": 0.5, "error": "boom"}
    assert http.post(PASSES, json=pass_body([namespace], "t2", error="table gone")).status_code == 201
    assert http.post(PASSES, json=pass_body([namespace, "deep"], "t1")).status_code == 201

    listed = http.get(PASSES, params={"namespace": namespace}).json()["passes"]
    assert [(p["table"], p["error"]) for p in listed] == [("t2", "table gone"), ("t1", None)]
    assert listed[1]["before"]["snapshots"] == 5
    assert listed[1]["after"]["data_files"] == 1
    only = http.get(PASSES, params={"namespace": namespace, "table": "t1", "limit": 1}).json()["passes"]
    assert [p["id"] for p in only] == [record["id"]]
    deep = http.get(PASSES, params={"namespace": f"{namespace}\x1fdeep"}).json()["passes"]
    assert [p["namespace"] for p in deep] == [[namespace, "deep"]]

    for body, status in (
        (pass_body([], "t"), 400),
        (pass_body([namespace], ""), 400),
        (pass_body([namespace], "t", duration_seconds=-1), 400),
        (pass_body([namespace], "t", warehouse="nowhere"), 404),
    ):
        response = http.post(PASSES, json=body)
        assert response.status_code == status, response.text
    assert http.get(PASSES, params={"limit": 0}).status_code == 400


def test_cluster_keys_record_and_read_their_own_passes(
    catalog_server: CatalogProcess, http: httpx.Client
) -> None:
    cluster = f"k_{uuid.uuid4().hex[:8]}"
    assert http.post("/management/v1/clusters", json={"name": cluster}).status_code == 201
    other = f"ns_{uuid.uuid4().hex[:8]}"
    assert http.post(PASSES, json=pass_body([other], "t")).status_code == 201

    def client(role: str) -> httpx.Client:
        key = http.post("/management/v1/keys", json={"cluster": cluster, "role": role}).json()
        token = catalog_server.token(key["client_id"], key["client_secret"])
        return httpx.Client(base_url=catalog_server.url, headers={"Authorization": f"Bearer {token}"})

    with client("writer") as writer, client("reader") as reader:
        assert writer.post(PASSES, json=pass_body([cluster], "t")).status_code == 201
        assert writer.post(PASSES, json=pass_body([cluster, "sub"], "t")).status_code == 201
        # Outside its cluster a key learns nothing: the namespace "does not exist".
        assert writer.post(PASSES, json=pass_body([other], "t")).status_code == 404
        assert reader.post(PASSES, json=pass_body([cluster], "t")).status_code == 403
        seen = reader.get(PASSES).json()["passes"]
        assert {tuple(p["namespace"]) for p in seen} == {(cluster,), (cluster, "sub")}
        assert reader.get(PASSES, params={"namespace": other}).status_code == 404


# -- orphan files without Spark (the worker's action on a real table) ------------------------------


def test_orphan_removal_lists_the_folder_and_reads_every_snapshot(
    catalog_server: CatalogProcess, rest_catalog: RestCatalog, namespace: str
) -> None:
    """Only old, unreferenced, visible files under the table go: not a fresh file (a commit in flight),
    not a file of an older snapshot, not a hidden one, not the neighbour table's. A table whose files
    are all young costs a listing only."""
    from catalog.pipelines.maintenance import DEFAULT_POLICY
    from maintenance.worker import MaintainedTable, MaintenanceWorker, WorkerOptions

    schema = pa.schema([pa.field("id", pa.int64())])
    table = rest_catalog.create_table((namespace, "t"), schema)
    for i in range(3):
        table.append(pa.table({"id": pa.array([i], pa.int64())}, schema=schema))
    table.overwrite(pa.table({"id": pa.array([9], pa.int64())}, schema=schema))  # older files stay referenced
    neighbour = rest_catalog.create_table((namespace, "t2"), schema)
    neighbour.append(pa.table({"id": pa.array([1], pa.int64())}, schema=schema))
    folder = Path(urlsplit(table.location()).path)
    assert not str(Path(urlsplit(neighbour.location()).path)).startswith(str(folder) + "/")

    options = WorkerOptions(
        catalog_server.url, catalog_server.admin_client_id, catalog_server.admin_client_secret
    )
    # Orphan removal is pyiceberg and the file system only: this worker never starts a Spark action.
    worker = MaintenanceWorker(None, options)  # type: ignore[arg-type]
    maintained = MaintainedTable("default", (namespace,), "t", DEFAULT_POLICY)
    horizon_ms = int(time.time() * 1000) - 3_600_000
    try:
        young = worker._remove_orphans(maintained, horizon_ms)
        assert young["orphan_candidates"] == 0
        assert young["orphan_files_removed"] == 0
        assert "referenced_files" not in young  # no manifest was read

        referenced = {p for p in folder.rglob("*") if p.is_file()}
        orphan = folder / "data" / "orphan.parquet"
        hidden = folder / "data" / ".orphan.parquet.crc"
        fresh = folder / "data" / "in-flight.parquet"
        for path in (orphan, hidden, fresh):
            path.write_bytes(b"x")
        old = time.time() - 2 * 3_600
        for path in (*referenced, orphan, hidden):
            os.utime(path, (old, old))

        removed = worker._remove_orphans(maintained, horizon_ms)
        assert removed["orphan_files_removed"] == 1, removed
        assert [Path(urlsplit(p).path) for p in removed["removed"]] == [orphan]
        assert removed["orphan_candidates"] == len(referenced) + 1
        assert not orphan.exists()
        assert not hidden.exists()
        assert fresh.exists()
        assert all(p.exists() for p in referenced)
        assert sorted(rest_catalog.load_table((namespace, "t")).scan().to_arrow()["id"].to_pylist()) == [9]
        assert neighbour.scan().to_arrow()["id"].to_pylist() == [1]
    finally:
        worker.close()


def test_sharded_workers_split_the_tables_as_ingestion_does(
    catalog_server: CatalogProcess, rest_catalog: RestCatalog, namespace: str
) -> None:
    """`floe maintain --shard i/n`: n workers see disjoint sets of tables that together are all of
    them, each table's shard the one `floe ingest --shard` gives it, a dead-letter table with its
    table."""
    from maintenance.worker import MaintenanceWorker, WorkerOptions
    from runtime.shards import shard_of

    schema = pa.schema([pa.field("id", pa.int64())])
    names = [f"t{i}" for i in range(12)]
    for name in [*names, *(f"{n}_dlq" for n in names[:6])]:
        rest_catalog.create_table((namespace, name), schema)
    seen: list[set[str]] = []
    for index in range(3):
        options = WorkerOptions(
            catalog_server.url,
            catalog_server.admin_client_id,
            catalog_server.admin_client_secret,
            namespaces=(namespace,),
            shard=(index, 3),
        )
        worker = MaintenanceWorker(None, options)  # type: ignore[arg-type]
        try:
            seen.append({t.name for t in worker.discover()})
        finally:
            worker.close()
    assert sum(len(s) for s in seen) == 18
    assert set().union(*seen) == {*names, *(f"{n}_dlq" for n in names[:6])}
    for index, found in enumerate(seen):
        for name in found:
            assert shard_of(f"{namespace}.{name.removesuffix('_dlq')}", 3) == index, (name, index)


def test_a_worker_with_a_cpu_share_rests_after_each_table_in_proportion(
    catalog_server: CatalogProcess,
    rest_catalog: RestCatalog,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`floe up`'s workers (`cpu_share`): after a table that used c s of the thread's CPU, the next
    starts no sooner than c / share s after the first began; without a share, at once."""
    import threading

    from maintenance.worker import MaintenanceWorker, WorkerOptions

    schema = pa.schema([pa.field("id", pa.int64())])
    for i in range(3):
        rest_catalog.create_table((namespace, f"t{i}"), schema).append(
            pa.table({"id": pa.array([i], pa.int64())}, schema=schema)
        )

    def visits(share: float | None) -> list[tuple[float, float, float]]:
        options = WorkerOptions(
            catalog_server.url,
            catalog_server.admin_client_id,
            catalog_server.admin_client_secret,
            namespaces=(namespace,),
            cpu_share=share,
        )
        worker = MaintenanceWorker(None, options)  # type: ignore[arg-type]
        seen: list[tuple[float, float, float]] = []  # (began, ended, thread CPU) of each visit
        stop = threading.Event()
        maintain = worker.maintain

        def timed(table: Any, **kwargs: Any) -> Any:
            began, cpu = time.monotonic(), time.thread_time()
            try:
                return maintain(table, **kwargs)
            finally:
                seen.append((began, time.monotonic(), time.thread_time() - cpu))
                if len(seen) == 3:
                    stop.set()

        monkeypatch.setattr(worker, "maintain", timed)
        try:
            worker.run_forever(stop)
        finally:
            worker.close()
        return seen

    share = 0.1
    held = visits(share)
    assert len(held) == 3
    for (began, _, cpu), (next_began, _, _) in itertools.pairwise(held):
        assert cpu > 0
        assert next_began - began >= cpu / share * 0.95, held
    free = visits(None)
    # Without a share the next table starts at once (recording the pass is the only work between).
    assert all(b - e < 0.5 for (_, e, _), (b, _, _) in itertools.pairwise(free)), free


def test_the_workers_commits_leave_dropped_metadata_files_to_floe(
    catalog_server: CatalogProcess,
    rest_catalog: RestCatalog,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With delete-after-commit, floe deletes the metadata files a commit drops from the log. A visit
    commits on the table as it loaded it, before ingestion's commits of the meantime: pyiceberg's own
    client deleted that stale log's files again after each commit and warned for every one floe had
    deleted already. The worker's client leaves them to floe."""
    import logging

    from catalog.pipelines.maintenance import DEFAULT_POLICY
    from maintenance import inprocess
    from maintenance.worker import MaintainedTable, MaintenanceWorker, WorkerOptions

    schema = pa.schema([pa.field("id", pa.int64())])
    properties = {
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": "1",
    }
    writer = rest_catalog.create_table((namespace, "t"), schema, properties=properties)
    options = WorkerOptions(
        catalog_server.url, catalog_server.admin_client_id, catalog_server.admin_client_secret
    )
    worker = MaintenanceWorker(None, options)  # type: ignore[arg-type]
    maintained = MaintainedTable("default", (namespace,), "t", DEFAULT_POLICY)

    def stale_commit(load: Any) -> list[str]:
        """Commit a property on the table as loaded before three appends; the warnings it logged."""
        for i in range(2):
            writer.append(pa.table({"id": pa.array([i], pa.int64())}, schema=schema))
        loaded = load()
        assert loaded.metadata.metadata_log  # a log for the client to delete from
        for i in range(3):
            writer.append(pa.table({"id": pa.array([i], pa.int64())}, schema=schema))
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            inprocess.set_properties(loaded, {"floe.test": str(time.time())})
        return [r.getMessage() for r in caplog.records if "Failed to delete" in r.getMessage()]

    try:
        # pyiceberg's own client: what the worker's replaces (fails when pyiceberg stops deleting).
        assert stale_commit(lambda: rest_catalog.load_table((namespace, "t")))
        assert stale_commit(lambda: worker._load_table(maintained)) == []
        table = rest_catalog.load_table((namespace, "t"))
        folder = Path(urlsplit(table.location()).path) / "metadata"
        kept = {Path(urlsplit(e.metadata_file).path).name for e in table.metadata.metadata_log}
        kept.add(Path(urlsplit(table.metadata_location).path).name)
        assert {p.name for p in folder.glob("*.metadata.json")} == kept
        assert len(table.scan().to_arrow()) == 10
    finally:
        worker.close()


def test_auto_sharded_workers_divide_the_tables_and_take_a_stopped_ones_over(
    catalog_server: CatalogProcess, rest_catalog: RestCatalog, namespace: str
) -> None:
    """`floe maintain --shard auto`: two workers holding leases in one group see disjoint sets of tables
    that together are all of them (a dead-letter table with its table); once one ends its lease, the
    other's next renewal gives it every table."""
    from catalog.client import FloeClient
    from maintenance.worker import MaintenanceWorker, WorkerOptions
    from runtime.leases import Lease

    schema = pa.schema([pa.field("id", pa.int64())])
    names = [f"t{i}" for i in range(12)]
    for name in [*names, *(f"{n}_dlq" for n in names[:6])]:
        rest_catalog.create_table((namespace, name), schema)
    group = f"maintain-{uuid.uuid4().hex[:8]}"
    client = FloeClient(
        catalog_server.url, catalog_server.admin_client_id, catalog_server.admin_client_secret
    )

    def renew(group: str, member: str, ttl: float) -> list[str]:
        return [holder.member for holder in client.renew_lease(group, member, ttl).members]

    leases = [Lease(renew, client.end_lease, group, member, ttl_seconds=2) for member in ("w0", "w1")]
    options = WorkerOptions(
        catalog_server.url,
        catalog_server.admin_client_id,
        catalog_server.admin_client_secret,
        namespaces=(namespace,),
    )
    workers = [MaintenanceWorker(None, options, owns=lease.owns) for lease in leases]  # type: ignore[arg-type]
    try:
        for lease in leases:
            lease.start()
        time.sleep(1.0)  # w0's next renewal names w1
        seen = [{t.name for t in worker.discover()} for worker in workers]
        assert seen[0]
        assert seen[1]
        assert not seen[0] & seen[1]
        assert seen[0] | seen[1] == {*names, *(f"{n}_dlq" for n in names[:6])}
        for found in seen:
            for name in names[:6]:
                assert (name in found) == (f"{name}_dlq" in found), name
        leases[1].stop()
        time.sleep(1.0)
        assert {t.name for t in workers[0].discover()} == seen[0] | seen[1]
    finally:
        for lease in leases:
            lease._stop.set()
        for worker in workers:
            worker.close()
        client.close()
