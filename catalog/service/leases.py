"""Leases of `--shard auto` instances (`floe ingest`, `floe maintain`): each renews its own every few
seconds and gets back the group's live instances, among which every instance divides the tables the same
way (`runtime.shards.owner_of`). An instance that stops renewing (killed, cut off) drops out of the answers
once its lease runs out, and the others take its tables over; two instances that briefly both take a
table cannot both commit a batch of it (the catalog's Kafka offsets fence).

A group belongs to the key its instances authenticate with: one key never sees, joins or ends another
key's groups. Global administrators and writer or admin keys of a cluster may hold leases; a key holds
at most `MAX_MEMBERS` live ones, over all its groups."""

from __future__ import annotations

import re
import time

from catalog.auth import Principal, Role
from catalog.errors import BadRequest, Forbidden, QuotaExceeded
from catalog.store.interfaces import LeaseStore
from catalog.wire import LeaseGroup, LeaseHolder

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
MIN_TTL_SECONDS = 2
MAX_TTL_SECONDS = 300
MAX_MEMBERS = 256


def lease_scope(principal: Principal) -> str:
    """The key the lease is held under; `Forbidden` for keys that may not hold leases."""
    if not principal.is_admin and (principal.cluster is None or principal.role is Role.READER):
        raise Forbidden(f"Key {principal.subject} may not hold instance leases (a writer or admin key may)")
    return principal.subject


def _check_names(group: str, member: str) -> None:
    for what, value in (("group", group), ("member", member)):
        if not NAME.match(value):
            raise BadRequest(
                f"Invalid {what} name: 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a "
                "letter or digit"
            )


class LeaseService:
    def __init__(self, store: LeaseStore) -> None:
        self.store = store

    async def renew(self, principal: Principal, group: str, member: str, ttl_seconds: float) -> LeaseGroup:
        """Hold `member`'s lease for `ttl_seconds` from now (the catalog's clock) and answer the
        group's live members."""
        scope = lease_scope(principal)
        _check_names(group, member)
        if not MIN_TTL_SECONDS <= ttl_seconds <= MAX_TTL_SECONDS:
            raise BadRequest(f"Invalid ttl-seconds: must be between {MIN_TTL_SECONDS} and {MAX_TTL_SECONDS}")
        now_ms = int(time.time() * 1000)
        expires_at_ms = now_ms + round(ttl_seconds * 1000)
        store = self.store
        members = await store.renew_lease(scope, group, member, now_ms, expires_at_ms, MAX_MEMBERS)
        if members is None:
            raise QuotaExceeded(
                f"Key {principal.subject} already holds {MAX_MEMBERS} live instance leases; end some "
                "(a clean shutdown of floe ingest or floe maintain does) or wait for them to expire"
            )
        return LeaseGroup(
            group=group,
            members=[LeaseHolder(m.member, m.joined_at_ms, m.expires_at_ms) for m in members],
            now_ms=now_ms,
        )

    async def leave(self, principal: Principal, group: str, member: str) -> None:
        """End `member`'s lease now (its tables go to the others at their next renewal)."""
        scope = lease_scope(principal)
        _check_names(group, member)
        await self.store.end_lease(scope, group, member)
