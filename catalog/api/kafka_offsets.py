"""`GET /management/v1/kafka-offsets`: the Kafka offsets a table has committed (ingestion resumes there);
`GET /management/v1/snapshots/at`: the first snapshot holding a Kafka record (time travel by position),
or the table as of a Kafka record time."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, get
from litestar.params import Parameter
from pyiceberg.table.snapshots import Snapshot

from catalog.auth import Principal
from catalog.errors import BadRequest
from catalog.identifiers import Namespace, TableIdent
from catalog.kafka_offsets import KafkaProgress, record_times
from catalog.service.tables import TableService
from catalog.wire import KafkaOffsetsResponse, PartitionOffset, SnapshotAtResponse, TopicOffsets

# Kafka partitions are int32, offsets and record times int64: a larger number names no record and
# must be a 400, not an overflow further down.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


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
        partition: Annotated[
            int | None, Parameter(ge=0, le=INT32_MAX, description="Kafka partition (with offset)")
        ] = None,
        offset: Annotated[
            int | None,
            Parameter(ge=0, le=INT64_MAX, description="Kafka offset of the record (with partition)"),
        ] = None,
        timestamp: Annotated[
            int | None,
            Parameter(
                ge=0,
                le=INT64_MAX,
                description="Kafka record time, epoch milliseconds (instead of partition and offset)",
            ),
        ] = None,
        topic: Annotated[
            str | None, Parameter(description="The source topic (when the table has several)")
        ] = None,
    ) -> SnapshotAtResponse:
        """The table as of a Kafka position or a Kafka record time; read it with
        `FOR VERSION AS OF <snapshot-id>`.

        With `partition` and `offset`: the first snapshot whose data includes that record. With
        `timestamp` (record time, epoch ms): the newest snapshot holding no record later than it, i.e.
        whose high-water record time (the latest Kafka record timestamp of its batch and of every earlier
        ingestion snapshot, from the record-time range each snapshot summary carries) is at or before
        `timestamp`; a batch spanning the time is not included. That answer is final: it is given only
        once a later snapshot holds a record after `timestamp`. 404 when no snapshot holds the position
        or time yet, when the table holds nothing up to that time, or when the snapshot that answered it
        has been expired."""
        ident = TableIdent(Namespace.of(namespace.split("\x1f")), table)
        if timestamp is not None:
            if partition is not None or offset is not None:
                raise BadRequest("Give either timestamp, or partition and offset, not both")
            at = await tables.snapshot_at_time(principal, warehouse, ident, timestamp, topic)
            return _response(
                at.snapshot, at.progress, (at.min_timestamp_ms, at.max_timestamp_ms), at.as_of_ms
            )
        if partition is None or offset is None:
            raise BadRequest("Give partition and offset (a Kafka record), or timestamp (a record time)")
        found = await tables.snapshot_at(principal, warehouse, ident, partition, offset, topic)
        return _response(found.snapshot, found.progress, record_times(found.snapshot), None)


def _response(
    snapshot: Snapshot, progress: KafkaProgress, times: tuple[int, int] | None, as_of: int | None
) -> SnapshotAtResponse:
    return SnapshotAtResponse(
        snapshot.snapshot_id,
        snapshot.sequence_number or 0,
        snapshot.timestamp_ms,
        progress.topic,
        {str(p): o for p, o in sorted(progress.start.items())},
        {str(p): o for p, o in sorted(progress.end.items())},
        None if times is None else times[0],
        None if times is None else times[1],
        as_of,
    )
