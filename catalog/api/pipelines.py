"""`/management/v1/pipeline`: apply a floe.yaml (the desired state) and read the applied one back."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, get, put

from catalog.api.guards import admin_only
from catalog.auth import Principal
from catalog.service.pipelines import ApplyResult, PipelineService, PipelineState
from catalog.wire import ApplyPipelineResponse, PipelineResponse, PipelineTable, PlannedTable


class ApplyPipelineRequest(msgspec.Struct):
    """The parsed floe.yaml as JSON; `dry_run` plans without changing anything."""

    config: dict[str, Any]
    dry_run: bool = False


def _applied(result: ApplyResult) -> ApplyPipelineResponse:
    return ApplyPipelineResponse(
        revision=result.revision,
        warehouse=result.warehouse,
        dry_run=result.dry_run,
        applied=result.applied,
        plan=[PlannedTable(**t.to_json()) for t in result.plan.tables],
    )


def _state(state: PipelineState) -> PipelineResponse:
    record, config = state.record, state.config
    return PipelineResponse(
        revision=record.revision,
        applied_at=record.applied_at,
        applied_by=record.applied_by,
        warehouse=record.warehouse,
        config=config.to_json(),
        tables=[
            PipelineTable(
                cluster=t.source_cluster_name,
                topic=t.source_topic,
                namespace=t.namespace,
                table=t.table_name,
                dlq_table=t.dlq_table_name,
                warehouse=record.warehouse,
                source_format=t.source_format,
                schema_mode=t.schema_mode,
                schema_registry_url=t.registry_url,
                commit_interval_seconds=t.commit_interval_seconds,
                partitioning=[str(p) for p in t.partitioning],
            )
            for t in config.tables
        ],
    )


class PipelineController(Controller):
    path = "/management/v1/pipeline"
    tags = ["Management API"]

    @put("/", operation_id="applyPipeline", status_code=200, guards=[admin_only])
    async def apply(
        self, principal: Principal, pipelines: PipelineService, data: ApplyPipelineRequest
    ) -> ApplyPipelineResponse:
        """Validate a floe.yaml, create and evolve its tables (and their `_dlq` tables) in one commit,
        and store it as the new revision (global administrators only). A 400 lists every error with
        its YAML path in `error.errors`; destructive schema changes are refused and nothing is applied."""
        result = await pipelines.apply(principal, data.config, dry_run=data.dry_run)
        return _applied(result)

    @get("/", operation_id="getPipeline")
    async def get_pipeline(self, principal: Principal, pipelines: PipelineService) -> PipelineResponse:
        """The applied configuration (normalized) and its tables; a cluster's writer or admin key sees
        only its cluster's tables."""
        return _state(await pipelines.current(principal))
