"""The management API (`/management/v1`): Kafka clusters, API keys, signing keys and the audit log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

import msgspec
from litestar import Controller, delete, get, post
from litestar.params import Parameter

from catalog.auth import Principal, Role
from catalog.errors import BadRequest, Forbidden, NotFound
from catalog.service.context import CatalogContext
from catalog.service.security import AuthService
from catalog.store.security import ApiKeyRecord, AuditEntry, ClusterRecord


class CreateClusterRequest(msgspec.Struct):
    name: str
    warehouse: str | None = None
    properties: dict[str, str] | None = None


class Cluster(msgspec.Struct):
    name: str
    warehouse: str
    namespace: list[str]
    properties: dict[str, str]
    created_at: datetime


class ListClustersResponse(msgspec.Struct):
    clusters: list[Cluster]


class CreateKeyRequest(msgspec.Struct):
    role: str
    cluster: str | None = None
    description: str = ""
    expires_at: datetime | None = None
    expires_in_seconds: int | None = None


class ApiKey(msgspec.Struct, omit_defaults=True):
    client_id: str
    cluster: str | None
    role: str
    description: str
    created_by: str
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None


class ApiKeyWithSecret(ApiKey, omit_defaults=True):
    client_secret: str = ""


class ListKeysResponse(msgspec.Struct):
    keys: list[ApiKey]


class AuditRecord(msgspec.Struct):
    id: int
    at: datetime
    subject: str
    cluster: str | None
    action: str
    target: str
    outcome: str
    status_code: int
    request_id: str
    source: str


class ListAuditResponse(msgspec.Struct, omit_defaults=True):
    entries: list[AuditRecord]
    next_before: int | None = None


class RotateSigningKeyResponse(msgspec.Struct):
    kid: str


# Beyond a century an expiry means "never" and only risks overflowing dates.
MAX_KEY_LIFETIME_SECONDS = 100 * 366 * 86400
# Audit ids are 64-bit database integers.
MAX_AUDIT_ID = 2**63 - 1

CLUSTER_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def _cluster(record: ClusterRecord) -> Cluster:
    return Cluster(record.name, record.warehouse, [record.name], record.properties, record.created_at)


def _key(record: ApiKeyRecord) -> ApiKey:
    return ApiKey(
        client_id=record.client_id,
        cluster=record.cluster,
        role=record.role,
        description=record.description,
        created_by=record.created_by,
        created_at=record.created_at,
        expires_at=record.expires_at,
        revoked_at=record.revoked_at,
        last_used_at=record.last_used_at,
    )


def _audit(entry: AuditEntry) -> AuditRecord:
    assert entry.id is not None
    assert entry.at is not None
    return AuditRecord(
        entry.id,
        entry.at,
        entry.subject,
        entry.cluster,
        entry.action,
        entry.target,
        entry.outcome,
        entry.status_code,
        entry.request_id,
        entry.source,
    )


def _require_admin(principal: Principal) -> None:
    if not principal.is_admin:
        raise Forbidden("Only global administrators may do this")


def _may_manage_cluster(principal: Principal, cluster: str | None) -> None:
    """Global admins manage everything; a cluster's admin keys manage that cluster's keys."""
    if principal.is_admin:
        return
    if cluster is None or principal.cluster != cluster:
        raise Forbidden("Keys may only be managed by global administrators or the cluster's admins")
    if principal.role is not Role.ADMIN:
        raise Forbidden(f"Role {principal.role.value} may not manage keys")


class ManagementController(Controller):
    path = "/management/v1"
    tags = ["Management API"]

    # -- clusters ---------------------------------------------------------------------------------

    @post("/clusters", operation_id="createCluster", status_code=201)
    async def create_cluster(
        self, principal: Principal, context: CatalogContext, data: CreateClusterRequest
    ) -> Cluster:
        """Register a Kafka source cluster; creates its namespace (named after it) in its warehouse."""
        _require_admin(principal)
        if not data.name or not set(data.name) <= CLUSTER_NAME_CHARS or len(data.name) > 128:
            raise BadRequest(f"Invalid cluster name {data.name!r}: use letters, digits, '_' and '-'")
        warehouse = await context.warehouse(data.warehouse or context.settings.warehouse_name)
        record = await context.store.create_cluster(data.name, warehouse.id, data.properties or {})
        return _cluster(record)

    @get("/clusters", operation_id="listClusters")
    async def list_clusters(self, principal: Principal, context: CatalogContext) -> ListClustersResponse:
        records = await context.store.list_clusters()
        if not principal.is_admin:
            records = [r for r in records if r.name == principal.cluster]
        return ListClustersResponse([_cluster(r) for r in records])

    @get("/clusters/{name:str}", operation_id="getCluster")
    async def get_cluster(self, name: str, principal: Principal, context: CatalogContext) -> Cluster:
        record = await context.store.get_cluster(name)
        if record is None or not (principal.is_admin or principal.cluster == name):
            raise NotFound(f"Cluster does not exist: {name}")
        return _cluster(record)

    @delete("/clusters/{name:str}", operation_id="deleteCluster", status_code=204)
    async def delete_cluster(self, name: str, principal: Principal, context: CatalogContext) -> None:
        """Delete a cluster with its keys and (empty) namespace; refused while it still has tables."""
        _require_admin(principal)
        await context.store.delete_cluster(name)

    # -- API keys ---------------------------------------------------------------------------------

    @post("/keys", operation_id="createKey", status_code=201)
    async def create_key(
        self, principal: Principal, auth: AuthService, data: CreateKeyRequest
    ) -> ApiKeyWithSecret:
        """Create an API key; its secret is in this response only."""
        try:
            role = Role(data.role)
        except ValueError as exc:
            raise BadRequest(f"Invalid role {data.role!r}: expected reader, writer or admin") from exc
        _may_manage_cluster(principal, data.cluster)
        if "\x00" in data.description:  # PostgreSQL text cannot hold it: refused on every backend
            raise BadRequest("Invalid description: must not contain NUL")
        if data.cluster is None and role is not Role.ADMIN:
            raise BadRequest("A key without a cluster must be a global admin key (role admin)")
        expires_at = data.expires_at
        if data.expires_in_seconds is not None:
            if data.expires_in_seconds <= 0:
                raise BadRequest("expires_in_seconds must be positive")
            if data.expires_in_seconds > MAX_KEY_LIFETIME_SECONDS:
                raise BadRequest(f"expires_in_seconds must be at most {MAX_KEY_LIFETIME_SECONDS} (a century)")
            expires_at = datetime.now(UTC) + timedelta(seconds=data.expires_in_seconds)
        if expires_at is not None and expires_at.tzinfo is None:
            expires_at = expires_at.replace(tzinfo=UTC)
        record, secret = await auth.create_key(
            cluster=data.cluster,
            role=role,
            description=data.description,
            created_by=principal.subject,
            expires_at=expires_at,
        )
        key = _key(record)
        return ApiKeyWithSecret(**msgspec.structs.asdict(key), client_secret=secret)

    @get("/keys", operation_id="listKeys")
    async def list_keys(
        self, principal: Principal, auth: AuthService, cluster: str | None = None
    ) -> ListKeysResponse:
        if not principal.is_admin:
            _may_manage_cluster(principal, principal.cluster)
            cluster = principal.cluster
        records = await auth.store.list_api_keys(cluster)
        return ListKeysResponse([_key(r) for r in records])

    async def _manageable(self, principal: Principal, auth: AuthService, client_id: str) -> ApiKeyRecord:
        record = await auth.store.get_api_key(client_id)
        if record is None or not (principal.is_admin or record.cluster == principal.cluster):
            raise NotFound(f"API key does not exist: {client_id}")
        _may_manage_cluster(principal, record.cluster)
        return record

    @delete("/keys/{client_id:str}", operation_id="revokeKey", status_code=204)
    async def revoke_key(self, client_id: str, principal: Principal, auth: AuthService) -> None:
        """Revoke a key: no new tokens, and tokens already issued stop working within seconds."""
        await self._manageable(principal, auth, client_id)
        await auth.store.revoke_api_key(client_id)

    @post("/keys/{client_id:str}/rotate", operation_id="rotateKey", status_code=200)
    async def rotate_key(self, client_id: str, principal: Principal, auth: AuthService) -> ApiKeyWithSecret:
        """Give a key a new secret; the old secret stops working at once."""
        record = await self._manageable(principal, auth, client_id)
        if record.revoked_at is not None:
            raise BadRequest(f"API key {client_id} is revoked")
        secret = await auth.rotate_secret(client_id)
        return ApiKeyWithSecret(**msgspec.structs.asdict(_key(record)), client_secret=secret)

    # -- signing keys and audit -------------------------------------------------------------------

    @post("/signing-keys/rotate", operation_id="rotateSigningKey", status_code=200)
    async def rotate_signing_key(self, principal: Principal, auth: AuthService) -> RotateSigningKeyResponse:
        """Sign new tokens with a new key; tokens signed earlier stay valid until they expire."""
        _require_admin(principal)
        return RotateSigningKeyResponse(await auth.signer.rotate())

    @get("/audit", operation_id="listAudit")
    async def list_audit(
        self,
        principal: Principal,
        context: CatalogContext,
        cluster: str | None = None,
        limit: Annotated[int, Parameter(ge=1, le=1000)] = 100,
        before: Annotated[int | None, Parameter(ge=1, le=MAX_AUDIT_ID)] = None,
    ) -> ListAuditResponse:
        """Mutations and token requests, newest first (`before` pages further back)."""
        if not principal.is_admin:
            _may_manage_cluster(principal, principal.cluster)
            cluster = principal.cluster
        entries = await context.store.list_audit(cluster=cluster, limit=limit, before_id=before)
        next_before = entries[-1].id if len(entries) == limit else None
        return ListAuditResponse([_audit(e) for e in entries], next_before)
