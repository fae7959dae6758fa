"""The ingestion-instance half of the SQL store: leases of `floe ingest --shard auto` instances
(`ingest_members`), renewed by each instance and read by all of a group's."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from sqlalchemy import and_, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.store.schema import ingest_members


@dataclass(frozen=True, slots=True)
class IngestMemberRecord:
    member: str
    joined_at_ms: int
    expires_at_ms: int


class IngestMemberStoreMixin:
    """Ingestion instances' leases on the engines of `SqlCatalogStore`."""

    def _writing(self, *, change: bool = False) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    async def renew_ingest_member(
        self, scope: str, group: str, member: str, now_ms: int, expires_at_ms: int, max_members: int
    ) -> list[IngestMemberRecord] | None:
        """Hold `member`'s lease in `group` until `expires_at_ms` and answer the group's live members
        (by name); None, and nothing stored, when `scope` already holds `max_members` live members
        and this one is not among them. Expired leases of the group are deleted on the way."""
        in_group = and_(ingest_members.c.scope == scope, ingest_members.c.group_name == group)
        async with self._writing() as conn:
            expired = ingest_members.c.expires_at_ms < now_ms
            await conn.execute(delete(ingest_members).where(in_group, expired))
            renewed = await conn.execute(
                update(ingest_members)
                .where(in_group, ingest_members.c.member == member)
                .values(expires_at_ms=expires_at_ms)
            )
            if not renewed.rowcount:
                live = await conn.execute(
                    select(func.count()).where(
                        ingest_members.c.scope == scope, ingest_members.c.expires_at_ms >= now_ms
                    )
                )
                if int(live.scalar_one()) >= max_members:
                    return None
                try:
                    async with conn.begin_nested():
                        await conn.execute(
                            insert(ingest_members).values(
                                scope=scope,
                                group_name=group,
                                member=member,
                                joined_at_ms=now_ms,
                                expires_at_ms=expires_at_ms,
                            )
                        )
                except IntegrityError:  # the same member's concurrent first heartbeat inserted it
                    pass
            rows = await conn.execute(
                select(ingest_members.c.member, ingest_members.c.joined_at_ms, ingest_members.c.expires_at_ms)
                .where(in_group, ingest_members.c.expires_at_ms >= now_ms)
                .order_by(ingest_members.c.member)
            )
            return [IngestMemberRecord(r.member, int(r.joined_at_ms), int(r.expires_at_ms)) for r in rows]

    async def remove_ingest_member(self, scope: str, group: str, member: str) -> bool:
        """End `member`'s lease at once (a clean shutdown hands its tables over without waiting)."""
        async with self._writing() as conn:
            result = await conn.execute(
                delete(ingest_members).where(
                    ingest_members.c.scope == scope,
                    ingest_members.c.group_name == group,
                    ingest_members.c.member == member,
                )
            )
            return bool(result.rowcount)
