"""The audit log: every mutation and token request — who, what, when, outcome — stored in the database.

Only the route, its path parameters and the outcome are recorded; request bodies (which may hold
secrets) never are.
"""

from __future__ import annotations

import logging
from typing import Any

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from catalog.identifiers import SEPARATOR, decode_segment
from catalog.observability import REQUEST_ID
from catalog.service.audit import AuditWriter
from catalog.store.security import AuditEntry

log = logging.getLogger(__name__)

AUDITED_METHODS = frozenset({"POST", "PUT", "DELETE"})
PRINCIPAL_STATE_KEY = "principal"
TOKEN_CLIENT_STATE_KEY = "token_client_id"
# The token endpoint's operation: its granted requests repeat (engines ask before most queries).
TOKEN_OPERATION = "getToken"


def _outcome(status: int) -> str:
    if status < 400:
        return "ok"
    if status in (401, 403, 429):
        return "denied"
    return "failed"


def _target(path_params: dict[str, Any]) -> str:
    parts = []
    for name in ("prefix", "namespace", "table", "view", "name", "client_id"):
        raw = path_params.get(name)
        if isinstance(raw, str):
            try:
                value = decode_segment(raw.replace("%1F", SEPARATOR).replace("%1f", SEPARATOR))
            except Exception:
                value = raw
            # PostgreSQL text cannot hold NUL: a refused request with one in its path is still recorded.
            parts.append(f"{name}={value.replace(SEPARATOR, '.').replace(chr(0), '%00')}")
    return " ".join(parts)


def audit_middleware(app: ASGIApp) -> ASGIApp:
    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or scope.get("method", "") not in AUDITED_METHODS:
            await app(scope, receive, send)
            return
        status = 500
        recorded = False

        async def capture(message: Message) -> None:
            nonlocal status, recorded
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                # Recorded before the response completes: a client that has its answer finds the
                # mutation in the audit log (not a moment later).
                recorded = True
                await _record(scope, status)
            await send(message)

        try:
            await app(scope, receive, capture)
        finally:
            if not recorded:
                await _record(scope, status)

    return middleware


async def _record(scope: Scope, status: int) -> None:
    handler = scope.get("route_handler")
    operation = getattr(handler, "operation_id", None)
    action = operation if isinstance(operation, str) else str(scope.get("path_template") or scope.get("path"))
    await record_request(scope["litestar_app"].state.ctx.audit, scope, status, action)


async def record_request(audit: AuditWriter, scope: Scope, status: int, action: str) -> None:
    """Write the audit entry of an answered request (its failure is logged, never raised)."""
    state: dict[str, Any] = scope.get("state", {})
    principal = state.get(PRINCIPAL_STATE_KEY)
    subject = principal.subject if principal is not None else state.get(TOKEN_CLIENT_STATE_KEY, "anonymous")
    client = scope.get("client")
    entry = AuditEntry(
        subject=str(subject)[:255],
        cluster=principal.cluster if principal is not None else None,
        action=action[:128],
        target=_target(scope.get("path_params") or {}),
        outcome=_outcome(status),
        status_code=status,
        request_id=REQUEST_ID.get()[:64],
        source=client[0] if client else "",
    )
    try:
        if action == TOKEN_OPERATION and status == 200:
            await audit.record_repeatable(entry)
        else:
            await audit.record(entry)
    except Exception:
        log.exception("could not write audit entry for %s", action)
