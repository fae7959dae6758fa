"""The idempotency half of the SQL store: `Idempotency-Key` claims with leases, and stored responses
(`SqlCatalogStore` inherits these methods, like the security ones)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.store.schema import idempotency_keys

# `landed`: the request's change committed (with the key, in its transaction), its answer not stored yet;
# `response_body` holds what the answer is rebuilt from (`catalog.store.commit_records`).
IdempotencyState = Literal["pending", "landed", "done", "withheld"]


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """An earlier request's claim on a key: its fingerprint, state and (when final) its response."""

    state: str
    fingerprint: str
    owner: str | None
    status_code: int | None
    response_body: str | None
    content_type: str | None


def _record(row: Any) -> IdempotencyRecord:
    return IdempotencyRecord(
        row.state, row.fingerprint, row.owner, row.status_code, row.response_body, row.content_type
    )


def _aware(moment: datetime) -> datetime:
    """SQLite hands timestamps back without a zone; floe stores them in UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class IdempotencyStoreMixin:
    """Idempotency keys on the engines of `SqlCatalogStore`."""

    def _reading(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    def _writing(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    async def claim_idempotency_key(
        self, key: str, fingerprint: str, owner: str, lease: timedelta
    ) -> tuple[str, IdempotencyRecord | None] | None:
        """Claim `key` for a new request: None when claimed, ("taken", record) when a landed key was taken
        over, else (state, record) of the earlier request.

        A pending or landed key whose lease ran out (its owner crashed or hung) is taken over by one
        caller with the same fingerprint: the conditional update lets exactly one of several waiters
        win. A landed key's change committed: the new owner answers it without applying it again.
        """
        now = datetime.now(UTC)
        try:
            async with self._writing() as conn:
                await conn.execute(
                    insert(idempotency_keys).values(
                        key=key,
                        fingerprint=fingerprint,
                        state="pending",
                        owner=owner,
                        lease_until=now + lease,
                        created_at=now,
                    )
                )
            return None
        except IntegrityError:
            async with self._reading() as conn:
                row = (
                    await conn.execute(select(idempotency_keys).where(idempotency_keys.c.key == key))
                ).first()
        if row is None:  # released between our insert and read: try once more
            return ("pending", None)
        expired = row.lease_until is None or _aware(row.lease_until) < now
        if row.state not in ("pending", "landed") or row.fingerprint != fingerprint or not expired:
            return (row.state, _record(row))
        async with self._writing() as conn:
            taken = await conn.execute(
                update(idempotency_keys)
                .where(
                    idempotency_keys.c.key == key,
                    idempotency_keys.c.state == row.state,
                    idempotency_keys.c.owner == row.owner,
                    or_(idempotency_keys.c.lease_until.is_(None), idempotency_keys.c.lease_until < now),
                )
                .values(owner=owner, lease_until=now + lease)
            )
        if taken.rowcount != 1:
            return ("pending", _record(row))
        return ("taken", _record(row)) if row.state == "landed" else None

    async def renew_idempotency_lease(self, key: str, owner: str, lease: timedelta) -> bool:
        """Extend the owner's lease on its pending (or landed) key; False when the key is no longer the
        owner's."""
        async with self._writing() as conn:
            result = await conn.execute(
                update(idempotency_keys)
                .where(
                    idempotency_keys.c.key == key,
                    idempotency_keys.c.owner == owner,
                    idempotency_keys.c.state.in_(("pending", "landed")),
                )
                .values(lease_until=datetime.now(UTC) + lease)
            )
        return bool(result.rowcount == 1)

    async def finish_idempotency_key(
        self,
        key: str,
        owner: str,
        state: IdempotencyState,
        status_code: int,
        body: str | None,
        content_type: str,
    ) -> None:
        """Store the final response (`done`), or only its status (`withheld`: the body held a secret)."""
        async with self._writing() as conn:
            await conn.execute(
                update(idempotency_keys)
                .where(idempotency_keys.c.key == key, idempotency_keys.c.owner == owner)
                .values(
                    state=state,
                    status_code=status_code,
                    response_body=body,
                    content_type=content_type,
                    lease_until=None,
                )
            )

    async def release_idempotency_key(self, key: str, owner: str) -> None:
        """Forget a pending key; a landed one (its change committed) is kept for the retry, whose lease
        starts now."""
        async with self._writing() as conn:
            deleted = await conn.execute(
                delete(idempotency_keys).where(
                    idempotency_keys.c.key == key,
                    idempotency_keys.c.owner == owner,
                    idempotency_keys.c.state == "pending",
                )
            )
            if deleted.rowcount == 0:
                await conn.execute(
                    update(idempotency_keys)
                    .where(
                        idempotency_keys.c.key == key,
                        idempotency_keys.c.owner == owner,
                        idempotency_keys.c.state == "landed",
                    )
                    .values(lease_until=datetime.now(UTC))
                )

    async def expire_idempotency_keys(self, older_than: timedelta) -> int:
        async with self._writing() as conn:
            result = await conn.execute(
                delete(idempotency_keys).where(idempotency_keys.c.created_at < datetime.now(UTC) - older_than)
            )
        return int(result.rowcount or 0)
