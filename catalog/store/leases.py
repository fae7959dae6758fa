"""The instance-lease half of the SQL store: leases of `--shard auto` instances of `floe ingest` and
`floe maintain` (`instance_leases`), renewed by each instance and read by all of a group's."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from sqlalchemy import and_, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.store.schema import instance_leases


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    member: str
    joined_at_ms: int
    expires_at_ms: int


class LeaseStoreMixin:
    """Instances' leases on the engines of `SqlCatalogStore`."""

    def _writing(self, *, change: bool = False) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    async def renew_lease(
        self, scope: str, group: str, member: str, now_ms: int, expires_at_ms: int, max_members: int
    ) -> list[LeaseRecord] | None:
        """Hold `member`'s lease in `group` until `expires_at_ms` and answer the group's live members
        (by name); None, and nothing stored, when `scope` already holds `max_members` live members
        and this one is not among them. The key's expired leases are deleted on the way."""
        in_group = and_(instance_leases.c.scope == scope, instance_leases.c.group_name == group)
        async with self._writing() as conn:
            # Every expired lease of the key, not only this group's: a key that keeps making groups
            # leaves no rows behind beyond its live ones.
            expired = instance_leases.c.expires_at_ms < now_ms
            await conn.execute(delete(instance_leases).where(instance_leases.c.scope == scope, expired))
            renewed = await conn.execute(
                update(instance_leases)
                .where(in_group, instance_leases.c.member == member)
                .values(expires_at_ms=expires_at_ms)
            )
            if not renewed.rowcount:
                live = await conn.execute(
                    select(func.count()).where(
                        instance_leases.c.scope == scope, instance_leases.c.expires_at_ms >= now_ms
                    )
                )
                if int(live.scalar_one()) >= max_members:
                    return None
                try:
                    async with conn.begin_nested():
                        await conn.execute(
                            insert(instance_leases).values(
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
                select(
                    instance_leases.c.member, instance_leases.c.joined_at_ms, instance_leases.c.expires_at_ms
                )
                .where(in_group, instance_leases.c.expires_at_ms >= now_ms)
                .order_by(instance_leases.c.member)
            )
            return [LeaseRecord(r.member, int(r.joined_at_ms), int(r.expires_at_ms)) for r in rows]

    async def end_lease(self, scope: str, group: str, member: str) -> bool:
        """End `member`'s lease at once (a clean shutdown hands its tables over without waiting)."""
        async with self._writing() as conn:
            result = await conn.execute(
                delete(instance_leases).where(
                    instance_leases.c.scope == scope,
                    instance_leases.c.group_name == group,
                    instance_leases.c.member == member,
                )
            )
            return bool(result.rowcount)
