"""Dependency providers shared by the controllers: the caller, and the services the app built at startup."""

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
from catalog.service.components import CatalogComponents
from catalog.service.keys import KeyService
from catalog.service.leases import LeaseService
from catalog.service.maintenance import MaintenanceService
from catalog.service.namespaces import NamespaceService
from catalog.service.pipelines import PipelineService
from catalog.service.security import AuthService
from catalog.service.tables import TableService
from catalog.service.views import ViewService
from catalog.service.warehouses import Warehouses
from catalog.service.watermarks import WatermarkService
from catalog.settings import Settings
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
    """The caller, authenticated by the request pipeline's authentication step
    (`catalog.api.authentication.authentication_step`) before the request got here."""
    return principal_of(request)


def provide_auth(state: State) -> AuthService:
    """The authentication service itself (the token endpoint uses it before anyone is authenticated)."""
    auth: AuthService = state.auth
    return auth


# The services are built once at startup (`CatalogComponents`): a provider only picks the right one.
# They take `principal` (unused) on purpose: Litestar resolves independent dependencies of a handler
# concurrently in an anyio task group, one task each, which cost ~8% of a loadTable's CPU. Depending
# on `principal` puts them in a later batch of one, resolved inline.


def components_of(state: State) -> CatalogComponents:
    components: CatalogComponents = state.components
    return components


def provide_namespaces(state: State, principal: Principal) -> NamespaceService:
    return components_of(state).namespaces


def provide_tables(
    state: State, principal: Principal, storage_endpoint: StorageEndpointHeader = None
) -> TableService:
    return components_of(state).tables[parse_storage_endpoint(storage_endpoint)]


def provide_views(
    state: State, principal: Principal, storage_endpoint: StorageEndpointHeader = None
) -> ViewService:
    return components_of(state).views[parse_storage_endpoint(storage_endpoint)]


def provide_watermarks(state: State, principal: Principal) -> WatermarkService:
    return components_of(state).watermarks


def provide_clusters(state: State, principal: Principal) -> ClusterService:
    return components_of(state).clusters


def provide_keys(state: State, principal: Principal) -> KeyService:
    auth: AuthService = state.auth
    return KeyService(auth.store, auth)


def provide_audit(state: State, principal: Principal) -> AuditService:
    return components_of(state).audit_log


def provide_maintenance(state: State, principal: Principal) -> MaintenanceService:
    return components_of(state).maintenance


def provide_leases(state: State, principal: Principal) -> LeaseService:
    return components_of(state).leases


def provide_pipelines(state: State, principal: Principal) -> PipelineService:
    return components_of(state).pipelines


def provide_warehouses(state: State, principal: Principal) -> Warehouses:
    return components_of(state).warehouses


def provide_settings(state: State) -> Settings:
    return components_of(state).settings


# The Java client's pageSize is an int; larger values overflow the databases' LIMIT.
MAX_PAGE_SIZE = 2**31 - 1


def page_size_value(raw: int | None) -> int | None:
    if raw is not None and not 1 <= raw <= MAX_PAGE_SIZE:
        raise BadRequest(f"Invalid pageSize: {raw} (must be an integer from 1 to {MAX_PAGE_SIZE})")
    return raw
