"""`/management/v1/maintenance/passes`: the maintenance worker records each table's pass; operators
read them back (what ran, how long, files, bytes and snapshots before and after, the error if any)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec
from litestar import Controller, get, post
from litestar.params import Parameter

from catalog.auth import SEPARATOR, Action, Principal, authorize
from catalog.errors import BadRequest, Forbidden
from catalog.service.context import CatalogContext
from catalog.store.maintenance import MaintenancePassRecord

MAX_ACTIONS = 100
MAX_ERROR_CHARS = 10_000
MAX_LIMIT = 1_000


class TableStats(msgspec.Struct):
    """A table at one moment: live data and delete files of its current snapshot, its manifests and
    snapshots."""

    data_files: int
    data_bytes: int
    delete_files: int
    delete_bytes: int
    manifests: int
    snapshots: int


class MaintenanceAction(msgspec.Struct, omit_defaults=True):
    """One step of a pass (`rewrite_data_files`, `expire_snapshots` …) and what it reported."""

    name: str
    duration_seconds: float
    result: dict[str, Any] = msgspec.field(default_factory=dict)
    error: str | None = None


class RecordPassRequest(msgspec.Struct):
    warehouse: str
    namespace: list[str]
    table: str
    started_at: datetime
    duration_seconds: float
    actions: list[MaintenanceAction]
    before: TableStats | None = None
    after: TableStats | None = None
    error: str | None = None


class MaintenancePass(msgspec.Struct):
    id: int
    warehouse: str
    namespace: list[str]
    table: str
    started_at: datetime
    duration_seconds: float
    actions: list[MaintenanceAction]
    before: TableStats | None
    after: TableStats | None
    error: str | None
    recorded_by: str
    recorded_at: datetime


class ListPassesResponse(msgspec.Struct):
    passes: list[MaintenancePass]


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


def _check(data: RecordPassRequest) -> str:
    """The namespace key of a valid request; `BadRequest` otherwise."""
    if not data.namespace or any(not level for level in data.namespace):
        raise BadRequest("Invalid maintenance pass: namespace must be a non-empty list of non-empty levels")
    if not data.table:
        raise BadRequest("Invalid maintenance pass: table must not be empty")
    if data.duration_seconds < 0 or any(a.duration_seconds < 0 for a in data.actions):
        raise BadRequest("Invalid maintenance pass: durations must not be negative")
    if len(data.actions) > MAX_ACTIONS:
        raise BadRequest(f"Invalid maintenance pass: at most {MAX_ACTIONS} actions")
    for stats in (data.before, data.after):
        if stats is not None and min(msgspec.structs.astuple(stats)) < 0:
            raise BadRequest("Invalid maintenance pass: table statistics must not be negative")
    return SEPARATOR.join(data.namespace)


def _truncated(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_ERROR_CHARS:
        return text
    return text[:MAX_ERROR_CHARS] + "…"


class MaintenanceController(Controller):
    path = "/management/v1/maintenance"
    tags = ["Management API"]

    @post("/passes", operation_id="recordMaintenancePass", status_code=201)
    async def record_pass(
        self, principal: Principal, context: CatalogContext, data: RecordPassRequest
    ) -> MaintenancePass:
        """Record one table's maintenance pass (the `floe maintain` worker calls this after each table):
        global administrators, or a writer or admin key of the cluster that owns the namespace."""
        namespace = _check(data)
        authorize(principal, Action.WRITE, data.warehouse, namespace)
        await context.warehouse(data.warehouse)
        record = MaintenancePassRecord(
            warehouse=data.warehouse,
            namespace=namespace,
            table=data.table,
            started_at=data.started_at,
            duration_seconds=data.duration_seconds,
            actions=[
                msgspec.to_builtins(
                    MaintenanceAction(a.name, a.duration_seconds, a.result, _truncated(a.error))
                )
                for a in data.actions
            ],
            before=msgspec.to_builtins(data.before) if data.before is not None else {},
            after=msgspec.to_builtins(data.after) if data.after is not None else {},
            error=_truncated(data.error),
            recorded_by=principal.subject,
        )
        return _pass(await context.store.add_maintenance_pass(record))

    @get("/passes", operation_id="listMaintenancePasses")
    async def list_passes(
        self,
        principal: Principal,
        context: CatalogContext,
        warehouse: str | None = None,
        namespace: Annotated[str | None, Parameter(description="Namespace levels separated by 0x1F")] = None,
        table: str | None = None,
        limit: Annotated[int, Parameter(ge=1, le=MAX_LIMIT)] = 100,
    ) -> ListPassesResponse:
        """The newest maintenance passes first, optionally of one warehouse, namespace or table. A
        cluster's keys see the passes of their cluster's namespaces only."""
        within: str | None = None
        if not principal.is_admin:
            if principal.cluster is None:
                raise Forbidden(f"Key {principal.subject} has no cluster and is not an administrator")
            warehouse = warehouse or principal.warehouse
            assert warehouse is not None
            authorize(principal, Action.READ, warehouse, namespace)
            within = principal.cluster
        if table is not None and not table:
            raise BadRequest("Invalid table filter: must not be empty")
        passes = await context.store.list_maintenance_passes(
            warehouse=warehouse, namespace=namespace, table=table, within=within, limit=limit
        )
        return ListPassesResponse([_pass(record) for record in passes])
