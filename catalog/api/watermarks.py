"""`/management/v1/watermark`: a table's completeness watermark (docs/watermarks.md), read or waited
for (`?until=&wait=`, a bounded long-poll), and the broker end offsets ingestion reports for it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from litestar import Controller, get, post
from litestar.params import Parameter

from catalog.auth import Principal
from catalog.errors import BadRequest
from catalog.kafka_offsets import MAX_RECORD_TIME_MS
from catalog.service.watermarks import TableWatermark, WatermarkService, as_datetime, table_ident
from catalog.wire import (
    EndOffsetsAccepted,
    EndOffsetsReport,
    PartitionWatermark,
    TopicWatermark,
    WatermarkResponse,
)


def parse_until(text: str) -> int:
    """A time as epoch milliseconds: an integer (epoch ms) or ISO-8601 (UTC when it names no offset)."""
    stripped = text.strip()
    if stripped.isdigit() and len(stripped) <= 16:
        value = int(stripped)
    else:
        try:
            parsed = datetime.fromisoformat(stripped.replace("Z", "+00:00"))
        except ValueError:
            raise BadRequest("until must be epoch milliseconds or an ISO-8601 time") from None
        value = round((parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp() * 1000)
    if not 0 <= value <= MAX_RECORD_TIME_MS:
        raise BadRequest("until must be between 1970 and the end of year 9999")
    return value


def watermark_response(found: TableWatermark, until_ms: int | None = None) -> WatermarkResponse:
    return WatermarkResponse(
        namespace=list(found.ident.namespace.levels),
        table=found.ident.name,
        watermark_ms=found.watermark_ms,
        watermark=as_datetime(found.watermark_ms),
        topics=[
            TopicWatermark(
                topic=t.topic,
                watermark_ms=t.watermark_ms,
                watermark=as_datetime(t.watermark_ms),
                offset_completeness=t.offset_completeness,
                committed_records=t.committed_records,
                end_records=t.end_records,
                as_of_ms=t.as_of_ms,
                partitions=[
                    PartitionWatermark(
                        p.partition, p.committed_offset, p.end_offset, p.observed_at_ms, p.complete_through_ms
                    )
                    for p in t.partitions
                ],
            )
            for t in found.topics
        ],
        until_ms=until_ms,
        complete=None if until_ms is None else found.complete_through(until_ms),
    )


class WatermarkController(Controller):
    path = "/management/v1/watermark"
    tags = ["Management API"]

    @get("/", operation_id="getWatermark")
    async def get_watermark(
        self,
        principal: Principal,
        watermarks: WatermarkService,
        warehouse: str,
        namespace: Annotated[str, Parameter(description="Namespace levels separated by 0x1F")],
        table: str,
        until: Annotated[
            str | None,
            Parameter(description="Whether the table is complete through this time (epoch ms or ISO-8601)"),
        ] = None,
        wait: Annotated[
            float,
            Parameter(
                ge=0,
                description="With until: wait up to this many seconds for it "
                "(FLOE_WATERMARK_MAX_WAIT_SECONDS at most)",
            ),
        ] = 0.0,
    ) -> WatermarkResponse:
        """The table's completeness watermark: every record whose Kafka timestamp is before
        `watermark-ms` is in the table (the earliest, over its topic's partitions, of the latest time
        each was seen caught up with the broker); and its offset completeness (committed ÷ end offsets
        as ingestion last saw them). With `until`, `complete` says whether the watermark has reached it;
        with `wait` too, the answer comes once it has or after `wait` seconds (a bounded long-poll: 429
        when the cluster has too many open). Readers of the table may call it."""
        ident = table_ident(namespace, table)
        until_ms = None if until is None else parse_until(until)
        found = await watermarks.watermark(principal, warehouse, ident, until_ms, wait)
        return watermark_response(found, until_ms)

    @post("/observations", operation_id="reportEndOffsets", status_code=200)
    async def report(
        self, principal: Principal, watermarks: WatermarkService, data: EndOffsetsReport
    ) -> EndOffsetsAccepted:
        """Ingestion's report of the broker end offsets of its tables' topics, read at
        `observed-at-ms`; answers each table's completeness after it. Writer and admin keys of the
        tables' cluster may call it."""
        tables = [(table_ident(t.namespace, t.table), t.topic, t.end_offsets) for t in data.tables]
        found = await watermarks.report(principal, data.warehouse, data.observed_at_ms, tables)
        return EndOffsetsAccepted([watermark_response(f) for f in found])
