"""How `floe ingest` runs the shared consumers: which tables they take, one consumer per source cluster.

A table goes to its cluster's shared consumer (`ingest.shared.consumer`) when it is an append table
of inline-schema JSON whose field types the Python decoder reads (`shared_consumer_reads`) and its
floe.yaml does not say `ingest_path: spark`; other tables (upsert and Debezium, Avro, Protobuf,
schema-registry mode, those that say so) keep a Spark query each.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from catalog.s3_files import IO_IMPL as S3_IO_IMPL
from ingest.ingest_table import BatchResult, IngestTable
from ingest.kafka_connection import check_connection
from ingest.shared.consumer import SharedIngest
from ingest.shared.iceberg_append import MergePacing, TableAppender
from ingest.shared.json_rows import readable
from ingest.shared.tables import SharedTable

if TYPE_CHECKING:
    from pyiceberg.catalog.rest import RestCatalog

    from ingest.service import CatalogAccess


CONNECTION_CHECK_SECONDS = 60.0


def shared_consumer_reads(table: IngestTable) -> bool:
    """Whether the shared consumer ingests `table` (see the module doc)."""
    return (
        table.ingest_path == "auto"
        and table.source_format == "json"
        and table.registry is None
        and not table.is_upsert
        and table.envelope == "none"
        and readable(table.schema)
    )


class SharedTables:
    """The shared consumers of one `floe ingest`, one per source cluster, started on first use."""

    def __init__(
        self,
        access_for: Callable[[str], CatalogAccess],
        on_commit: Callable[[IngestTable, BatchResult], None],
        interval_of: Callable[[IngestTable], float],
        max_records_per_batch: int,
    ) -> None:
        self._access_for = access_for
        self._max_records_per_batch = max_records_per_batch
        self._on_commit = on_commit
        self._interval_of = interval_of
        self._consumers: dict[str, SharedIngest] = {}
        self._wanted: dict[str, list[IngestTable]] = {}
        self._catalogs: dict[tuple[str, str], RestCatalog] = {}
        self._catalogs_lock = threading.Lock()
        # cluster → (when checked, the refusal or None): a cluster's login is checked once a minute,
        # not once per table (a thousand tables of one refused cluster are one check, one error).
        self._connections: dict[str, tuple[float, Exception | None]] = {}
        # Spreads the tables' manifest merges over time (all clusters' consumers share it; a lost
        # update between their threads shifts a token, nothing more).
        self._merges = MergePacing()

    def set_tables(self, tables: Iterable[IngestTable]) -> None:
        by_cluster: dict[str, list[IngestTable]] = {}
        for table in tables:
            by_cluster.setdefault(table.cluster, []).append(table)
        for cluster in set(by_cluster) | set(self._consumers):
            wanted = by_cluster.get(cluster, [])
            consumer = self._consumers.get(cluster)
            if consumer is None:
                if not wanted:
                    continue
                consumer = self._start(cluster, dict(wanted[0].consumer_config), wanted)
            else:
                consumer.set_tables(wanted)
        self._wanted = by_cluster

    def tables(self) -> list[IngestTable]:
        return [t for tables in self._wanted.values() for t in tables]

    def wait_assigned(self, timeout: float) -> None:
        """Wait until every consumer has opened its tables and assigned their partitions."""
        deadline = time.monotonic() + timeout
        for consumer in self._consumers.values():
            consumer.assigned.wait(max(0.0, deadline - time.monotonic()))

    def stop(self) -> None:
        for consumer in self._consumers.values():
            consumer.stop()

    def _start(
        self, cluster: str, consumer_config: dict[str, Any], tables: list[IngestTable]
    ) -> SharedIngest:
        access = self._access_for(cluster)
        consumer = SharedIngest(
            cluster,
            consumer_config,
            access.client,
            lambda table: self._open(table),
            self._on_commit,
            self._interval_of,
            lambda warehouse: self._prefix(cluster, warehouse),
            self._max_records_per_batch,
        )
        self._consumers[cluster] = consumer
        consumer.set_tables(tables)  # before its thread starts: its first look opens them
        consumer.start()
        return consumer

    def _catalog(self, cluster: str, warehouse: str) -> RestCatalog:
        from pyiceberg.catalog.rest import RestCatalog

        access = self._access_for(cluster)
        key = (access.connection.client_id, warehouse)
        with self._catalogs_lock:
            catalog = self._catalogs.get(key)
            if catalog is None:
                connection = access.connection
                uri = connection.uri.rstrip("/")
                properties = {
                    "uri": uri,
                    "warehouse": warehouse,
                    "credential": f"{connection.client_id}:{connection.client_secret}",
                    "oauth2-server-uri": f"{uri}/v1/oauth/tokens",
                    "scope": "catalog",
                    # Each S3 file one request (pyiceberg's own FileIO: a multipart upload, three).
                    "py-io-impl": S3_IO_IMPL,
                    **{f"header.{k}": v for k, v in connection.headers.items()},
                    **connection.extra,
                }
                catalog = self._catalogs[key] = RestCatalog(f"floe-{warehouse}", **properties)
            return catalog

    def _prefix(self, cluster: str, warehouse: str) -> str:
        """The REST path prefix floe's config endpoint gave for the warehouse."""
        from urllib.parse import quote

        prefix = self._catalog(cluster, warehouse).properties.get("prefix")
        return str(prefix) if prefix else quote(warehouse, safe="")

    def _check_connection(self, table: IngestTable) -> None:
        """Raise the cluster's refusal (a wrong password, an untrusted certificate) as one clear error,
        as a Spark query's start does; checked at most once a minute per cluster."""
        if table.source_cluster is None:
            return
        checked = self._connections.get(table.cluster)
        if checked is None or time.monotonic() - checked[0] >= CONNECTION_CHECK_SECONDS:
            try:
                check_connection(table.source_cluster, table.consumer_config, table.topic)
                checked = (time.monotonic(), None)
            except Exception as exc:
                checked = (time.monotonic(), exc)
            self._connections[table.cluster] = checked
        if checked[1] is not None:
            raise checked[1]

    def _open(self, table: IngestTable) -> SharedTable:
        """The table's appenders (loaded from floe at their first append) and its committed offsets:
        where the shared consumer starts it."""
        self._check_connection(table)
        catalog = self._catalog(table.cluster, table.warehouse)
        client = self._access_for(table.cluster).client
        main_id = (*table.namespace, table.table)
        dlq_id = (*table.namespace, table.dlq_table)
        main = TableAppender(main_id, lambda: catalog.load_table(main_id), self._merges)
        dlq = TableAppender(dlq_id, lambda: catalog.load_table(dlq_id), self._merges)
        ns = table.namespace
        main_next = client.next_offsets(table.warehouse, ns, table.table, table.topic)
        return SharedTable(
            table,
            main,
            dlq,
            main_next,
            lambda: client.next_offsets(table.warehouse, ns, table.dlq_table, table.topic),
        )
