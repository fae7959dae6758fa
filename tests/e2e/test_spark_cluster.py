"""Scale-out: `floe ingest` and `floe maintain` on a real Spark standalone cluster, and a lost worker.

A master and two workers (one core each) from the pyspark installation (devtools/spark_cluster.py);
`FLOE_SPARK_MASTER=spark://127.0.0.1:<port>`, as a user points floe at a cluster. The workers have no
floe code and no Python path of floe's: the connector jars reach the executors from the driver. While
records keep arriving, the worker running a task of the current batch is SIGKILLed with its executor;
every Kafka offset must still be in the table exactly once. Then `floe maintain --once` compacts the
table on the surviving worker, and every offset is still there exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.spark_cluster import LocalSparkCluster
from tests.e2e.ingest_harness import (
    IngestProcess,
    apply_pipeline,
    produce,
    wait_until_committed,
)

CLUSTER = "scaleout"
# Executors fit the workers' 1 GiB; the driver reaches them, and they it, on loopback.
SPARK_ENV = {"SPARK_LOCAL_IP": "127.0.0.1"}
EXECUTOR_CONF = ["--spark-conf", "spark.executor.memory=640m", "--spark-conf", "spark.executor.cores=1"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogProcess]:
    home = tmp_path_factory.mktemp("cluster-floe")
    with CatalogProcess(f"sqlite+aiosqlite:///{home / 'floe.db'}", home=home) as process:
        yield process


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSparkCluster]:
    with LocalSparkCluster(
        tmp_path_factory.mktemp("spark-cluster"), workers=2, cores=1, memory="1g"
    ) as cluster:
        yield cluster


def _positions(server: CatalogProcess, table: str) -> list[tuple[int, int]]:
    scan = server.catalog().load_table(f"{CLUSTER}.{table}").scan(selected_fields=("_kafka",))
    return [(r["_kafka"]["partition"], r["_kafka"]["offset"]) for r in scan.to_arrow().to_pylist()]


def test_ingest_and_maintain_on_a_standalone_cluster_survive_a_lost_worker(
    kafka: LocalKafka, server: CatalogProcess, spark_cluster: LocalSparkCluster, tmp_path: Path
) -> None:
    topic = f"cluster.{uuid.uuid4().hex[:6]}"
    table = topic.replace(".", "_")
    kafka.create_topic(topic, 3)
    headers = {"Authorization": f"Bearer {server.token()}"}
    admin = httpx.Client(base_url=server.url, headers=headers, timeout=60)
    host, port = kafka.bootstrap_servers.split(":")
    apply_pipeline(
        admin,
        {
            "source_clusters": [
                {"name": CLUSTER, "bootstrap_brokers": [{"hostname": host, "port": int(port)}]}
            ],
            "tables": [
                {
                    "source_cluster_name": CLUSTER,
                    "source_topic": topic,
                    "source_format": "json",
                    "schema_mode": "inline",
                    "schema": {"fields": [{"name": "id", "id": 1, "type": "long"}]},
                    # A Spark query of its own: this test is about Spark executors (the shared
                    # consumer runs none).
                    "ingest_path": "spark",
                    # Compact every partition now and expire what compaction replaced.
                    "maintenance": {
                        "cold_after": "0s",
                        "hot_partition_max_files": 2,
                        "snapshot_retention": "0s",
                        "min_snapshots_to_keep": 1,
                    },
                }
            ],
        },
    )
    produced = produce(kafka.bootstrap_servers, topic, (json.dumps({"id": i}).encode() for i in range(300)))

    args = ["--commit-interval", "1", *EXECUTOR_CONF]
    env = {**SPARK_ENV, "FLOE_SPARK_MASTER": spark_cluster.master_url}
    stop = threading.Event()

    def keep_producing() -> None:
        # Bursts: batches grow to thousands of records, so their tasks run long enough to be caught.
        i = 300
        while not stop.is_set():
            values = (json.dumps({"id": i + j}).encode() for j in range(2000))
            produce(kafka.bootstrap_servers, topic, values, into=produced)
            i += 2000
            time.sleep(0.05)

    producer = threading.Thread(target=keep_producing, daemon=True)
    with IngestProcess(server, tmp_path / "ingest", args=args, env=env) as ingest:
        try:
            wait_until_committed(
                admin, CLUSTER, table, topic, produced.end_offsets(), timeout=180, ingest=ingest
            )
            [app] = spark_cluster.state()["activeapps"]
            assert app["name"] == "floe-ingest"
            # Both workers run an executor of the application, and both have run tasks of it.
            for node in spark_cluster.workers:
                assert app["id"] in spark_cluster.applications(node), node.name
                assert spark_cluster.tasks(node, app["id"])[1], f"{node.name} ran no task"

            producer.start()
            # The moment a task of a batch runs on a worker, the worker and its executor die (SIGKILL).
            deadline = time.monotonic() + 120
            victim, interrupted = None, set()
            while victim is None:
                assert time.monotonic() < deadline, "no task seen running on an executor"
                for node in spark_cluster.running_workers():
                    started, ended = spark_cluster.tasks(node, app["id"])
                    if started - ended:
                        spark_cluster.kill_worker(node)
                        victim, interrupted = node, started - ended
                        break
                else:
                    time.sleep(0.01)
            time.sleep(3)
            stop.set()
            producer.join(60)
            wait_until_committed(
                admin, CLUSTER, table, topic, produced.end_offsets(), timeout=180, ingest=ingest
            )
            # The driver noticed, and the work of each interrupted task was done again on the survivor.
            assert "Lost executor" in ingest.log_text(), ingest.log_text()[-3000:]
            [survivor] = spark_cluster.running_workers()
            assert survivor is not victim
            redone = spark_cluster.finished(survivor, app["id"])
            for task in interrupted:
                assert any(
                    t.stage == task.stage and t.index == task.index and t.tid > task.tid for t in redone
                ), f"{task} was not run again on {survivor.name}"
        finally:
            stop.set()
            if producer.is_alive():
                producer.join(60)
    assert len(produced.records) > 10_000

    positions = _positions(server, table)
    assert len(positions) == len(set(positions)), "a record was committed twice"
    assert sorted(positions) == sorted(produced.records), "a record was lost"

    # Maintenance on the same cluster (the surviving worker): compaction commits through floe.
    env_maintain = {
        **os.environ,
        **env,
        "FLOE_URL": server.url,
        "FLOE_CLIENT_ID": server.admin_client_id,
        "FLOE_CLIENT_SECRET": server.admin_client_secret,
    }
    # Spark's maintenance (--design spark): this test is about maintenance on a Spark cluster.
    command = [
        sys.executable,
        "-m",
        "floe.cli",
        "maintain",
        "--once",
        "--design",
        "spark",
        "--namespace",
        CLUSTER,
    ]
    command += ["--metrics-port", "0", "--driver-memory", "768m", *EXECUTOR_CONF]
    maintain = subprocess.run(command, env=env_maintain, capture_output=True, timeout=300, check=False)
    output = maintain.stdout.decode(errors="replace") + maintain.stderr.decode(errors="replace")
    assert maintain.returncode == 0, output[-4000:]
    completed = [app["name"] for app in spark_cluster.state().get("completedapps", [])]
    assert "floe-maintain" in completed, completed
    passes = admin.get(
        "/management/v1/maintenance/passes", params={"namespace": CLUSTER, "table": table}
    ).json()["passes"]
    compactions = [
        a for p in passes for a in p["actions"] if a["name"] == "rewrite_data_files" and not a.get("error")
    ]
    assert compactions, passes
    rewritten = sum(int(a["result"].get("rewritten_data_files_count", 0)) for a in compactions)
    added = sum(int(a["result"].get("added_data_files_count", 0)) for a in compactions)
    assert rewritten > added >= 1, compactions

    positions = _positions(server, table)
    assert len(positions) == len(set(positions)), "compaction duplicated a record"
    assert sorted(positions) == sorted(produced.records), "compaction lost a record"
    admin.close()
