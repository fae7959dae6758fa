"""The pending audit entry of a mutation request (`catalog.store.audit_context`): only the request's own
task writes it, once, and only a transaction that commits counts as having written it."""

from __future__ import annotations

import asyncio

import pytest

from catalog.store.audit_context import PENDING_AUDIT, PendingAudit, pending_audit, settling
from catalog.store.security import AuditEntry

ENTRY = AuditEntry(
    subject="admin",
    cluster=None,
    action="createNamespace",
    target="namespace=a",
    outcome="ok",
    status_code=200,
    request_id="r1",
    source="127.0.0.1",
)


async def _staged_in_transaction(pending: PendingAudit, *, fails: bool) -> None:
    with settling():
        pending._staged = ENTRY  # as `record_change` leaves it after its insert
        if fails:
            raise RuntimeError("the transaction did not commit")


def test_only_the_requests_own_task_sees_its_entry() -> None:
    async def request() -> None:
        pending = PendingAudit(lambda: ENTRY)
        PENDING_AUDIT.set(pending)
        assert pending_audit() is pending

        # Tasks spawned during the request copy its context (lease renewals, audit flushes, refreshes).
        async def spawned() -> PendingAudit | None:
            return pending_audit()

        assert await asyncio.get_running_loop().create_task(spawned()) is None
        pending.mark_written(ENTRY)
        assert pending.written is ENTRY
        assert pending_audit() is None  # written once: the request's later transactions do not

    asyncio.run(request())


def test_an_entry_counts_as_written_only_when_its_transaction_commits() -> None:
    async def request() -> None:
        pending = PendingAudit(lambda: ENTRY)
        PENDING_AUDIT.set(pending)
        with pytest.raises(RuntimeError):
            await _staged_in_transaction(pending, fails=True)
        assert pending.written is None
        assert pending_audit() is pending  # the next change writes it
        await _staged_in_transaction(pending, fails=False)
        assert pending.written is ENTRY
        assert pending_audit() is None

    asyncio.run(request())


def test_no_request_no_entry() -> None:
    assert pending_audit() is None
