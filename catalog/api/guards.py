"""Litestar guards: the HTTP gate in front of routes only some callers may reach. The rules themselves
are `catalog.auth`'s; services check them again, so a caller that is not HTTP gets the same answer."""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from catalog.api.audit import PRINCIPAL_STATE_KEY
from catalog.auth import Principal, require_admin
from catalog.errors import NotAuthorized
from catalog.service.leases import lease_scope

AUTHENTICATION_REQUIRED = "Authentication required: send a bearer token from /v1/oauth/tokens"


def principal_of(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    """The caller, authenticated by the request pipeline (`authentication_step`) before Litestar ran."""
    principal: Principal | None = connection.scope.get("state", {}).get(PRINCIPAL_STATE_KEY)
    if principal is None:
        raise NotAuthorized(AUTHENTICATION_REQUIRED)
    return principal


def admin_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Global administrators only."""
    require_admin(principal_of(connection))


def lease_holders_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Keys that may hold instance leases (before the body is read)."""
    lease_scope(principal_of(connection))
