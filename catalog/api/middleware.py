"""ASGI middleware: raw paths, request ids with access logs and metrics, and `Idempotency-Key`."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from datetime import timedelta
from typing import cast

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from catalog.api.errors import error_body
from catalog.observability import LATENCY, REQUEST_ID, REQUESTS

log = logging.getLogger("floe.access")

MUTATING_METHODS = frozenset({"POST", "DELETE", "PUT"})
IDEMPOTENCY_HEADER = b"idempotency-key"
# How long a second request waits for the first one with the same key to finish.
IDEMPOTENCY_WAIT_SECONDS = 30.0


class RawPathApp:
    """Route on the raw, still percent-encoded path.

    ASGI servers decode `%2F` in `path` to `/`, which would split a namespace level such as `a/b` into
    two path segments. Routing on `raw_path` keeps each segment intact; handlers decode them.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.HTTP and scope.get("raw_path"):
            raw = scope["raw_path"].split(b"?", 1)[0]
            scope = cast(Scope, {**scope, "path": raw.decode("latin-1")})
        await self.app(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def request_context_middleware(app: ASGIApp) -> ASGIApp:
    """Tag each request with an id (`X-Request-Id`, honoured when sent), log it, and time it."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        request_id = _header(scope, b"x-request-id") or uuid.uuid4().hex
        token = REQUEST_ID.set(request_id)
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message = cast(Message, {**message, "headers": headers})
            await send(message)

        try:
            await app(scope, receive, send_wrapper)
        finally:
            elapsed = time.perf_counter() - started
            route = str(scope.get("path_template") or "unmatched")
            method = scope.get("method", "")
            REQUESTS.labels(method, route, str(status)).inc()
            LATENCY.labels(method, route).observe(elapsed)
            if route not in ("/metrics", "/healthz", "/readyz"):
                log.info(
                    "%s %s %d",
                    method,
                    route,
                    status,
                    extra={
                        "method": method,
                        "path": route,
                        "status": status,
                        "duration_ms": round(elapsed * 1000, 2),
                    },
                )
            REQUEST_ID.reset(token)

    return middleware


def idempotency_middleware(app: ASGIApp) -> ASGIApp:
    """`Idempotency-Key` on mutations: the first final response (2xx, 4xx) is stored and replayed to
    every retry; a retry that arrives while the first request runs waits for its outcome. 5xx
    responses are not finalized, so the client may retry them."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        key = _header(scope, IDEMPOTENCY_HEADER) if scope["type"] == ScopeType.HTTP else None
        if key is None or scope.get("method", "") not in MUTATING_METHODS:
            await app(scope, receive, send)
            return
        ctx = scope["litestar_app"].state.ctx
        store = ctx.store
        if not 1 <= len(key) <= 64:
            await _send_error(send, 400, "BadRequestException", "Invalid Idempotency-Key: expected a UUID")
            return
        # The caller is part of the fingerprint: nobody replays another key's stored response.
        principal = scope.get("state", {}).get("principal")
        subject = getattr(principal, "subject", "")
        fingerprint = hashlib.sha256(
            f"{subject} {scope.get('method', '')} {scope.get('raw_path', b'')!r}".encode()
        ).hexdigest()
        deadline = time.monotonic() + IDEMPOTENCY_WAIT_SECONDS
        while True:
            earlier = await store.claim_idempotency_key(key, fingerprint)
            if earlier is None:
                break
            state, row = earlier
            if row is not None and row.fingerprint != fingerprint:
                await _send_error(
                    send,
                    422,
                    "BadRequestException",
                    "Idempotency-Key was already used for a different request",
                )
                return
            if state == "done" and row is not None:
                await _send_stored(send, row.status_code, row.response_body or "", row.content_type)
                return
            if time.monotonic() > deadline:
                await _send_error(
                    send,
                    503,
                    "ServiceUnavailableException",
                    "A request with this Idempotency-Key is still running",
                )
                return
            await asyncio.sleep(0.05)

        status = 500
        content_type = "application/json"
        body = bytearray()

        async def capture(message: Message) -> None:
            nonlocal status, content_type
            if message["type"] == "http.response.start":
                status = message["status"]
                for k, v in message.get("headers", ()):
                    if k.lower() == b"content-type":
                        content_type = v.decode("latin-1")
            elif message["type"] == "http.response.body":
                body.extend(message.get("body", b""))
            await send(message)

        try:
            await app(scope, receive, capture)
        except BaseException:
            await store.release_idempotency_key(key)
            raise
        if status >= 500:
            await store.release_idempotency_key(key)
        else:
            await store.finish_idempotency_key(key, status, body.decode("utf-8", "replace"), content_type)
        if uuid.uuid4().int % 200 == 0:  # now and then, forget keys past their advertised lifetime
            lifetime = ctx.settings.idempotency_lifetime_seconds
            await store.expire_idempotency_keys(timedelta(seconds=2 * lifetime))

    return middleware


async def _send_stored(send: Send, status: int, body: str, content_type: str | None) -> None:
    payload = body.encode()
    headers: list[tuple[bytes, bytes]] = [(b"content-length", str(len(payload)).encode())]
    if payload:
        headers.append((b"content-type", (content_type or "application/json").encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload, "more_body": False})


async def _send_error(send: Send, status: int, error_type: str, message: str) -> None:
    payload = error_body(status, error_type, message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload, "more_body": False})
