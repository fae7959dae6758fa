"""The served ASGI app: one pipeline every HTTP request passes through.

    request id + metrics + access line   here, once for every route
    → limits                             before the app: `catalog.http_limits` on the connection;
                                         body sizes in Litestar and the token handler
    → authentication                     `catalog.api.authentication.authenticated`
    → idempotency                        `catalog.api.middleware.idempotency_middleware` (mutations)
    → handler                            a hot route's plain handler, or a Litestar route
    audit, around the last three         `catalog.api.audit`: the entry of a mutation or token request
                                         (refusals included) is written before its answer leaves

The hot routes (`catalog.api.hot_routes`: loadTable, listTables/Views, the token endpoint's form posts)
are plain handlers called from here, authenticated and audited here with the same functions. Every other
request goes to Litestar, whose route middleware applies the same authentication, idempotency and audit
steps there: a refused mutation's audit entry names its operation, which only Litestar's routing knows.
No hot route is a mutation with an `Idempotency-Key` to honour (the token endpoint ignores it). Every
failure's answer comes from `catalog.api.errors`.
"""

from __future__ import annotations

import time
from typing import cast

from litestar import Litestar
from litestar.enums import ScopeType
from litestar.types import Message, Receive, Scope, Send

from catalog.api.audit import AUDITED_METHODS, record_request
from catalog.api.authentication import authenticated
from catalog.api.errors import Answer, failure, send_answer
from catalog.api.hot_routes import HotRoute, match
from catalog.api.middleware import record_access, request_id_of
from catalog.auth import Principal
from catalog.observability import REQUEST_ID

REQUEST_ID_HEADER = b"x-request-id"


class RequestPipeline:
    """Every HTTP request: its id, metrics and access line, then its hot route's handler or Litestar."""

    def __init__(self, litestar: Litestar) -> None:
        self.litestar = litestar

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:  # lifespan (and websockets, which no route serves)
            await self.litestar(scope, receive, send)
            return
        request_id = request_id_of(scope)
        token = REQUEST_ID.set(request_id)
        started = time.perf_counter()
        status = 500
        try:
            route = match(scope)
            if route is None:
                status = await self._litestar(scope, receive, send, request_id.encode())
            else:
                answer = await self._hot(route, scope, receive)
                if answer is not None:  # None: the client left before asking
                    status = answer[0]
                    await send_answer(send, answer, (REQUEST_ID_HEADER, request_id.encode()))
        finally:
            record_access(scope, status, time.perf_counter() - started)
            REQUEST_ID.reset(token)

    async def _hot(self, route: HotRoute, scope: Scope, receive: Receive) -> Answer | None:
        """authentication → handler → audit, for a hot route."""
        state = self.litestar.state
        principal: Principal | None = None
        if route.authenticated:
            caller = await authenticated(state, scope)
            if not isinstance(caller, Principal):
                return caller
            principal = caller
        try:
            answer = await route.handler(state, scope, receive, principal)
        except Exception as exc:  # answered as every failure is
            answer = failure(scope, exc)
        if answer is not None and scope.get("method") in AUDITED_METHODS:
            # Recorded before the answer goes out, as `audit_middleware` does for Litestar's routes.
            await record_request(state.ctx.audit, scope, answer[0], route.operation)
        return answer

    async def _litestar(self, scope: Scope, receive: Receive, send: Send, request_id: bytes) -> int:
        """Litestar's answer, with the request id; its status."""
        raw = scope.get("raw_path")
        if raw:
            # Route on the raw, still percent-encoded path (as `hot_routes.match` does): ASGI servers
            # decode `%2F` in `path` to `/`, which would split a namespace level such as `a/b` in two.
            # Handlers decode the segments.
            scope["path"] = raw.split(b"?", 1)[0].decode("latin-1")
        status = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [*message.get("headers", ()), (REQUEST_ID_HEADER, request_id)]
                message = cast(Message, {**message, "headers": headers})
            await send(message)

        try:
            await self.litestar(scope, receive, send_with_id)
        except Exception as exc:
            # Litestar answers its routes' failures itself; one that escapes it before an answer
            # started is answered here, as every failure is.
            if status:
                raise
            answer = failure(scope, exc)
            status = answer[0]
            await send_answer(send, answer, (REQUEST_ID_HEADER, request_id))
        return status or 500
