"""Maintenance passes: the `floe maintain` worker records each table's pass; operators read them back
(what ran, how long, files, bytes and snapshots before and after, the error if any)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import msgspec

from catalog.auth import SEPARATOR, Action, Principal, authorize, maintenance_scope
from catalog.errors import BadRequest
from catalog.service.keys import visible_principals
from catalog.store.interfaces import ApiKeyStore, MaintenanceStore
from catalog.store.maintenance import MaintenancePassRecord
from catalog.store.records import WarehouseRecord
from catalog.wire import MaintenanceAction, MaintenancePass, MaintenancePassReport, TableStats

MAX_ACTIONS = 100
MAX_ERROR_CHARS = 10_000
# Names of tables are at most FLOE_MAX_NAME_BYTES (itself at most 65,536) and of actions a few words;
# a report naming more names nothing that exists, and would only fill the passes table.
MAX_NAME_CHARS = 65_536
MAX_NAMESPACE_LEVELS = 1_000
MAX_ACTION_NAME_CHARS = 200
MAX_STAT = 2**63 - 1  # the statistics are int64 (bigint columns and JSON read back by engines)

WarehouseLookup = Callable[[str], Awaitable[WarehouseRecord]]


class PassStore(MaintenanceStore, ApiKeyStore, Protocol):
    """The passes, and the keys that recorded them (a cluster key sees only its cluster's)."""


def _stats(raw: dict[str, Any]) -> TableStats | None:
    return msgspec.convert(raw, TableStats) if raw else None


def _pass(record: MaintenancePassRecord) -> MaintenancePass:
    assert record.id is not None
    assert record.recorded_at is not None
    return MaintenancePass(
        id=record.id,
        warehouse=record.warehouse,
        namespace=record.namespace.split(SEPARATOR),
        table=record.table,
        started_at=record.started_at,
        duration_seconds=record.duration_seconds,
        actions=[msgspec.convert(action, MaintenanceAction) for action in record.actions],
        before=_stats(record.before),
        after=_stats(record.after),
        error=record.error,
        recorded_by=record.recorded_by,
        recorded_at=record.recorded_at,
    )


def _check(report: MaintenancePassReport) -> str:
    """The namespace key of a valid report; `BadRequest` otherwise."""
    if not report.namespace or any(not level for level in report.namespace):
        raise BadRequest("Invalid maintenance pass: namespace must be a non-empty list of non-empty levels")
    if not report.table:
        raise BadRequest("Invalid maintenance pass: table must not be empty")
    names = [report.warehouse, report.table, *report.namespace]
    if len(report.namespace) > MAX_NAMESPACE_LEVELS or max(map(len, names)) > MAX_NAME_CHARS:
        raise BadRequest("Invalid maintenance pass: warehouse, namespace or table name too long")
    if any(len(a.name) > MAX_ACTION_NAME_CHARS for a in report.actions):
        raise BadRequest(f"Invalid maintenance pass: action names are at most {MAX_ACTION_NAME_CHARS} chars")
    if report.duration_seconds < 0 or any(a.duration_seconds < 0 for a in report.actions):
        raise BadRequest("Invalid maintenance pass: durations must not be negative")
    if len(report.actions) > MAX_ACTIONS:
        raise BadRequest(f"Invalid maintenance pass: at most {MAX_ACTIONS} actions")
    for stats in (report.before, report.after):
        if stats is not None and min(msgspec.structs.astuple(stats)) < 0:
            raise BadRequest("Invalid maintenance pass: table statistics must not be negative")
        if stats is not None and max(msgspec.structs.astuple(stats)) > MAX_STAT:
            raise BadRequest(f"Invalid maintenance pass: table statistics must be at most {MAX_STAT}")
    return SEPARATOR.join(report.namespace)


def _truncated(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_ERROR_CHARS:
        return text
    return text[:MAX_ERROR_CHARS] + "…"


class MaintenanceService:
    def __init__(self, store: PassStore, warehouse: WarehouseLookup) -> None:
        self.store = store
        self.warehouse = warehouse

    async def record(self, principal: Principal, report: MaintenancePassReport) -> MaintenancePass:
        """Store one table's pass: global administrators, or a writer or admin key of the cluster that
        owns the namespace."""
        namespace = _check(report)
        authorize(principal, Action.WRITE, report.warehouse, namespace)
        await self.warehouse(report.warehouse)
        record = MaintenancePassRecord(
            warehouse=report.warehouse,
            namespace=namespace,
            table=report.table,
            started_at=report.started_at,
            duration_seconds=report.duration_seconds,
            actions=[
                msgspec.to_builtins(
                    MaintenanceAction(a.name, a.duration_seconds, a.result, _truncated(a.error))
                )
                for a in report.actions
            ],
            before=msgspec.to_builtins(report.before) if report.before is not None else {},
            after=msgspec.to_builtins(report.after) if report.after is not None else {},
            error=_truncated(report.error),
            recorded_by=principal.subject,
        )
        return _pass(await self.store.add_maintenance_pass(record))

    async def list(
        self,
        principal: Principal,
        *,
        warehouse: str | None,
        namespace: str | None,
        table: str | None,
        limit: int,
    ) -> list[MaintenancePass]:
        """The newest passes first, optionally of one warehouse, namespace key or table; a cluster's
        keys see the passes of their cluster's namespaces only."""
        warehouse, within = maintenance_scope(principal, warehouse, namespace)
        if table is not None and not table:
            raise BadRequest("Invalid table filter: must not be empty")
        passes = await self.store.list_maintenance_passes(
            warehouse=warehouse, namespace=namespace, table=table, within=within, limit=limit
        )
        names = await visible_principals(self.store, principal, {p.recorded_by for p in passes})
        return [msgspec.structs.replace(_pass(p), recorded_by=names[p.recorded_by]) for p in passes]
