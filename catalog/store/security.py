"""The security half of the SQL store: clusters, API keys, signing keys, audit log, failure counters
(`SqlCatalogStore` inherits these methods, so the service layer still sees one store).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Table, delete, func, insert, literal, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.errors import AlreadyExists, NamespaceNotEmpty, NotFound
from catalog.store.audit_context import record_change
from catalog.store.audit_listing import audit_query
from catalog.store.schema import (
    api_keys,
    audit_log,
    auth_failures,
    clusters,
    namespaces,
    revoked_tokens,
    signing_keys,
    tabulars,
    warehouses,
)


@dataclass(frozen=True, slots=True)
class ClusterRecord:
    id: str
    name: str
    warehouse: str
    properties: dict[str, str]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ApiKeyRecord:
    id: str
    client_id: str
    secret_hash: str
    cluster: str | None
    warehouse: str | None
    role: str
    description: str
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None

    def usable(self, now: datetime) -> bool:
        return self.revoked_at is None and (self.expires_at is None or _aware(self.expires_at) > now)


@dataclass(frozen=True, slots=True)
class Revocations:
    """A key's tokens that were ended before their expiry: by `jti`, and every token issued up to
    `issued_until` (epoch seconds; a key with too many single revocations at once)."""

    jtis: frozenset[str] = frozenset()
    issued_until: float | None = None

    def revoked(self, jti: object, issued_at: float) -> bool:
        return jti in self.jtis or (self.issued_until is not None and issued_at <= self.issued_until)


NO_REVOCATIONS = Revocations()
# The `jti` of the row that ends every token of a key issued up to its `revoked_at`.
ALL_TOKENS = "*"


@dataclass(frozen=True, slots=True)
class SigningKeyRecord:
    kid: str
    private_jwk: str
    created_at: datetime
    retired_at: datetime | None


@dataclass(frozen=True, slots=True)
class AuditEntry:
    subject: str
    cluster: str | None
    action: str
    target: str
    outcome: str
    status_code: int
    request_id: str = ""
    source: str = ""
    at: datetime | None = None
    id: int | None = None
    # How many requests the entry records: identical successful token requests are summarized.
    count: int = 1


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """Narrows an audit listing: exact subject, action and outcome, a substring of the target, a time
    range (`since` inclusive, `until` exclusive), and without floe's own pipeline keys' entries."""

    subject: str | None = None
    action: str | None = None
    target: str | None = None
    outcome: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    hide_pipeline: bool = False


def _aware(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything floe stores is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _opt(value: datetime | None) -> datetime | None:
    return _aware(value) if value is not None else None


_KEY_COLUMNS = (
    api_keys.c.id,
    api_keys.c.client_id,
    api_keys.c.secret_hash,
    clusters.c.name.label("cluster"),
    warehouses.c.name.label("warehouse"),
    api_keys.c.role,
    api_keys.c.description,
    api_keys.c.created_by,
    api_keys.c.created_at,
    api_keys.c.expires_at,
    api_keys.c.revoked_at,
    api_keys.c.last_used_at,
)
_KEY_FROM = api_keys.outerjoin(clusters, api_keys.c.cluster_id == clusters.c.id).outerjoin(
    warehouses, clusters.c.warehouse_id == warehouses.c.id
)


def _key(row: Any) -> ApiKeyRecord:
    return ApiKeyRecord(
        row.id,
        row.client_id,
        row.secret_hash,
        row.cluster,
        row.warehouse,
        row.role,
        row.description,
        row.created_by,
        _aware(row.created_at),
        _opt(row.expires_at),
        _opt(row.revoked_at),
        _opt(row.last_used_at),
    )


class SecurityStoreMixin:
    """Security tables on the same engines as the catalog tables."""

    def _reading(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    def _writing(self, *, change: bool = False) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    async def _append_rows(self, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
        raise NotImplementedError

    # -- signing keys -----------------------------------------------------------------------------

    async def list_signing_keys(self) -> list[SigningKeyRecord]:
        async with self._reading() as conn:
            rows = (await conn.execute(select(signing_keys).order_by(signing_keys.c.created_at))).all()
        return [
            SigningKeyRecord(r.kid, r.private_jwk, _aware(r.created_at), _opt(r.retired_at)) for r in rows
        ]

    async def add_signing_key(self, kid: str, private_jwk: str, *, retire_others: bool) -> None:
        now = datetime.now(UTC)
        async with self._writing(change=retire_others) as conn:  # a rotation: an admin's change
            if retire_others:
                await conn.execute(
                    update(signing_keys).where(signing_keys.c.retired_at.is_(None)).values(retired_at=now)
                )
            await conn.execute(insert(signing_keys).values(kid=kid, private_jwk=private_jwk, created_at=now))

    async def delete_signing_keys_retired_before(self, cutoff: datetime) -> int:
        async with self._writing() as conn:
            result = await conn.execute(delete(signing_keys).where(signing_keys.c.retired_at < cutoff))
        return int(result.rowcount or 0)

    # -- clusters ---------------------------------------------------------------------------------

    async def create_cluster(self, name: str, warehouse_id: str, properties: dict[str, str]) -> ClusterRecord:
        """Create the cluster and its namespace (named after it) in one transaction."""
        cid = str(uuid.uuid4())
        now = datetime.now(UTC)
        try:
            async with self._writing(change=True) as conn:
                await conn.execute(
                    insert(clusters).values(
                        id=cid,
                        name=name,
                        warehouse_id=warehouse_id,
                        properties=json.dumps(properties),
                        created_at=now,
                    )
                )
                existing = (
                    await conn.execute(
                        select(namespaces.c.id).where(
                            namespaces.c.warehouse_id == warehouse_id, namespaces.c.key == name
                        )
                    )
                ).first()
                if existing is None:
                    await conn.execute(
                        insert(namespaces).values(
                            id=str(uuid.uuid4()),
                            warehouse_id=warehouse_id,
                            key=name,
                            parent_key="",
                            properties=json.dumps({"floe.cluster": name}),
                        )
                    )
                wh = (
                    await conn.execute(select(warehouses.c.name).where(warehouses.c.id == warehouse_id))
                ).one()
        except IntegrityError as exc:
            raise AlreadyExists(f"Cluster already exists: {name}") from exc
        return ClusterRecord(cid, name, wh.name, properties, now)

    async def list_clusters(self) -> list[ClusterRecord]:
        query = (
            select(clusters, warehouses.c.name.label("warehouse"))
            .select_from(clusters.join(warehouses, clusters.c.warehouse_id == warehouses.c.id))
            .order_by(clusters.c.name)
        )
        async with self._reading() as conn:
            rows = (await conn.execute(query)).all()
        return [
            ClusterRecord(r.id, r.name, r.warehouse, json.loads(r.properties), _aware(r.created_at))
            for r in rows
        ]

    async def get_cluster(self, name: str) -> ClusterRecord | None:
        return next((c for c in await self.list_clusters() if c.name == name), None)

    async def delete_cluster(self, name: str) -> None:
        """Delete the cluster, its keys and its namespace; refused while its namespace holds tables."""
        async with self._writing(change=True) as conn:
            row = (await conn.execute(select(clusters).where(clusters.c.name == name))).first()
            if row is None:
                raise NotFound(f"Cluster does not exist: {name}")
            ns = (
                await conn.execute(
                    select(namespaces.c.id).where(
                        namespaces.c.warehouse_id == row.warehouse_id, namespaces.c.key == name
                    )
                )
            ).first()
            if ns is not None:
                content = (
                    await conn.execute(select(tabulars.c.id).where(tabulars.c.namespace_id == ns.id).limit(1))
                ).first()
                if content is not None:
                    raise NamespaceNotEmpty(f"Cluster {name} still has tables: drop them first")
                await conn.execute(delete(namespaces).where(namespaces.c.id == ns.id))
            await conn.execute(delete(api_keys).where(api_keys.c.cluster_id == row.id))
            await conn.execute(delete(clusters).where(clusters.c.id == row.id))

    # -- API keys ---------------------------------------------------------------------------------

    async def count_api_keys(self) -> int:
        async with self._reading() as conn:
            return int((await conn.execute(select(func.count()).select_from(api_keys))).scalar_one())

    async def create_api_key(
        self,
        *,
        client_id: str,
        secret_hash: str,
        cluster: str | None,
        role: str,
        description: str,
        created_by: str,
        expires_at: datetime | None,
    ) -> ApiKeyRecord:
        async with self._writing(change=True) as conn:
            cluster_id = None
            if cluster is not None:
                row = (await conn.execute(select(clusters.c.id).where(clusters.c.name == cluster))).first()
                if row is None:
                    raise NotFound(f"Cluster does not exist: {cluster}")
                cluster_id = row.id
            try:
                await conn.execute(
                    insert(api_keys).values(
                        id=str(uuid.uuid4()),
                        client_id=client_id,
                        secret_hash=secret_hash,
                        cluster_id=cluster_id,
                        role=role,
                        description=description,
                        created_by=created_by,
                        created_at=datetime.now(UTC),
                        expires_at=expires_at,
                    )
                )
            except IntegrityError as exc:
                raise AlreadyExists(f"API key already exists: {client_id}") from exc
        record = await self.get_api_key(client_id)
        assert record is not None
        return record

    async def get_api_key(self, client_id: str) -> ApiKeyRecord | None:
        async with self._reading() as conn:
            row = (
                await conn.execute(
                    select(*_KEY_COLUMNS).select_from(_KEY_FROM).where(api_keys.c.client_id == client_id)
                )
            ).first()
        return _key(row) if row else None

    async def get_api_key_state(self, client_id: str) -> tuple[ApiKeyRecord | None, Revocations]:
        """The key and its revoked tokens that have not expired yet, in one query (a row per revoked
        token, one without any)."""
        on = (revoked_tokens.c.subject == api_keys.c.client_id) & (
            revoked_tokens.c.expires_at > datetime.now(UTC)
        )
        query = (
            select(
                *_KEY_COLUMNS,
                revoked_tokens.c.jti.label("revoked_jti"),
                revoked_tokens.c.revoked_at.label("token_revoked_at"),
            )
            .select_from(_KEY_FROM.outerjoin(revoked_tokens, on))
            .where(api_keys.c.client_id == client_id)
        )
        async with self._reading() as conn:
            rows = (await conn.execute(query)).all()
        if not rows:
            return None, NO_REVOCATIONS
        jtis = {r.revoked_jti for r in rows if r.revoked_jti is not None and r.revoked_jti != ALL_TOKENS}
        until = [_aware(r.token_revoked_at).timestamp() for r in rows if r.revoked_jti == ALL_TOKENS]
        if not jtis and not until:
            return _key(rows[0]), NO_REVOCATIONS
        return _key(rows[0]), Revocations(frozenset(jtis), max(until) if until else None)

    async def revoke_token(
        self, subject: str, jti: str, expires_at: datetime, *, max_per_subject: int
    ) -> None:
        """End one token before its expiry. Rows of expired tokens go; a key with `max_per_subject`
        revoked tokens alive gets its `*` row (every token issued until now) instead of another row."""
        now = datetime.now(UTC)
        async with self._writing(change=True) as conn:
            await conn.execute(delete(revoked_tokens).where(revoked_tokens.c.expires_at <= now))
            alive = (
                await conn.execute(
                    select(func.count())
                    .select_from(revoked_tokens)
                    .where(revoked_tokens.c.subject == subject)
                )
            ).scalar_one()
            if int(alive) >= max_per_subject:
                await conn.execute(
                    delete(revoked_tokens).where(
                        revoked_tokens.c.subject == subject, revoked_tokens.c.jti == ALL_TOKENS
                    )
                )
                jti = ALL_TOKENS
            else:
                await conn.execute(
                    delete(revoked_tokens).where(
                        revoked_tokens.c.subject == subject, revoked_tokens.c.jti == jti
                    )
                )
            await conn.execute(
                insert(revoked_tokens).values(subject=subject, jti=jti, revoked_at=now, expires_at=expires_at)
            )

    async def token_request_state(
        self, client_id: str, failure_keys: Sequence[str], window: timedelta
    ) -> tuple[ApiKeyRecord | None, dict[str, int]]:
        """The key (None when unknown) and the failures per key within the window (as
        `auth_failure_counts`), in one query: every engine asks for tokens often, each read costs."""
        columns = []
        for i, name in enumerate(failure_keys):
            row = auth_failures.c.key == name
            columns.append(
                select(auth_failures.c.failures).where(row).scalar_subquery().label(f"failures_{i}")
            )
            columns.append(
                select(auth_failures.c.window_start).where(row).scalar_subquery().label(f"since_{i}")
            )
        # One row even for an unknown client id: the counts come with it.
        one = select(literal(1).label("one")).subquery()
        query = select(*_KEY_COLUMNS, *columns).select_from(
            one.outerjoin(_KEY_FROM, api_keys.c.client_id == client_id)
        )
        async with self._reading() as conn:
            result = (await conn.execute(query)).one()
        cutoff = datetime.now(UTC) - window
        counts = {}
        for i, name in enumerate(failure_keys):
            failures, since = result._mapping[f"failures_{i}"], result._mapping[f"since_{i}"]
            if failures is not None and since is not None and _aware(since) > cutoff:
                counts[name] = int(failures)
        return (_key(result) if result.id is not None else None), counts

    async def list_api_keys(self, cluster: str | None = None) -> list[ApiKeyRecord]:
        query = (
            select(*_KEY_COLUMNS).select_from(_KEY_FROM).order_by(api_keys.c.created_at, api_keys.c.client_id)
        )
        if cluster is not None:
            query = query.where(clusters.c.name == cluster)
        async with self._reading() as conn:
            rows = (await conn.execute(query)).all()
        return [_key(r) for r in rows]

    async def revoke_api_key(self, client_id: str) -> bool:
        async with self._writing(change=True) as conn:
            result = await conn.execute(
                update(api_keys)
                .where(api_keys.c.client_id == client_id, api_keys.c.revoked_at.is_(None))
                .values(revoked_at=datetime.now(UTC))
            )
        return bool(result.rowcount)

    async def set_api_key_secret(self, client_id: str, secret_hash: str) -> bool:
        async with self._writing() as conn:
            result = await conn.execute(
                update(api_keys)
                .where(api_keys.c.client_id == client_id, api_keys.c.revoked_at.is_(None))
                .values(secret_hash=secret_hash)
            )
            if result.rowcount:
                await record_change(conn)
        return bool(result.rowcount)

    async def replace_api_key_secret_hash(self, client_id: str, old_hash: str, new_hash: str) -> bool:
        """Store another form of the same secret, unless the hash changed meanwhile (a rotation wins)."""
        async with self._writing() as conn:
            result = await conn.execute(
                update(api_keys)
                .where(api_keys.c.client_id == client_id, api_keys.c.secret_hash == old_hash)
                .values(secret_hash=new_hash)
            )
        return bool(result.rowcount)

    async def touch_api_key(self, client_id: str) -> None:
        async with self._writing() as conn:
            await conn.execute(
                update(api_keys)
                .where(api_keys.c.client_id == client_id)
                .values(last_used_at=datetime.now(UTC))
            )

    # -- audit ------------------------------------------------------------------------------------

    async def add_audit_entries(self, entries: Sequence[AuditEntry]) -> None:
        if not entries:
            return
        now = datetime.now(UTC)
        await self._append_rows(
            audit_log,
            [
                {
                    "at": e.at or now,
                    "subject": e.subject,
                    "cluster": e.cluster,
                    "action": e.action,
                    "target": e.target,
                    "outcome": e.outcome,
                    "status_code": e.status_code,
                    "request_id": e.request_id,
                    "source": e.source,
                    "count": e.count,
                }
                for e in entries
            ],
        )

    async def list_audit(
        self,
        *,
        cluster: str | None = None,
        limit: int = 100,
        before_id: int | None = None,
        filters: AuditFilter | None = None,
    ) -> list[AuditEntry]:
        query = audit_query(cluster, limit, before_id, filters)
        async with self._reading() as conn:
            rows = (await conn.execute(query)).all()
        return [
            AuditEntry(
                r.subject,
                r.cluster,
                r.action,
                r.target,
                r.outcome,
                r.status_code,
                r.request_id,
                r.source,
                _aware(r.at),
                r.id,
                r._mapping["count"],
            )
            for r in rows
        ]

    # -- failed authentication counters -----------------------------------------------------------

    async def auth_failure_counts(self, keys: Sequence[str], window: timedelta) -> dict[str, int]:
        """Failures per key within the current window (keys without any are absent)."""
        cutoff = datetime.now(UTC) - window
        async with self._reading() as conn:
            rows = (
                await conn.execute(select(auth_failures).where(auth_failures.c.key.in_(list(keys))))
            ).all()
        return {r.key: r.failures for r in rows if _aware(r.window_start) > cutoff}

    async def record_auth_failure(
        self, keys: Sequence[str], window: timedelta, *, capped: Sequence[str] = (), max_rows: int = 0
    ) -> None:
        """Count a failure under each of `keys`; one of `capped` gets no new row while the table holds
        `max_rows` rows."""
        try:
            await self._record_auth_failure(keys, window, capped, max_rows)
        except IntegrityError:  # a concurrent first failure inserted the row: count this one again
            await self._record_auth_failure(keys, window, capped, max_rows)

    async def _record_auth_failure(
        self, keys: Sequence[str], window: timedelta, capped: Sequence[str], max_rows: int
    ) -> None:
        now = datetime.now(UTC)
        full: bool | None = None
        async with self._writing() as conn:
            for key in keys:
                row = (await conn.execute(select(auth_failures).where(auth_failures.c.key == key))).first()
                if row is None:
                    if key in capped:
                        if full is None:
                            count = select(func.count()).select_from(auth_failures)
                            full = int((await conn.execute(count)).scalar_one()) >= max_rows
                        if full:
                            continue
                    await conn.execute(insert(auth_failures).values(key=key, window_start=now, failures=1))
                elif _aware(row.window_start) <= now - window:
                    await conn.execute(
                        update(auth_failures)
                        .where(auth_failures.c.key == key)
                        .values(window_start=now, failures=1)
                    )
                else:
                    await conn.execute(
                        update(auth_failures)
                        .where(auth_failures.c.key == key)
                        .values(failures=auth_failures.c.failures + 1)
                    )

    async def prune_auth_failures(self, window: timedelta) -> int:
        """Delete the counters whose window has ended (they count nothing any more)."""
        cutoff = datetime.now(UTC) - window
        async with self._writing() as conn:
            result = await conn.execute(delete(auth_failures).where(auth_failures.c.window_start <= cutoff))
        return int(result.rowcount or 0)


__all__ = [
    "ApiKeyRecord",
    "AuditEntry",
    "ClusterRecord",
    "Revocations",
    "SecurityStoreMixin",
    "SigningKeyRecord",
]
