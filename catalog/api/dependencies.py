"""Dependency providers shared by the controllers: the caller and the services."""

from __future__ import annotations

from litestar import Request
from litestar.datastructures import State

from catalog.api.audit import PRINCIPAL_STATE_KEY
from catalog.auth import Principal
from catalog.errors import BadRequest, NotAuthorized
from catalog.service.context import CatalogContext
from catalog.service.namespaces import NamespaceService
from catalog.service.security import AuthService
from catalog.service.tables import TableService
from catalog.service.views import ViewService


async def provide_principal(request: Request) -> Principal:  # type: ignore[type-arg]
    """The caller, authenticated by `authentication_middleware` before the request got here."""
    principal: Principal | None = request.scope.get("state", {}).get(PRINCIPAL_STATE_KEY)
    if principal is None:
        raise NotAuthorized("Authentication required: send a bearer token from /v1/oauth/tokens")
    return principal


def provide_auth(state: State) -> AuthService:
    """The authentication service itself (the token endpoint uses it before anyone is authenticated)."""
    auth: AuthService = state.auth
    return auth


# The service providers take `principal` (unused) on purpose: Litestar resolves independent
# dependencies of a handler concurrently in an anyio task group, one task each, which cost ~8% of a
# loadTable's CPU. Depending on `principal` puts them in a later batch of one, resolved inline.


def provide_namespaces(state: State, principal: Principal) -> NamespaceService:
    return NamespaceService(state.ctx)


def provide_tables(state: State, principal: Principal) -> TableService:
    return TableService(state.ctx)


def provide_views(state: State, principal: Principal) -> ViewService:
    return ViewService(state.ctx)


def provide_context(state: State, principal: Principal) -> CatalogContext:
    ctx: CatalogContext = state.ctx
    return ctx


# The Java client's pageSize is an int; larger values overflow the databases' LIMIT.
MAX_PAGE_SIZE = 2**31 - 1


def page_size_value(raw: int | None) -> int | None:
    if raw is not None and not 1 <= raw <= MAX_PAGE_SIZE:
        raise BadRequest(f"Invalid pageSize: {raw} (must be an integer from 1 to {MAX_PAGE_SIZE})")
    return raw
