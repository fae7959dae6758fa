"""What a commit's own transaction writes along with the pointer swap: the request's audit entry, and
its `Idempotency-Key`'s outcome (`landed`, with the new metadata locations the answer is rebuilt from).

Written in the same transaction as the change, a crash between the commit and the answer can lose
neither: a retry finds the key `landed` and gets the same answer, and every change has its entry.
On PostgreSQL a single table's commit stays one statement (data-modifying CTEs), so this costs no
round trip; the multi-statement path (`TabularStoreMixin._swap_all`) calls `own_key` and `write`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    DateTime,
    Integer,
    String,
    Text,
    bindparam,
    cast,
    exists,
    func,
    insert,
    literal_column,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.errors import ServiceUnavailable
from catalog.store import outbox
from catalog.store.audit_context import AuditUnavailable
from catalog.store.schema import audit_log, idempotency_keys, tabulars
from catalog.store.security import AuditEntry

PENDING = "pending"
LANDED = "landed"


class RequestTakenOver(ServiceUnavailable):
    """The request's `Idempotency-Key` lease went to a retry: this attempt must not commit (the retry
    runs it), so nothing was written."""


@dataclass(frozen=True, slots=True)
class IdempotencyLanding:
    """Mark the claimed key `landed` (only while `owner` still holds it), with `reference`: what the
    retry's answer is rebuilt from."""

    key: str
    owner: str
    reference: str


@dataclass(frozen=True, slots=True)
class CommitRecords:
    """The rows a commit's transaction writes when (and only when) its swap lands."""

    audit: AuditEntry | None = None
    landing: IdempotencyLanding | None = None


def _audit_row(entry: AuditEntry, now: datetime) -> dict[str, Any]:
    return {
        "at": entry.at or now,
        "subject": entry.subject,
        "cluster": entry.cluster,
        "action": entry.action,
        "target": entry.target,
        "outcome": entry.outcome,
        "status_code": entry.status_code,
        "request_id": entry.request_id,
        "source": entry.source,
        "count": entry.count,
    }


# -- PostgreSQL: one statement for one table's swap and its records ------------------------------------

_AUDIT_COLUMNS = (
    ("at", DateTime(timezone=True)),
    ("subject", String()),
    ("cluster", String()),
    ("action", String()),
    ("target", Text()),
    ("outcome", String()),
    ("status_code", Integer()),
    ("request_id", String()),
    ("source", String()),
    ("count", Integer()),
)


def _swap_statement(*, landing: bool, event: bool = False, audit: bool = True) -> Any:
    """SELECT (swapped, audited, owned, marked, evented) counts over CTEs: lock the key while its owner
    holds it (`landing`), swap the pointer (only then), and when it swapped, mark the key landed, insert
    the audit entry (`audit`) and the commit's event into the outbox (`event`, catalog/store/outbox.py)."""
    owned = (
        select(idempotency_keys.c.key)
        .where(
            idempotency_keys.c.key == bindparam("k_key"),
            idempotency_keys.c.owner == bindparam("k_owner"),
            idempotency_keys.c.state == literal_column(f"'{PENDING}'"),
        )
        .with_for_update()
        .cte("owned")
    )
    conditions = [tabulars.c.id == bindparam("p_id"), tabulars.c.version == bindparam("p_version")]
    if landing:
        conditions.append(exists(select(owned.c.key)))
    swapped = (
        update(tabulars)
        .where(*conditions)
        .values(
            metadata_location=bindparam("p_location"),
            metadata_json=bindparam("p_json"),
            version=bindparam("p_next_version"),
            updated_at=bindparam("p_now"),
        )
        .returning(tabulars.c.id)
        .cte("swapped")
    )
    landed = exists(select(swapped.c.id))
    counts: list[Any] = [select(func.count()).select_from(swapped).scalar_subquery()]
    if audit:
        audited = (
            insert(audit_log)
            .from_select(
                [name for name, _ in _AUDIT_COLUMNS],
                select(*(cast(bindparam(f"a_{name}"), kind) for name, kind in _AUDIT_COLUMNS)).where(landed),
            )
            .returning(audit_log.c.id)
            .cte("audited")
        )
        counts.append(select(func.count()).select_from(audited).scalar_subquery())
    else:
        counts.append(literal_column("0"))
    if landing:
        marked = (
            update(idempotency_keys)
            .where(idempotency_keys.c.key == bindparam("k_key"), landed)
            .values(state=literal_column(f"'{LANDED}'"), response_body=bindparam("k_reference"))
            .returning(idempotency_keys.c.key)
            .cte("marked")
        )
        counts += [
            select(func.count()).select_from(owned).scalar_subquery(),
            select(func.count()).select_from(marked).scalar_subquery(),
        ]
    else:
        counts += [literal_column("0"), literal_column("0")]
    if event:
        counts.append(select(func.count()).select_from(outbox.event_cte(landed)).scalar_subquery())
    return select(*counts)


SWAP_AUDITED = _swap_statement(landing=False)
SWAP_AUDITED_LANDING = _swap_statement(landing=True)
SWAP_AUDITED_EVENT = _swap_statement(landing=False, event=True)
SWAP_AUDITED_LANDING_EVENT = _swap_statement(landing=True, event=True)
SWAP_EVENT = _swap_statement(landing=False, event=True, audit=False)


def swap_statement(records: CommitRecords | None, *, event: bool = False) -> Any:
    """The statement of one table's swap with `records` (None: the event alone, `event` must be set)."""
    if records is None:
        return SWAP_EVENT
    if records.landing is not None:
        return SWAP_AUDITED_LANDING_EVENT if event else SWAP_AUDITED_LANDING
    return SWAP_AUDITED_EVENT if event else SWAP_AUDITED


def parameters(records: CommitRecords | None, now: datetime) -> dict[str, Any]:
    """The records' parameters of `swap_statement` (the swap's own come from `_swap_parameters`, the
    event's from `outbox.parameters`)."""
    if records is None:
        return {}
    assert records.audit is not None
    params = {f"a_{name}": value for name, value in _audit_row(records.audit, now).items()}
    if records.landing is not None:
        params |= {
            "k_key": records.landing.key,
            "k_owner": records.landing.owner,
            "k_reference": records.landing.reference,
        }
    return params


def statement_swapped(row: Any, records: CommitRecords | None) -> bool:
    """Whether `swap_statement`'s swap landed; raises `RequestTakenOver` when a retry holds the key."""
    if records is not None and records.landing is not None and row[2] == 0:
        raise RequestTakenOver("A retry with the same Idempotency-Key took this request over; not applied")
    return bool(row[0] == 1)


# -- any database: inside a transaction of several statements -------------------------------------------


async def own_key(conn: AsyncConnection, records: CommitRecords | None) -> None:
    """Lock the request's key while its owner still holds it (first, before the swaps); raises
    `RequestTakenOver` when a retry took it over."""
    if records is None or records.landing is None:
        return
    held = await conn.execute(
        select(idempotency_keys.c.key)
        .where(
            idempotency_keys.c.key == records.landing.key,
            idempotency_keys.c.owner == records.landing.owner,
            idempotency_keys.c.state == PENDING,
        )
        .with_for_update()
    )
    if held.first() is None:
        raise RequestTakenOver("A retry with the same Idempotency-Key took this request over; not applied")


async def write(conn: AsyncConnection, records: CommitRecords | None, now: datetime) -> None:
    """Mark the key landed and insert the audit entry (after the swaps, in their transaction)."""
    if records is None:
        return
    if records.landing is not None:
        await conn.execute(
            update(idempotency_keys)
            .where(idempotency_keys.c.key == records.landing.key)
            .values(state=LANDED, response_body=records.landing.reference)
        )
    if records.audit is not None:
        try:
            await conn.execute(insert(audit_log).values(**_audit_row(records.audit, now)))
        except Exception as exc:  # the transaction rolls back: the change is refused, not unaudited
            raise AuditUnavailable() from exc
