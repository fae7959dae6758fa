"""The ingest-history half of the SQL store: the ingestion service's readings per table, sampled at a
fixed interval (one row per table and interval, whichever worker process took the sample), kept for a
bounded window (`SqlCatalogStore` inherits these methods)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    Table,
    Text,
    UniqueConstraint,
    delete,
    insert,
    select,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.store.schema import metadata

# Created by migration 0008.
ingest_metric_samples = Table(
    "ingest_metric_samples",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    # The ingestion service's `table` label: `namespace.table`.
    Column("table_name", Text, nullable=False),
    # Seconds since the epoch divided by the sampling interval: one sample per table and interval.
    Column("bucket", BigInteger, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("offset_lag", BigInteger, nullable=True),
    Column("time_lag_seconds", Float, nullable=True),
    Column("records_per_second", Float, nullable=True),
    UniqueConstraint("table_name", "bucket", name="uq_ingest_metric_samples_bucket"),
    Index("ix_ingest_metric_samples_at", "at"),
)


@dataclass(frozen=True, slots=True)
class IngestSample:
    table: str
    at: datetime
    offset_lag: int | None
    time_lag_seconds: float | None
    records_per_second: float | None


def _aware(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything floe stores is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class IngestHistoryStoreMixin:
    """Ingest samples on the same engines as the catalog tables."""

    def _reading(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    def _writing(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    async def add_ingest_samples(self, bucket: int, samples: Sequence[IngestSample]) -> bool:
        """Store one interval's samples; False when another process already stored this interval's."""
        if not samples:
            return True
        rows = [
            {
                "table_name": s.table,
                "bucket": bucket,
                "at": s.at,
                "offset_lag": s.offset_lag,
                "time_lag_seconds": s.time_lag_seconds,
                "records_per_second": s.records_per_second,
            }
            for s in samples
        ]
        try:
            async with self._writing() as conn:
                await conn.execute(insert(ingest_metric_samples), rows)
        except IntegrityError:
            return False
        return True

    async def list_ingest_samples(self, table: str, since: datetime, limit: int = 5000) -> list[IngestSample]:
        """A table's samples since `since`, oldest first (the newest `limit` of them)."""
        query = (
            select(ingest_metric_samples)
            .where(ingest_metric_samples.c.table_name == table, ingest_metric_samples.c.at >= since)
            .order_by(ingest_metric_samples.c.at.desc())
            .limit(limit)
        )
        async with self._reading() as conn:
            rows = (await conn.execute(query)).all()
        return [
            IngestSample(
                r.table_name,
                _aware(r.at),
                r.offset_lag,
                r.time_lag_seconds,
                r.records_per_second,
            )
            for r in reversed(rows)
        ]

    async def prune_ingest_samples(self, before: datetime) -> int:
        async with self._writing() as conn:
            result = await conn.execute(
                delete(ingest_metric_samples).where(ingest_metric_samples.c.at < before)
            )
        return int(result.rowcount or 0)
