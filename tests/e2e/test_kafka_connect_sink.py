"""Apache Iceberg's Java Kafka Connect sink writes through floe's REST catalog.

The many-tables benchmark's peer row (`benchmarks/many_tables/kafka_connect.py`): a Kafka Connect 4.1.1
standalone worker with `IcebergSinkConnector` 1.11.0, both from Maven Central, one connector for two topics,
OAuth2 client credentials of a floe API key, tables created by the sink. A few records per topic land in
their own table, each routed by its topic — a compatibility result for floe's catalog as much as a check
of the benchmark's path.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.many_tables.kafka_connect import TOPIC_FIELD, IcebergSinkConnect, SinkSettings
from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka

RECORDS = 5


def _records_in_current_snapshot(catalog: object, table: str) -> int:
    snapshot = catalog.load_table(table).current_snapshot()  # type: ignore[attr-defined]
    return 0 if snapshot is None else int(snapshot.summary["total-records"])


@pytest.mark.e2e
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_iceberg_kafka_connect_sink_writes_into_floe_catalog(
    catalog_server: CatalogProcess, kafka: LocalKafka, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    namespace = f"connect_{suffix}"
    topics = [f"kc_{suffix}_a", f"kc_{suffix}_b"]
    settings = SinkSettings(
        kafka.bootstrap_servers, catalog_server.url, catalog_server.admin_credential, namespace,
        topics, commit_interval_ms=2_000, name=f"sink-{suffix}",
    )  # fmt: skip
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    for future in admin.create_topics(
        [NewTopic(name, 1, 1) for name in [*topics, settings.control_topic]]
    ).values():
        future.result(60)
    catalog = catalog_server.catalog()
    catalog.create_namespace(namespace)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for topic in topics:
        for i in range(RECORDS):
            producer.produce(topic, json.dumps({"id": i, "sent_at": 1_700_000_000_000 + i}).encode())
    assert producer.flush(30) == 0

    tables = [settings.table(topic) for topic in topics]
    with IcebergSinkConnect(settings, tmp_path / "connect", heap="512m") as sink:
        deadline = time.monotonic() + 150  # a loaded 2-core machine: ~60 s to start
        counts: dict[str, int] = {}
        while time.monotonic() < deadline:
            assert sink.exited() is None, f"the worker exited: {sink.log_text()[-4000:]}"
            listed = {".".join(ident) for ident in catalog.list_tables(namespace)}
            counts = {t: _records_in_current_snapshot(catalog, t) for t in tables if t in listed}
            if counts == dict.fromkeys(tables, RECORDS):
                break
            time.sleep(1)
        assert counts == dict.fromkeys(tables, RECORDS), f"{counts}\n{sink.log_text()[-4000:]}"

    for topic, table in zip(topics, tables, strict=True):
        rows = catalog.load_table(table).scan().to_arrow().to_pylist()
        assert sorted(row["id"] for row in rows) == list(range(RECORDS))
        assert {row[TOPIC_FIELD] for row in rows} == {topic}
