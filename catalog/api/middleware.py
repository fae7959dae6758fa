"""ASGI middleware: raw paths, request ids with access logs and metrics, and `Idempotency-Key`."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import socket
import time
import uuid
from datetime import timedelta
from typing import Any, cast

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from catalog.api.audit import PRINCIPAL_STATE_KEY
from catalog.api.errors import error_body
from catalog.observability import LATENCY, REQUEST_ID, REQUESTS

log = logging.getLogger("floe.access")

MUTATING_METHODS = frozenset({"POST", "DELETE", "PUT"})
IDEMPOTENCY_HEADER = b"idempotency-key"
# How long a second request waits for the first one with the same key to finish.
IDEMPOTENCY_WAIT_SECONDS = 30.0
# A pending key's lease: renewed every quarter of it while its request runs, so a crashed owner's key
# is taken over within this long, and a live owner would have to stall for 3/4 of it to lose it.
# Leases are compared with each server's own clock: servers sharing a database keep theirs in sync (NTP).
IDEMPOTENCY_LEASE_SECONDS = 5.0
LEASE = timedelta(seconds=IDEMPOTENCY_LEASE_SECONDS)
TOKEN_PATH = "/v1/oauth/tokens"
# Who holds a pending key (for whoever looks at the table after a crash): host and process.
_INSTANCE = f"{socket.gethostname()[:24]}:{os.getpid()}"
# Response fields that hold secrets: such responses are never stored (see idempotency_middleware).
SECRET_FIELDS = frozenset(
    {"client_secret", "access_token", "refresh_token", "id_token", "token", "storage-credentials"}
)
SECRET_CONFIG_MARKERS = ("secret", "token", "password", "credential")
SECRET_MARKERS = (b"secret", b"token", b"password", b"credential")


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


def idempotency_identity(
    subject: str, cluster: str | None, key: str, method: str, raw_path: bytes
) -> tuple[str, str]:
    """The stored key and the request fingerprint: both bound to the caller, so one caller's key is
    never another's (and a crash test can write the row a dead owner would leave)."""
    caller = f"{subject}\x1f{cluster or ''}"
    stored_key = hashlib.sha256(f"{caller}\x1f{key}".encode()).hexdigest()
    fingerprint = hashlib.sha256(f"{caller} {method} {raw_path!r}".encode()).hexdigest()
    return stored_key, fingerprint


def idempotency_middleware(app: ASGIApp) -> ASGIApp:
    """`Idempotency-Key` on authenticated mutations: the first final response (2xx, 4xx) is stored and
    replayed to every retry; a retry that arrives while the first request runs waits for its outcome.
    5xx responses are not finalized, so the client may retry them.

    - Keys belong to the caller: the stored key is sha256(subject, cluster, key), so callers never
      replay, block or collide with each other's keys; only the same caller reusing a key for another
      request gets 422. Unauthenticated routes (the token endpoint) ignore the header.
    - Secrets are never stored or replayed: a response that carries one (a key's `client_secret`, a
      token, vended storage credentials) is stored as its status only, and its retry answers
      409 `SecretNotReplayedException`: the first request succeeded and its secret was shown once.
    - A pending key is held under a lease of `IDEMPOTENCY_LEASE_SECONDS` that its request renews while
      it runs; when the owner dies (kill -9, a lost host), one waiting retry takes the key over once
      the lease runs out instead of waiting for the key to expire.
    """

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        key = _header(scope, IDEMPOTENCY_HEADER) if scope["type"] == ScopeType.HTTP else None
        principal = scope.get("state", {}).get(PRINCIPAL_STATE_KEY) if key is not None else None
        if (
            key is None
            or principal is None  # unauthenticated: nothing to bind the key to
            or scope.get("method", "") not in MUTATING_METHODS
            or scope.get("path_template") == TOKEN_PATH
        ):
            await app(scope, receive, send)
            return
        ctx = scope["litestar_app"].state.ctx
        store = ctx.store
        if not 1 <= len(key) <= 64:
            await _send_error(send, 400, "BadRequestException", "Invalid Idempotency-Key: expected a UUID")
            return
        stored_key, fingerprint = idempotency_identity(
            principal.subject,
            principal.cluster,
            key,
            str(scope.get("method", "")),
            scope.get("raw_path", b""),
        )
        owner = f"{_INSTANCE}/{uuid.uuid4().hex[:16]}"
        deadline = time.monotonic() + IDEMPOTENCY_WAIT_SECONDS
        while True:
            earlier = await store.claim_idempotency_key(stored_key, fingerprint, owner, LEASE)
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
            if state == "withheld" and row is not None:
                await _send_error(
                    send,
                    409,
                    "SecretNotReplayedException",
                    f"The request with this Idempotency-Key already succeeded (HTTP {row.status_code}); "
                    "its response carried a secret, which is shown only once and never stored",
                )
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

        stop = asyncio.Event()
        renewal = asyncio.create_task(_renew_lease(store, stored_key, owner, stop))
        try:
            await app(scope, receive, capture)
        except BaseException:
            await _stop_renewal(stop, renewal)
            await store.release_idempotency_key(stored_key, owner)
            raise
        await _stop_renewal(stop, renewal)
        if status >= 500:
            await store.release_idempotency_key(stored_key, owner)
        elif _carries_secret(bytes(body)):
            await store.finish_idempotency_key(stored_key, owner, "withheld", status, None, content_type)
        else:
            text = body.decode("utf-8", "replace")
            await store.finish_idempotency_key(stored_key, owner, "done", status, text, content_type)
        if uuid.uuid4().int % 200 == 0:  # now and then, forget keys past their advertised lifetime
            lifetime = ctx.settings.idempotency_lifetime_seconds
            await store.expire_idempotency_keys(timedelta(seconds=2 * lifetime))

    return middleware


async def _renew_lease(store: Any, key: str, owner: str, stop: asyncio.Event) -> None:
    """Keep the owner's lease ahead while its request runs (stopped, not cancelled, so that no
    database write is cut off half way)."""
    while True:
        try:
            await asyncio.wait_for(stop.wait(), IDEMPOTENCY_LEASE_SECONDS / 4)
            return
        except TimeoutError:
            pass
        try:
            if not await store.renew_idempotency_lease(key, owner, LEASE):
                log.warning("idempotency key lease lost to a retry while its request still runs")
                return
        except Exception:  # the request itself will meet the same database trouble
            log.warning("could not renew an idempotency key lease", exc_info=True)


async def _stop_renewal(stop: asyncio.Event, renewal: asyncio.Task[None]) -> None:
    stop.set()
    await renewal


def _carries_secret(body: bytes) -> bool:
    """Whether a response holds a secret: a key's secret, a token, or vended storage credentials."""
    if not any(marker in body for marker in SECRET_MARKERS):  # cheap: most responses have none
        return False
    try:
        document = json.loads(body)
    except ValueError:
        return True  # cannot tell: keep nothing
    if not isinstance(document, dict):
        return False
    if document.keys() & SECRET_FIELDS:
        return True
    config = document.get("config")
    return isinstance(config, dict) and any(
        marker in str(name).lower() for name in config for marker in SECRET_CONFIG_MARKERS
    )


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
