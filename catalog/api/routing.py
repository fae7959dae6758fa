"""floe's route table, compiled once at start-up: which operation a request is, before any step runs.

The request pipeline (`catalog.api.pipeline`) authenticates, applies `Idempotency-Key` and audits every
request itself, so it must know the request's operation first: its path template (metrics, access
line), its operationId (the audit entry of a refused mutation names it), whether it is public, and the
status its success answers, and the longest body it takes (`catalog.api.body_limits`: the token
endpoint's `MAX_TOKEN_REQUEST_BYTES`, any other route's FLOE_MAX_BODY_BYTES; none for GET and HEAD,
whose body no handler reads). `RouteTable` reads them from the routes Litestar serves (their public
`path` and handlers' `http_methods`, `operation_id`, `status_code`), so the table cannot drift from what
is served, and matches a path the way Litestar's router does: slashes collapsed, a literal segment
before a parameter, no backtracking, a `path` parameter taking the rest. A path it does not match (or
a method its route does not serve) is Litestar's to answer (404, 405).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from litestar.routes import BaseRoute, HTTPRoute
from litestar.types import Scope

from catalog.api.audit import AUDITED_METHODS
from catalog.api.body_limits import BODYLESS_METHODS
from catalog.api.errors import TOKEN_PATH

# Routes anyone may call: the probes, the token endpoint and the API documentation. The console
# (`/console`) authenticates its own requests from a session cookie (catalog/console/session.py).
PUBLIC_TEMPLATES = frozenset({"/healthz", "/readyz", "/metrics", TOKEN_PATH, "/console"})
PUBLIC_PREFIXES = ("/openapi", "/console/")
# A token request is a few hundred bytes (a token exchange: a token more); larger ones are refused.
MAX_TOKEN_REQUEST_BYTES = 64 * 1024
# Routes whose bodies are bounded tighter than FLOE_MAX_BODY_BYTES.
BODY_LIMITS = {TOKEN_PATH: MAX_TOKEN_REQUEST_BYTES}
_PARAMETER = re.compile(r"^\{(?P<name>\w+):(?P<type>\w+)\}$")
# Litestar's router refuses a request whose Host header has other characters (400): left to it.
_VALID_HOST = re.compile(rb"\A[0-9A-Za-z!$&'()*+,;=\-._~:\[\]@%]*\Z")


# eq=False: hashed by identity, a C-level lookup of its compiled steps per request
@dataclass(frozen=True, slots=True, eq=False)
class Operation:
    """One method of one route, as the pipeline's steps need it."""

    template: str  # Litestar's `path_template`: the metrics label and access line's route
    name: str  # the audit entry's action: the operationId (else the template)
    method: str
    authenticated: bool  # a bearer token is required
    audited: bool  # a mutation or token request: its outcome is recorded
    idempotent: bool  # honours `Idempotency-Key`: an authenticated mutation
    success_status: int  # what its success answers (the status an in-transaction audit entry records)
    max_body_bytes: int | None  # the longest body it takes (None: GET, HEAD; its body is never read)


@dataclass(slots=True)
class _Node:
    literals: dict[str, _Node] = field(default_factory=dict)
    parameter: _Node | None = None
    rest: bool = False  # a `path` parameter: it takes every remaining segment
    names: tuple[str, ...] = ()  # the route's parameter names, in path order (where a route ends)
    operations: dict[str, Operation] = field(default_factory=dict)


def is_public(template: str) -> bool:
    return template in PUBLIC_TEMPLATES or template.startswith(PUBLIC_PREFIXES)


def operations_of(route: HTTPRoute, max_body_bytes: int) -> dict[str, Operation]:
    """The operations of a route, by method (`max_body_bytes`: the body limit of a route that has
    none of its own in `BODY_LIMITS`)."""
    public = is_public(route.path)
    body_limit = BODY_LIMITS.get(route.path, max_body_bytes)
    operations: dict[str, Operation] = {}
    for handler in route.route_handlers:
        operation_id = handler.operation_id
        for method in handler.http_methods:
            mutation = method in AUDITED_METHODS
            operations[str(method)] = Operation(
                template=route.path,
                name=operation_id if isinstance(operation_id, str) else route.path,
                method=str(method),
                authenticated=not public,
                audited=mutation,
                idempotent=mutation and not public,
                success_status=int(handler.status_code or 200),
                max_body_bytes=None if str(method) in BODYLESS_METHODS else body_limit,
            )
    return operations


class RouteTable:
    """The operations of the routes Litestar serves, by path and method (`max_body_bytes`: the body
    limit of a route without one of its own)."""

    def __init__(self, routes: Iterable[BaseRoute], max_body_bytes: int) -> None:
        self.max_body_bytes = max_body_bytes
        self._root = _Node()
        self._plain: dict[str, _Node] = {}
        self._by_template: dict[tuple[str, str], Operation] = {}
        for route in routes:
            if isinstance(route, HTTPRoute):
                self._add(route)

    def _add(self, route: HTTPRoute) -> None:
        if any(getattr(handler, "is_mount", False) for handler in route.route_handlers):
            raise ValueError(f"route {route.path}: mounted apps are not in floe's route table")
        segments = [segment for segment in route.path.split("/") if segment]
        names: list[str] = []
        if not any(_PARAMETER.match(segment) for segment in segments):
            node = self._plain.setdefault(route.path, _Node())
        else:
            node = self._walk_to_new(route, segments, names)
        node.names = tuple(names)
        node.operations.update(operations_of(route, self.max_body_bytes))
        for method, operation in node.operations.items():
            self._by_template[(route.path, method)] = operation

    def _walk_to_new(self, route: HTTPRoute, segments: list[str], names: list[str]) -> _Node:
        node = self._root
        for segment in segments:
            parameter = _PARAMETER.match(segment)
            if parameter is None:
                node = node.literals.setdefault(segment, _Node())
                continue
            if parameter["type"] not in ("str", "path"):
                # Litestar would parse it (an int, a date): the audit target would differ from its.
                raise ValueError(f"route {route.path}: path parameters must be str or path")
            if node.parameter is None:
                node.parameter = _Node(rest=parameter["type"] == "path")
            node = node.parameter
            names.append(parameter["name"])
        return node

    def operations(self) -> list[Operation]:
        return list(self._by_template.values())

    def operation(self, template: str, method: str) -> Operation:
        """The operation of a route's method (a hot route's, known by its template)."""
        return self._by_template[(template, method)]

    def match(self, scope: Scope) -> Operation | None:
        """The request's operation, with `path_template` and `path_params` set in `scope` as Litestar
        sets them; None when Litestar answers the request without a handler (404, 405, 400)."""
        path = scope["path"]
        root_path = scope.get("root_path", "")
        if root_path:
            path = path.split(root_path, maxsplit=1)[-1]
        components = [segment for segment in path.split("/") if segment]
        # A route without parameters is found by its whole path, never in the tree (as Litestar does:
        # `/v1/config/namespaces` is listNamespaces of a warehouse named `config`).
        node = self._plain.get("/" + "/".join(components))
        values: list[str] = []
        if node is None:
            node = self._walk(components, values)
        if node is None:
            return None
        operation = node.operations.get(str(scope.get("method", "")))
        if operation is None or not _valid_host(scope):
            return None
        scope["path_template"] = operation.template
        scope["path_params"] = dict(zip(node.names, values, strict=True))
        return operation

    def _walk(self, components: list[str], values: list[str]) -> _Node | None:
        """The node of a route with parameters that `components` reach, its parameters in `values`."""
        node = self._root
        for index, component in enumerate(components):
            literal = node.literals.get(component)
            if literal is not None:
                node = literal
                continue
            if node.parameter is None:
                return None
            node = node.parameter
            if node.rest:
                values.append("/" + "/".join(components[index:]))
                break
            values.append(component)
        return node


def _valid_host(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"host":
            return _VALID_HOST.match(value) is not None
    return True
