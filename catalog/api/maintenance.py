"""`/management/v1/maintenance/passes`: the maintenance worker records each table's pass; operators
read them back (`catalog/service/maintenance.py` holds the rules)."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, get, post
from litestar.params import Parameter

from catalog.auth import Principal
from catalog.service.maintenance import MaintenanceService
from catalog.wire import ListPassesResponse, MaintenancePass, MaintenancePassReport

MAX_LIMIT = 1_000


class RecordPassRequest(MaintenancePassReport, frozen=True):
    # No docstring: the report's own would become the schema's description.
    pass


class MaintenanceController(Controller):
    path = "/management/v1/maintenance"
    tags = ["Management API"]

    @post("/passes", operation_id="recordMaintenancePass", status_code=201)
    async def record_pass(
        self, principal: Principal, maintenance: MaintenanceService, data: RecordPassRequest
    ) -> MaintenancePass:
        """Record one table's maintenance pass (the `floe maintain` worker calls this after each table):
        global administrators, or a writer or admin key of the cluster that owns the namespace."""
        return await maintenance.record(principal, data)

    @get("/passes", operation_id="listMaintenancePasses")
    async def list_passes(
        self,
        principal: Principal,
        maintenance: MaintenanceService,
        warehouse: str | None = None,
        namespace: Annotated[str | None, Parameter(description="Namespace levels separated by 0x1F")] = None,
        table: str | None = None,
        limit: Annotated[int, Parameter(ge=1, le=MAX_LIMIT)] = 100,
    ) -> ListPassesResponse:
        """The newest maintenance passes first, optionally of one warehouse, namespace or table. A
        cluster's keys see the passes of their cluster's namespaces only."""
        passes = await maintenance.list(
            principal, warehouse=warehouse, namespace=namespace, table=table, limit=limit
        )
        return ListPassesResponse(passes)
