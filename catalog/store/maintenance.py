"""The maintenance half of the SQL store: the passes `floe maintain` records (`SqlCatalogStore` inherits
these methods, like the security ones). Tables are kept by name, so a pass outlives its table."""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    String,
    Table,
    Text,
    func,
    insert,
    or_,
    select,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.store.schema import metadata

SEPARATOR = "\x1f"

# Created by migration 0005.
maintenance_passes = Table(
    "maintenance_passes",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("warehouse", String(255), nullable=False),
    # Levels joined by 0x1F, as namespaces.key.
    Column("namespace", Text, nullable=False),
    Column("table_name", Text, nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("duration_seconds", Float, nullable=False),
    # [{"name", "duration_seconds", "result", "error"}] in the order they ran.
    Column("actions", Text, nullable=False, server_default="[]"),
    # {"data_files", "data_bytes", "delete_files", "delete_bytes", "manifests", "snapshots"}
    Column("before", Text, nullable=False, server_default="{}"),
    Column("after", Text, nullable=False, server_default="{}"),
    Column("error", Text, nullable=True),
    Column("recorded_by", String(255), nullable=False),
    Column("recorded_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_maintenance_passes_table", "warehouse", "namespace", "table_name", "id"),
)


@dataclass(frozen=True, slots=True)
class MaintenancePassRecord:
    """One table's maintenance pass: what ran, how long it took, the table before and after."""

    warehouse: str
    namespace: str
    table: str
    started_at: datetime
    duration_seconds: float
    actions: list[dict[str, Any]]
    before: dict[str, Any]
    after: dict[str, Any]
    error: str | None
    recorded_by: str
    recorded_at: datetime | None = None
    id: int | None = None


def _aware(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything floe stores is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _record(row: Any) -> MaintenancePassRecord:
    return MaintenancePassRecord(
        warehouse=row.warehouse,
        namespace=row.namespace,
        table=row.table_name,
        started_at=_aware(row.started_at),
        duration_seconds=float(row.duration_seconds),
        actions=json.loads(row.actions),
        before=json.loads(row.before),
        after=json.loads(row.after),
        error=row.error,
        recorded_by=row.recorded_by,
        recorded_at=_aware(row.recorded_at),
        id=int(row.id),
    )


class MaintenanceStoreMixin:
    """Maintenance passes on the same engines as the catalog tables."""

    def _reading(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    def _writing(self, *, change: bool = False) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    async def add_maintenance_pass(self, record: MaintenancePassRecord) -> MaintenancePassRecord:
        """Store a pass; the stored record (with its id and recording time) comes back."""
        now = datetime.now(UTC)
        async with self._writing(change=True) as conn:
            result = await conn.execute(
                insert(maintenance_passes)
                .values(
                    warehouse=record.warehouse,
                    namespace=record.namespace,
                    table_name=record.table,
                    started_at=record.started_at,
                    duration_seconds=record.duration_seconds,
                    actions=json.dumps(record.actions),
                    before=json.dumps(record.before),
                    after=json.dumps(record.after),
                    error=record.error,
                    recorded_by=record.recorded_by,
                    recorded_at=now,
                )
                .returning(maintenance_passes.c.id)
            )
            pass_id = int(result.scalar_one())
        return replace(record, id=pass_id, recorded_at=now)

    async def list_maintenance_passes(
        self,
        *,
        warehouse: str | None = None,
        namespace: str | None = None,
        table: str | None = None,
        within: str | None = None,
        limit: int = 100,
    ) -> list[MaintenancePassRecord]:
        """The newest passes first, filtered by warehouse, namespace key and table name; `within` keeps
        only the passes of that namespace and the namespaces below it (what a cluster key may see)."""
        query = select(maintenance_passes).order_by(maintenance_passes.c.id.desc()).limit(limit)
        if warehouse is not None:
            query = query.where(maintenance_passes.c.warehouse == warehouse)
        if namespace is not None:
            query = query.where(maintenance_passes.c.namespace == namespace)
        if table is not None:
            query = query.where(maintenance_passes.c.table_name == table)
        if within is not None:
            query = query.where(
                or_(
                    maintenance_passes.c.namespace == within,
                    maintenance_passes.c.namespace.startswith(within + SEPARATOR, autoescape=True),
                )
            )
        async with self._reading() as conn:
            rows = (await conn.execute(query)).all()
        return [_record(row) for row in rows]


__all__ = ["MaintenancePassRecord", "MaintenanceStoreMixin", "maintenance_passes"]
