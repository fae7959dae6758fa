"""What ingestion knows of one table (`IngestTable`, built from the applied floe.yaml) and what a batch
of it committed (`BatchResult`): shared by the Spark path (ingest/batches.py) and the shared consumer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyiceberg.schema import Schema

if TYPE_CHECKING:
    from catalog.pipelines import SourceCluster
    from ingest.protobuf_decode import WriterSchema
    from ingest.registry_client import RegistryConnection


@dataclass(frozen=True)
class IngestTable:
    """Everything needed to ingest one topic into one table (built from the applied floe.yaml)."""

    cluster: str
    topic: str
    warehouse: str
    namespace: tuple[str, ...]
    table: str
    dlq_table: str
    source_format: str  # json | avro | protobuf
    schema: Schema  # the data table's schema: the user's fields, `_kafka` (and `_cdc` for Debezium)
    kafka_options: Mapping[str, str]  # Spark Kafka source options (kafka.bootstrap.servers, security…)
    consumer_config: Mapping[str, str]  # the same connection for confluent-kafka (partitions, lag)
    commit_interval: float
    avro_schema: Mapping[str, Any] | None = None
    registry: RegistryConnection | None = None  # registry mode: where the writer schemas are
    confluent_framing: bool = True
    fingerprint: str = ""  # changes when the table's ingestion settings change (restart its query)
    extra: Mapping[str, str] = field(default_factory=dict)
    source_cluster: SourceCluster | None = None  # floe.yaml's cluster (connection errors name its settings)
    # Inline-schema protobuf: the compiled schema and the message type; whether values are framed.
    protobuf_inline: tuple[WriterSchema, str] | None = None
    protobuf_framing: bool = True
    table_mode: str = "append"  # append | upsert (the key: the schema's identifier fields)
    envelope: str = "none"  # none | debezium
    ingest_path: str = "auto"  # auto (the shared consumer when it reads the table) | spark (own query)

    @property
    def is_upsert(self) -> bool:
        return self.table_mode == "upsert"

    @property
    def name(self) -> str:
        return ".".join((*self.namespace, self.table))

    def spark_name(self, table: str | None = None, catalog: str = "floe") -> str:
        parts = (*self.namespace, table or self.table)
        return catalog + "." + ".".join(f"`{p}`" for p in parts)


@dataclass
class BatchResult:
    records: int = 0
    dead_letters: int = 0
    value_bytes: int = 0
    end_offsets: dict[int, int] = field(default_factory=dict)
    max_timestamps: dict[int, float] = field(default_factory=dict)
    # Good records carrying top-level fields the table does not declare (those fields are not kept),
    # and how many records carried each of the most frequent such names.
    records_with_undeclared: int = 0
    undeclared_fields: dict[str, int] = field(default_factory=dict)
    # Written in one job: the range from Spark's offset log, the append staged (`_append_staged`).
    staged: bool = False
    # Its commit queued (`CommitQueue`): reported once committed, by the commit's thread.
    queued: bool = False
