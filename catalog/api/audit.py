"""The audit log: every mutation and token request — who, what, when, outcome — stored in the database.

Only the route, its path parameters and the outcome are recorded; request bodies (which may hold
secrets) never are. A change and its entry commit together: the change's own transaction inserts the
entry (`catalog.store.audit_context`, `catalog.service.request_records` for table commits), and when it
cannot, the change is rolled back and refused (503). A request that changed nothing (refused, failed) is
recorded here after its answer; a success whose transaction wrote no entry too, its answer held until
the entry is stored and replaced by a 503 when it cannot be.
"""

from __future__ import annotations

import logging
from typing import Any

from litestar.datastructures import State
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from catalog.api.errors import UNAUDITED_ANSWER, answer_messages
from catalog.identifiers import SEPARATOR, decode_segment
from catalog.observability import REQUEST_ID
from catalog.service.audit import AuditWriter
from catalog.service.request_records import REQUEST_RECORDS, RequestRecords
from catalog.store.audit_context import PENDING_AUDIT, PendingAudit
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


# A handler whose targets are in its body (commitTransaction's tables) names them in the request's
# state under this key; the audit entry adds them to the path's.
AUDIT_TARGETS_STATE_KEY = "floe_audit_targets"
# At most this many characters of such targets are recorded (the rest summarized as a count).
MAX_TARGETS_TEXT = 2000


def _target(path_params: dict[str, Any], extra: str | None = None) -> str:
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
    if extra:
        parts.append(extra.replace(chr(0), "%00"))
    return " ".join(parts)


def body_targets(kind: str, names: list[str]) -> str:
    """`tables=a.b,a.c` for the audit entry, shortened to MAX_TARGETS_TEXT with the count of the rest."""
    shown: list[str] = []
    size = 0
    for name in names:
        if size + len(name) + 1 > MAX_TARGETS_TEXT:
            shown.append(f"…and {len(names) - len(shown)} more")
            break
        shown.append(name)
        size += len(name) + 1
    return f"{kind}=" + ",".join(shown)


def audit_step(app: ASGIApp, state: State, action: str, success_status: int) -> ASGIApp:
    """The audit step of the request pipeline for one operation (a mutation or the token endpoint):
    `app` (authentication, idempotency, the handler) runs with the entry its change's transaction
    writes; an answer that no transaction recorded is recorded before it completes, its start held
    until then, and a success that cannot be recorded is answered 503 instead."""

    async def step(scope: Scope, receive: Receive, send: Send) -> None:
        status = 500
        recorded = False
        start: Message | None = None
        records = RequestRecords(
            audit_entry=lambda answered: entry_of(scope, answered, action), success_status=success_status
        )
        token = REQUEST_RECORDS.set(records)
        # Written by the change's transaction (its first, when a request makes several).
        pending = PendingAudit(lambda: entry_of(scope, success_status, action))
        pending_token = PENDING_AUDIT.set(pending)

        def audited(answered: int) -> bool:
            written = pending.written
            return records.audited_status == answered or (
                written is not None and written.status_code == answered
            )

        async def capture(message: Message) -> None:
            nonlocal status, recorded, start
            if message["type"] == "http.response.start":
                # Held until the entry is stored: a success that cannot be audited is not answered.
                status, start = message["status"], message
                return
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                # Recorded before the response completes: a client that has its answer finds the
                # mutation in the audit log (not a moment later).
                recorded = True
                stored = audited(status) or await record_request(
                    state.components.audit, scope, status, action
                )
                if not stored and status < 400:
                    start, message = answer_messages(UNAUDITED_ANSWER)
            if start is not None:
                await send(start)
                start = None
            await send(message)

        try:
            await app(scope, receive, capture)
        finally:
            REQUEST_RECORDS.reset(token)
            PENDING_AUDIT.reset(pending_token)
            if not recorded and not audited(status):
                await record_request(state.components.audit, scope, status, action)

    return step


def entry_of(scope: Scope, status: int, action: str) -> AuditEntry:
    """The audit entry of a request answered with `status`."""
    state: dict[str, Any] = scope.get("state", {})
    principal = state.get(PRINCIPAL_STATE_KEY)
    subject = principal.subject if principal is not None else state.get(TOKEN_CLIENT_STATE_KEY, "anonymous")
    client = scope.get("client")
    return AuditEntry(
        subject=str(subject)[:255],
        cluster=principal.cluster if principal is not None else None,
        action=action[:128],
        target=_target(scope.get("path_params") or {}, state.get(AUDIT_TARGETS_STATE_KEY)),
        outcome=_outcome(status),
        status_code=status,
        request_id=REQUEST_ID.get()[:64],
        source=client[0] if client else "",
    )


async def record_request(audit: AuditWriter, scope: Scope, status: int, action: str) -> bool:
    """Write the audit entry of an answered request; False when it could not be written (logged)."""
    entry = entry_of(scope, status, action)
    try:
        if action == TOKEN_OPERATION and status == 200:
            await audit.record_repeatable(entry)
        else:
            await audit.record(entry)
    except Exception:
        log.exception("could not write audit entry for %s", action)
        return False
    return True
