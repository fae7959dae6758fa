"""Ingestion's part of the completeness watermark (docs/watermarks.md): after each lag refresh, the
broker end offsets it read for every table's topic (and when) are reported to floe, one request per
cluster and warehouse; floe answers each table's watermark and offset completeness, exported here as
`floe_ingest_watermark_timestamp_seconds` and `floe_ingest_offset_completeness`.

floe derives the watermark, not ingestion: the committed offsets it compares with are its own. The
report is best effort: one that fails is logged and the next poll reports again (the watermark only
stays where it was meanwhile)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, MutableMapping
from typing import TYPE_CHECKING

from prometheus_client import Gauge

from catalog.client import ClientError
from ingest import metrics
from ingest.ingest_table import IngestTable

if TYPE_CHECKING:
    from catalog.client import FloeClient

log = logging.getLogger(__name__)

# floe takes at most this many tables in one report.
TABLES_PER_REPORT = 1_000

WATERMARK = Gauge(
    "floe_ingest_watermark_timestamp_seconds",
    "The table's completeness watermark: every record with an earlier Kafka timestamp is committed "
    "(as floe derived it at the last report)",
    ("table",),
    registry=metrics.REGISTRY,
)
OFFSET_COMPLETENESS = Gauge(
    "floe_ingest_offset_completeness",
    "Committed ÷ end offsets of the table's topic at the last report (1: caught up)",
    ("table",),
    registry=metrics.REGISTRY,
)

Observed = MutableMapping[str, tuple[IngestTable, int, dict[int, int]]]


def report_watermarks(
    observed: Observed, running: Iterable[str], client_for: Callable[[str], FloeClient]
) -> None:
    """Report (and forget) the end offsets observed for the `running` tables; `client_for(cluster)` is
    the client the cluster's tables are written with."""
    wanted = set(running)
    batches: dict[tuple[str, str, int], list[tuple[IngestTable, dict[int, int]]]] = {}
    for name in list(observed):
        table, at_ms, ends = observed.pop(name)
        if name in wanted:
            batches.setdefault((table.cluster, table.warehouse, at_ms), []).append((table, ends))
    for (cluster, warehouse, at_ms), tables in batches.items():
        for start in range(0, len(tables), TABLES_PER_REPORT):
            chunk = tables[start : start + TABLES_PER_REPORT]
            try:
                accepted = client_for(cluster).report_end_offsets(
                    warehouse,
                    at_ms,
                    [(t.namespace, t.table, t.topic, ends) for t, ends in chunk],
                )
            except ClientError as exc:
                log.warning(
                    "cannot report end offsets of %d tables to floe (next poll retries): %s", len(chunk), exc
                )
                continue
            topics = {t.name: t.topic for t, _ in chunk}
            for found in accepted.tables:
                name = ".".join([*found.namespace, found.table])
                if found.watermark_ms is not None:
                    WATERMARK.labels(name).set(found.watermark_ms / 1000)
                for topic in found.topics:  # the topic it reads now (not one floe.yaml used to name)
                    if topic.topic == topics.get(name) and topic.offset_completeness is not None:
                        OFFSET_COMPLETENESS.labels(name).set(topic.offset_completeness)
