"""`GET /v1/config`, health, readiness and Prometheus metrics."""

from __future__ import annotations

import re

from litestar import Litestar, Request, Response, get
from litestar.datastructures import State
from litestar.handlers import HTTPRouteHandler

from catalog.api.dependencies import StorageEndpointHeader
from catalog.api.schemas import CatalogConfig
from catalog.auth import Action, Principal, authorize
from catalog.errors import ServiceUnavailable
from catalog.observability import metrics_payload
from catalog.service.components import CatalogComponents
from catalog.service.warehouses import Warehouses
from catalog.settings import Settings
from catalog.storage import client_properties, parse_storage_endpoint

_PARAM_TYPE = re.compile(r"\{([^}:]+):[^}]+\}")


def served_endpoints(app: Litestar) -> list[str]:
    """Every `/v1/{prefix}/…` route this server answers, in the spec's `METHOD /path` form."""
    endpoints: set[str] = set()
    for route in app.routes:
        path = _PARAM_TYPE.sub(r"{\1}", route.path)
        if not path.startswith("/v1/{prefix}"):
            continue
        for handler in getattr(route, "route_handlers", []):
            if isinstance(handler, HTTPRouteHandler):
                endpoints.update(f"{m} {path}" for m in handler.http_methods if m not in ("OPTIONS",))
    return sorted(endpoints)


@get("/v1/config", operation_id="getConfig", tags=["Configuration API"])
async def get_config(
    request: Request,  # type: ignore[type-arg]
    principal: Principal,
    warehouses: Warehouses,
    settings: Settings,
    warehouse: str | None = None,
    storage_endpoint: StorageEndpointHeader = None,
) -> CatalogConfig:
    """Catalog configuration for a warehouse (`?warehouse=`; default: the caller's cluster's warehouse,
    else the default warehouse)."""
    name = warehouse or principal.warehouse or settings.warehouse_name
    authorize(principal, Action.READ, name)
    record = await warehouses.get(name)
    endpoints = request.app.state.get("endpoints")
    if endpoints is None:
        endpoints = request.app.state["endpoints"] = served_endpoints(request.app)
    minutes = settings.idempotency_lifetime_seconds // 60
    return CatalogConfig(
        defaults=client_properties(record.properties, parse_storage_endpoint(storage_endpoint)),
        overrides={"prefix": record.name, "warehouse": record.name},
        endpoints=endpoints,
        idempotency_key_lifetime=f"PT{minutes}M",
    )


@get("/healthz", include_in_schema=False)
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@get("/readyz", include_in_schema=False)
async def readyz(state: State) -> dict[str, str]:
    """Unauthenticated, like `/healthz`: load balancers and orchestrators probe it."""
    components: CatalogComponents = state.components
    try:
        await components.store.ping()
    except Exception as exc:
        raise ServiceUnavailable(f"Database unreachable: {type(exc).__name__}") from exc
    return {"status": "ready"}


@get("/metrics", include_in_schema=False)
async def metrics() -> Response[bytes]:
    return Response(content=metrics_payload(), media_type="text/plain; version=0.0.4")
