"""Dependency providers shared by the controllers: the caller and the services."""

from __future__ import annotations

from typing import Annotated

from litestar import Request
from litestar.datastructures import State
from litestar.params import Parameter

from catalog.api.guards import principal_of
from catalog.auth import Principal
from catalog.errors import BadRequest
from catalog.service.audit import AuditService
from catalog.service.clusters import ClusterService
from catalog.service.context import CatalogContext
from catalog.service.keys import KeyService
from catalog.service.maintenance import MaintenanceService
from catalog.service.namespaces import NamespaceService
from catalog.service.pipelines import PipelineService
from catalog.service.security import AuthService
from catalog.service.tables import TableService
from catalog.service.views import ViewService
from catalog.storage import STORAGE_ENDPOINT_HEADER, parse_storage_endpoint

# floe's extension of the REST API: which of the warehouse's S3 endpoints the engine is told.
StorageEndpointHeader = Annotated[
    str | None,
    Parameter(
        header=STORAGE_ENDPOINT_HEADER,
        required=False,
        description="`internal`: tell this engine the S3 endpoint the catalog itself uses "
        "(`FLOE_S3_ENDPOINT`), for engines on the catalog's network; default `client`, the endpoint "
        "engines are told (`FLOE_S3_CLIENT_ENDPOINT` when set)",
    ),
]


async def provide_principal(request: Request) -> Principal:  # type: ignore[type-arg]
    """The caller, authenticated by `authentication_middleware` before the request got here."""
    return principal_of(request)


def provide_auth(state: State) -> AuthService:
    """The authentication service itself (the token endpoint uses it before anyone is authenticated)."""
    auth: AuthService = state.auth
    return auth


# The service providers take `principal` (unused) on purpose: Litestar resolves independent
# dependencies of a handler concurrently in an anyio task group, one task each, which cost ~8% of a
# loadTable's CPU. Depending on `principal` puts them in a later batch of one, resolved inline.


def provide_namespaces(state: State, principal: Principal) -> NamespaceService:
    return NamespaceService(state.ctx)


def provide_tables(
    state: State, principal: Principal, storage_endpoint: StorageEndpointHeader = None
) -> TableService:
    return TableService(state.ctx, parse_storage_endpoint(storage_endpoint))


def provide_views(
    state: State, principal: Principal, storage_endpoint: StorageEndpointHeader = None
) -> ViewService:
    return ViewService(state.ctx, parse_storage_endpoint(storage_endpoint))


def provide_clusters(state: State, principal: Principal) -> ClusterService:
    ctx: CatalogContext = state.ctx
    return ClusterService(ctx.store, ctx.warehouse, ctx.settings.warehouse_name)


def provide_keys(state: State, principal: Principal) -> KeyService:
    auth: AuthService = state.auth
    return KeyService(auth.store, auth)


def provide_audit(state: State, principal: Principal) -> AuditService:
    ctx: CatalogContext = state.ctx
    return AuditService(ctx.store)


def provide_maintenance(state: State, principal: Principal) -> MaintenanceService:
    ctx: CatalogContext = state.ctx
    return MaintenanceService(ctx.store, ctx.warehouse)


def provide_pipelines(state: State, principal: Principal) -> PipelineService:
    ctx: CatalogContext = state.ctx
    return PipelineService(ctx)


def provide_context(state: State, principal: Principal) -> CatalogContext:
    ctx: CatalogContext = state.ctx
    return ctx


# The Java client's pageSize is an int; larger values overflow the databases' LIMIT.
MAX_PAGE_SIZE = 2**31 - 1


def page_size_value(raw: int | None) -> int | None:
    if raw is not None and not 1 <= raw <= MAX_PAGE_SIZE:
        raise BadRequest(f"Invalid pageSize: {raw} (must be an integer from 1 to {MAX_PAGE_SIZE})")
    return raw
