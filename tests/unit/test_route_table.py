"""floe's route table (catalog/api/routing.py): compiled from the routes Litestar serves, it finds a
request's operation as Litestar's router does, so the pipeline can authenticate, apply
`Idempotency-Key` and audit before Litestar runs."""

from __future__ import annotations

from typing import Any, cast

import pytest
from litestar.types import HTTPScope

from catalog.api.app import build_litestar
from catalog.api.routing import Operation, RouteTable
from catalog.settings import Settings


@pytest.fixture(scope="module")
def table() -> RouteTable:
    return RouteTable(
        build_litestar(Settings.from_env({"FLOE_HOME": "/nonexistent-floe-home"})).routes, 16 * 1024 * 1024
    )


def _scope(method: str, path: str, host: bytes = b"floe.test") -> HTTPScope:
    return cast(HTTPScope, {"type": "http", "method": method, "path": path, "headers": [(b"host", host)]})


def _match(table: RouteTable, method: str, path: str) -> tuple[Operation | None, dict[str, Any]]:
    scope = _scope(method, path)
    return table.match(scope), cast(dict[str, Any], scope)


@pytest.mark.parametrize(
    ("method", "path", "name", "params"),
    [
        (
            "GET",
            "/v1/p/namespaces/a%1Fb/tables/t",
            "loadTable",
            {"prefix": "p", "namespace": "a%1Fb", "table": "t"},
        ),
        (
            "DELETE",
            "/v1/p/namespaces/n/tables/t",
            "dropTable",
            {"prefix": "p", "namespace": "n", "table": "t"},
        ),
        ("POST", "/v1/p/tables/rename", "renameTable", {"prefix": "p"}),
        ("POST", "/v1/p/transactions/commit", "commitTransaction", {"prefix": "p"}),
        # Slashes collapse, a trailing one is dropped.
        ("GET", "//v1//p/namespaces/n/tables/", "listTables", {"prefix": "p", "namespace": "n"}),
        # A route without parameters is found by its whole path only (as Litestar does): below, `config`
        # and `oauth` are warehouse names.
        ("GET", "/v1/config/namespaces", "listNamespaces", {"prefix": "config"}),
        ("GET", "/v1/oauth/namespaces", "listNamespaces", {"prefix": "oauth"}),
        ("GET", "/v1/config", "getConfig", {}),
        ("POST", "/management/v1/keys/k1/rotate", "rotateKey", {"client_id": "k1"}),
        ("PUT", "/management/v1/pipeline", "applyPipeline", {}),
    ],
)
def test_a_request_finds_its_operation_and_parameters(
    table: RouteTable, method: str, path: str, name: str, params: dict[str, str]
) -> None:
    operation, scope = _match(table, method, path)
    assert operation is not None
    assert operation.name == name
    assert scope["path_params"] == params
    assert scope["path_template"] == operation.template


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/no/such/route"),  # Litestar's 404
        ("GET", "/v1/p/namespaces/n/tables/t/nothing"),
        ("GET", "/v1/oauth/tokens"),  # Litestar's 405
        ("PATCH", "/v1/p/namespaces/n/tables/t"),
        ("GET", "/console/static"),  # a path parameter takes at least one segment
        ("GET", "/"),
    ],
)
def test_what_no_route_serves_is_litestars_to_answer(table: RouteTable, method: str, path: str) -> None:
    operation, scope = _match(table, method, path)
    assert operation is None
    assert "path_template" not in scope


def test_an_invalid_host_is_litestars_to_refuse(table: RouteTable) -> None:
    assert table.match(_scope("GET", "/v1/config", host=b"bad host")) is None


def test_each_operation_says_which_steps_it_needs(table: RouteTable) -> None:
    load = table.operation("/v1/{prefix:str}/namespaces/{namespace:str}/tables/{table:str}", "GET")
    assert (load.name, load.authenticated, load.audited, load.idempotent) == ("loadTable", True, False, False)
    drop = table.operation("/v1/{prefix:str}/namespaces/{namespace:str}/tables/{table:str}", "DELETE")
    assert (drop.authenticated, drop.audited, drop.idempotent, drop.success_status) == (True, True, True, 204)
    token = table.operation("/v1/oauth/tokens", "POST")
    assert (token.name, token.authenticated, token.audited, token.idempotent) == (
        "getToken",
        False,
        True,
        False,
    )
    created = table.operation("/management/v1/clusters", "POST")
    assert created.success_status == 201
    for public in ("/healthz", "/readyz", "/metrics", "/console", "/openapi/openapi.json"):
        operation, _ = _match(table, "GET", public)
        assert operation is not None, public
        assert not operation.authenticated, public
    # The console's forms authenticate from the session cookie (its own middleware), and are audited.
    sign_in, _ = _match(table, "POST", "/console/sign-in")
    assert sign_in is not None
    assert (sign_in.name, sign_in.authenticated, sign_in.audited) == (
        "consoleSignIn",
        False,
        True,
    )
    static, scope = _match(table, "GET", "/console/static/css/app.css")
    assert static is not None
    assert scope["path_params"] == {"file_path": "/css/app.css"}


def test_every_route_of_the_api_is_in_the_table_and_authenticated(table: RouteTable) -> None:
    """Litestar has no authentication of its own any more: every REST and management route must be an
    authenticated operation of the table (the token endpoint and the probes excepted)."""
    app = build_litestar(Settings.from_env({"FLOE_HOME": "/nonexistent-floe-home"}))
    assert not app.middleware
    checked = 0
    for route in app.routes:
        if not route.path.startswith(("/v1/", "/management/")) or route.path == "/v1/oauth/tokens":
            continue
        for method in route.methods:
            operation = table.operation(route.path, method)
            assert operation.authenticated, (route.path, method)
            checked += 1
    assert checked > 40
