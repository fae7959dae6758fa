"""The ingestion service's readings, for the console: read now from `floe ingest`'s metrics endpoint,
and sampled every interval into the catalog database for charts over a bounded window.

Every worker process of `floe serve` samples; the store keeps one sample per table and interval, so
the history holds each interval once whichever worker took it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from catalog.ingest_metrics import ingest_status
from catalog.store.ingest_history import IngestSample
from catalog.store.interfaces import IngestHistoryStore
from catalog.urls import strip_userinfo

log = logging.getLogger(__name__)

INGEST_METRICS_TIMEOUT_SECONDS = 3.0


@dataclass(frozen=True, slots=True)
class IngestReading:
    """What the ingestion service reports about one table right now."""

    offset_lag: int | None  # records produced but not committed, over all partitions
    time_lag_seconds: float | None  # the most behind partition's
    records_per_second: float | None
    error: str | None = None  # why the table cannot be ingested right now
    missing_topic: str | None = None  # its source topic, while the broker does not have it


@dataclass(frozen=True, slots=True)
class IngestMetrics:
    """The ingestion service's readings per table (`namespace.table`), or why there are none."""

    tables: dict[str, IngestReading]
    error: str | None = None


def ingest_readings(status: Mapping[str, Any]) -> dict[str, IngestReading]:
    """Per table, from `catalog.ingest_metrics.ingest_status`'s shape."""
    readings = {}
    for entry in status.get("tables", []):
        parts = entry.get("partitions") or []
        lags = [p["offset_lag"] for p in parts if "offset_lag" in p]
        times = [p["time_lag_seconds"] for p in parts if "time_lag_seconds" in p]
        readings[str(entry["table"])] = IngestReading(
            sum(lags) if lags else None,
            max(times) if times else None,
            entry.get("records_per_second"),
            strip_userinfo(entry.get("error")),  # a client's error may quote a URL with its password
            entry.get("missing_topic"),
        )
    return readings


async def read_ingest_metrics(url: str | None) -> IngestMetrics | None:
    """The ingestion service's metrics (None when no URL is configured; an error when unreachable)."""
    if not url:
        return None
    try:
        async with httpx.AsyncClient(timeout=INGEST_METRICS_TIMEOUT_SECONDS) as client:
            response = await client.get(url)
            response.raise_for_status()
        return IngestMetrics(ingest_readings(ingest_status(response.text)))
    except (httpx.HTTPError, ValueError) as exc:
        log.warning("ingestion metrics at %s unavailable: %s", url, exc)
        return IngestMetrics({}, "the ingestion service's metrics are unavailable")


class IngestHistory:
    """Samples the ingestion service's readings every `interval` seconds; keeps `retention` of them."""

    def __init__(self, store: IngestHistoryStore, url: str, interval: float, retention: timedelta) -> None:
        self.store = store
        self.url = url
        self.interval = interval
        self.retention = retention
        self._task: asyncio.Task[None] | None = None

    async def sample_once(self) -> int:
        """Take one interval's sample (unless another worker did) and drop what is past the window;
        how many tables were sampled."""
        metrics = await read_ingest_metrics(self.url)
        now = datetime.now(UTC)
        await self.store.prune_ingest_samples(now - self.retention)
        if metrics is None or metrics.error is not None:
            return 0
        bucket = int(time.time() // self.interval)
        samples = [
            IngestSample(table, now, r.offset_lag, r.time_lag_seconds, r.records_per_second)
            for table, r in sorted(metrics.tables.items())
        ]
        return len(samples) if await self.store.add_ingest_samples(bucket, samples) else 0

    async def _run(self) -> None:
        while True:
            try:
                await self.sample_once()
            except Exception:  # the database or the endpoint failing must not end the sampling
                log.exception("sampling the ingestion service's metrics failed")
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="floe-ingest-history")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def samples(self, table: str, window: timedelta | None = None) -> list[IngestSample]:
        """A table's samples over the window (the caller has checked it may read the table)."""
        return await self.store.list_ingest_samples(table, datetime.now(UTC) - (window or self.retention))
