"""`GET /management/v1/kafka-offsets`: the Kafka offsets a table has committed (ingestion resumes there);
`GET /management/v1/snapshots/at`: the first snapshot holding a Kafka record (time travel by position)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec
from litestar import Controller, get
from litestar.params import Parameter

from catalog.auth import Principal
from catalog.identifiers import Namespace, TableIdent
from catalog.service.tables import TableService


class PartitionOffset(msgspec.Struct):
    partition: int
    next_offset: int = msgspec.field(name="next-offset")
    committed_at: datetime = msgspec.field(name="committed-at")


class TopicOffsets(msgspec.Struct):
    topic: str
    partitions: list[PartitionOffset]


class KafkaOffsetsResponse(msgspec.Struct):
    topics: list[TopicOffsets]


class KafkaOffsetsController(Controller):
    path = "/management/v1/kafka-offsets"
    tags = ["Management API"]

    @get("/", operation_id="getKafkaOffsets")
    async def get_kafka_offsets(
        self,
        principal: Principal,
        tables: TableService,
        warehouse: str,
        namespace: Annotated[str, Parameter(description="Namespace levels separated by 0x1F")],
        table: str,
    ) -> KafkaOffsetsResponse:
        """The next offset per partition that the table's committed snapshots cover, kept by floe in its
        database (it survives snapshot expiry and compaction); readers of the table may see it."""
        ident = TableIdent(Namespace.of(namespace.split("\x1f")), table)
        topics = await tables.kafka_offsets(principal, warehouse, ident)
        return KafkaOffsetsResponse(
            [
                TopicOffsets(
                    topic,
                    [PartitionOffset(p, offset, at) for p, (offset, at) in sorted(partitions.items())],
                )
                for topic, partitions in sorted(topics.items())
            ]
        )


class SnapshotAtResponse(msgspec.Struct):
    snapshot_id: int = msgspec.field(name="snapshot-id")
    sequence_number: int = msgspec.field(name="sequence-number")
    timestamp_ms: int = msgspec.field(name="timestamp-ms")
    topic: str
    start_offsets: dict[str, int] = msgspec.field(name="start-offsets")
    end_offsets: dict[str, int] = msgspec.field(name="end-offsets")


class SnapshotAtController(Controller):
    path = "/management/v1/snapshots/at"
    tags = ["Management API"]

    @get("/", operation_id="getSnapshotAtKafkaPosition")
    async def get_snapshot_at(
        self,
        principal: Principal,
        tables: TableService,
        warehouse: str,
        namespace: Annotated[str, Parameter(description="Namespace levels separated by 0x1F")],
        table: str,
        partition: Annotated[int, Parameter(ge=0, description="Kafka partition")],
        offset: Annotated[int, Parameter(ge=0, description="Kafka offset of the record")],
        topic: Annotated[
            str | None, Parameter(description="The source topic (when the table has several)")
        ] = None,
    ) -> SnapshotAtResponse:
        """The first snapshot whose data includes Kafka record (partition, offset): read the table as of
        that record with `FOR VERSION AS OF <snapshot-id>`. 404 when no snapshot holds it yet, or when the
        snapshot that added it has been expired."""
        ident = TableIdent(Namespace.of(namespace.split("\x1f")), table)
        found = await tables.snapshot_at(principal, warehouse, ident, partition, offset, topic)
        snapshot, progress = found.snapshot, found.progress
        return SnapshotAtResponse(
            snapshot.snapshot_id,
            snapshot.sequence_number or 0,
            snapshot.timestamp_ms,
            progress.topic,
            {str(p): o for p, o in sorted(progress.start.items())},
            {str(p): o for p, o in sorted(progress.end.items())},
        )
