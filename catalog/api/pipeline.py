"""The served ASGI app: one pipeline every HTTP request passes through, each step written once.

    connection limits                    before the app: `catalog.http_limits` (request head size,
                                         slow clients' deadlines, connections)
    request id + metrics + access line   here, for every request
    operation                            `catalog.api.hot_routes.match`, else `catalog.api.routing`
                                         (floe's route table, compiled from Litestar's routes at start)
    audit                                `catalog.api.audit.audit_step` (mutations, token requests): the
                                         outcome of the steps after it, refusals included, recorded
                                         before the answer leaves
    limits                               `catalog.api.body_limits.body_limit_step`: the operation's
                                         body limit (declared lengths refused before any body is
                                         read, others counted as they arrive); not for GET and HEAD
    authentication                       `catalog.api.authentication.authentication_step`
    idempotency                          `catalog.api.middleware.idempotency_step` (authenticated mutations)
    handler                              a hot route's plain handler, or Litestar (routing, parameters,
                                         the controller)

Each operation's chain of steps is composed once, at start-up, from what the route table says of it
(public or not, a mutation or not, its body limit), so a request runs exactly the steps its operation
needs, in this order, whether a hot handler or Litestar answers it. A request no route serves
(Litestar's 404 or 405) goes to Litestar behind the limits step alone, with FLOE_MAX_BODY_BYTES. Audit
comes before limits (as before authentication): a mutation refused for its size is recorded like any
other refusal, whether refused on its declared length or as its body arrives.
Every failure's answer comes from `catalog.api.errors`.
"""

from __future__ import annotations

import time
from typing import cast

from litestar import Litestar
from litestar.datastructures import State
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from catalog.api.audit import PRINCIPAL_STATE_KEY, audit_step
from catalog.api.authentication import authentication_step
from catalog.api.body_limits import BODYLESS_METHODS, body_limit_step
from catalog.api.errors import failure, send_answer
from catalog.api.hot_routes import HOT_ROUTES, HotRoute, match
from catalog.api.middleware import idempotency_step, record_access, request_id_of
from catalog.api.routing import Operation, RouteTable
from catalog.observability import REQUEST_ID

REQUEST_ID_HEADER = b"x-request-id"


def chain(operation: Operation, handler: ASGIApp, state: State) -> ASGIApp:
    """`handler` behind the steps `operation` needs: audit → limits → authentication → idempotency."""
    app = handler
    if operation.idempotent:
        app = idempotency_step(app, state)
    if operation.authenticated:
        app = authentication_step(app, state)
    if operation.max_body_bytes is not None:
        app = body_limit_step(app, operation.max_body_bytes)
    if operation.audited:
        app = audit_step(app, state, operation.name, operation.success_status)
    return app


def hot_handler(route: HotRoute, state: State) -> ASGIApp:
    """A hot route's plain handler as the last step: its answer, or the answer to its failure."""

    async def handle(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            answer = await route.handler(state, scope, receive, scope["state"].get(PRINCIPAL_STATE_KEY))
        except Exception as exc:  # answered as every failure is
            answer = failure(scope, exc)
        if answer is not None:  # None: the client left before asking
            await send_answer(send, answer)

    return handle


class RequestPipeline:
    """Every HTTP request: its id, metrics and access line, then its operation's steps and handler."""

    def __init__(self, litestar: Litestar, max_body_bytes: int) -> None:
        self.litestar = litestar
        state = litestar.state
        self.routes = RouteTable(litestar.routes, max_body_bytes)
        # Litestar's own answers (404, 405) read no body, but a declared one over the limit is refused
        # all the same: nothing gets past the pipeline unbounded.
        self._unrouted = body_limit_step(litestar, max_body_bytes)
        self._litestar_chains = {
            operation: chain(operation, litestar, state) for operation in self.routes.operations()
        }
        self._hot_chains = {
            route: chain(self._operation_of(route), hot_handler(route, state), state) for route in HOT_ROUTES
        }

    def _operation_of(self, route: HotRoute) -> Operation:
        return self.routes.operation(route.template, route.method)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:  # lifespan (and websockets, which no route serves)
            await self.litestar(scope, receive, send)
            return
        request_id = request_id_of(scope)
        request_id_header = (REQUEST_ID_HEADER, request_id.encode())
        token = REQUEST_ID.set(request_id)
        started = time.perf_counter()
        status = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [*message.get("headers", ()), request_id_header]
                message = cast(Message, {**message, "headers": headers})
            await send(message)

        scope.setdefault("state", {})
        try:
            await self._handler(scope)(scope, receive, send_with_id)
        except Exception as exc:
            # The steps and handlers answer their failures; one that escapes them before an answer
            # started is answered here, as every failure is.
            if status:
                raise
            answer = failure(scope, exc)
            status = answer[0]
            await send_answer(send, answer, request_id_header)
        finally:
            record_access(scope, status or 500, time.perf_counter() - started)
            REQUEST_ID.reset(token)

    def _handler(self, scope: Scope) -> ASGIApp:
        """The request's chain: its hot route's, its operation's in front of Litestar, or Litestar."""
        route = match(scope)
        if route is not None:
            return self._hot_chains[route]
        raw = scope.get("raw_path")
        if raw:
            # Route on the raw, still percent-encoded path (as `hot_routes.match` does): ASGI servers
            # decode `%2F` in `path` to `/`, which would split a namespace level such as `a/b` in two.
            # Handlers decode the segments.
            scope["path"] = raw.split(b"?", 1)[0].decode("latin-1")
        operation = self.routes.match(scope)
        if operation is not None:
            return self._litestar_chains[operation]
        return self.litestar if scope.get("method") in BODYLESS_METHODS else self._unrouted
