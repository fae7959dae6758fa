"""Steps of the request pipeline (`catalog.api.pipeline`): request ids, metrics and access lines, and
`Idempotency-Key`."""

from __future__ import annotations

import asyncio
import itertools
import json
import os

from litestar.datastructures import State
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from catalog.api.audit import PRINCIPAL_STATE_KEY
from catalog.api.errors import INVALID_IDEMPOTENCY_KEY, earlier_request_answer, send_answer
from catalog.observability import AccessLog, RequestMetrics
from catalog.service.idempotency import (
    IDEMPOTENCY_LEASE_SECONDS,
    Claimed,
    IdempotencyService,
    idempotency_identity,
)
from catalog.service.request_records import REQUEST_RECORDS, RequestRecords

# The lease and the key identity are the idempotency service's; tests and tools import them from here.
__all__ = [
    "IDEMPOTENCY_LEASE_SECONDS",
    "idempotency_identity",
    "idempotency_step",
    "record_access",
    "request_id_of",
]

MUTATING_METHODS = frozenset({"POST", "DELETE", "PUT"})
IDEMPOTENCY_HEADER = b"idempotency-key"
# Response fields that hold secrets: such responses are never stored (see idempotency_step).
SECRET_FIELDS = frozenset(
    {"client_secret", "access_token", "refresh_token", "id_token", "token", "storage-credentials"}
)
SECRET_CONFIG_MARKERS = ("secret", "token", "password", "credential")
SECRET_MARKERS = (b"secret", b"token", b"password", b"credential")


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


class _RequestIds:
    """Generated request ids: 32 hex digits, a random per-process prefix and a counter. Unique like
    `uuid4().hex` (which read the kernel's random source on every request: ~1.5% of a 304's CPU)."""

    def __init__(self) -> None:
        self._reset()
        # A forked worker must not repeat its parent's ids (asking for the pid on every request is a
        # system call).
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._prefix = os.urandom(10).hex()
        self._counter = itertools.count()

    def next(self) -> str:
        return f"{self._prefix}{next(self._counter) & 0xFFFFFFFFFFFF:012x}"


_request_ids = _RequestIds()
_request_metrics = RequestMetrics()
UNLOGGED_ROUTES = frozenset({"/metrics", "/healthz", "/readyz"})
_access_log = AccessLog()


def request_id_of(scope: Scope) -> str:
    """The request's id: the client's `X-Request-Id`, or a new one."""
    return _header(scope, b"x-request-id") or _request_ids.next()


def record_access(scope: Scope, status: int, elapsed: float) -> None:
    """Count and time an answered request, and write its access line (probes are not logged)."""
    route = str(scope.get("path_template") or "unmatched")
    method = str(scope.get("method", ""))
    _request_metrics.record(method, route, status, elapsed)
    if route not in UNLOGGED_ROUTES:
        _access_log.write(method, route, status, round(elapsed * 1000, 2))


def idempotency_step(app: ASGIApp, state: State) -> ASGIApp:
    """The request pipeline's `Idempotency-Key` step for an authenticated mutation (rules:
    `catalog.service.idempotency`): the first final response is replayed to every retry; a retry that
    arrives while the first request runs waits for its outcome. A response that carries a secret (a
    key's `client_secret`, a token, vended storage credentials) is never stored or replayed: its retry
    answers 409 `SecretNotReplayedException`, the secret was shown once.
    """

    async def step(scope: Scope, receive: Receive, send: Send) -> None:
        key = _header(scope, IDEMPOTENCY_HEADER)
        principal = scope.get("state", {}).get(PRINCIPAL_STATE_KEY) if key is not None else None
        if key is None or principal is None:  # the principal: set by authentication, which runs first
            await app(scope, receive, send)
            return
        ctx = state.components
        if not 1 <= len(key) <= 64:
            await send_answer(send, INVALID_IDEMPOTENCY_KEY)
            return
        keys = IdempotencyService(ctx.store, ctx.settings.idempotency_lifetime_seconds)
        stored_key, fingerprint = idempotency_identity(
            principal.subject,
            principal.cluster,
            key,
            str(scope.get("method", "")),
            scope.get("raw_path", b""),
        )
        claim = await keys.claim(stored_key, fingerprint)
        if not isinstance(claim, Claimed):
            await send_answer(send, earlier_request_answer(claim))
            return
        # A commit marks the key landed in its own transaction; a landed claim is answered from it.
        records = REQUEST_RECORDS.get()
        if records is None:
            records = RequestRecords()
            REQUEST_RECORDS.set(records)
        records.claim = claim

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
        renewal = asyncio.create_task(keys.keep_lease(claim, stop))
        try:
            await app(scope, receive, capture)
        except BaseException:
            await _stop_renewal(stop, renewal)
            await keys.release(claim)
            raise
        await _stop_renewal(stop, renewal)
        response = bytes(body)
        await keys.finish(claim, status, response, content_type, carries_secret=_carries_secret(response))

    return step


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
