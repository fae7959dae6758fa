"""`GET /management/v1/kafka-offsets`: the Kafka offsets a table has committed (ingestion resumes there)."""

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
