"""The management API (`/management/v1`): Kafka clusters, API keys, signing keys and the audit log.

Thin controllers: parse, call the service (`catalog/service/clusters.py`, `keys.py`, `audit.py`), encode.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec
from litestar import Controller, delete, get, post
from litestar.params import Parameter

from catalog.api.guards import admin_only
from catalog.auth import Principal
from catalog.service.audit import AuditService, audit_filter
from catalog.service.clusters import ClusterService
from catalog.service.keys import IssuedKey, KeyService, NewKey
from catalog.store.security import ApiKeyRecord, AuditEntry, ClusterRecord
from catalog.wire import (
    ApiKey,
    ApiKeyWithSecret,
    AuditRecord,
    Cluster,
    ListAuditResponse,
    ListClustersResponse,
    ListKeysResponse,
)


class CreateClusterRequest(msgspec.Struct):
    name: str
    warehouse: str | None = None
    properties: dict[str, str] | None = None


class CreateKeyRequest(msgspec.Struct):
    role: str
    cluster: str | None = None
    description: str = ""
    expires_at: datetime | None = None
    expires_in_seconds: int | None = None


class RotateSigningKeyResponse(msgspec.Struct):
    kid: str


# Audit ids are 64-bit database integers.
MAX_AUDIT_ID = 2**63 - 1


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
        entry.count,
    )


def _with_secret(issued: IssuedKey) -> ApiKeyWithSecret:
    return ApiKeyWithSecret(**msgspec.structs.asdict(_key(issued.record)), client_secret=issued.secret)


class ManagementController(Controller):
    path = "/management/v1"
    tags = ["Management API"]

    # -- clusters ---------------------------------------------------------------------------------

    @post("/clusters", operation_id="createCluster", status_code=201, guards=[admin_only])
    async def create_cluster(
        self, principal: Principal, clusters: ClusterService, data: CreateClusterRequest
    ) -> Cluster:
        """Register a Kafka source cluster; creates its namespace (named after it) in its warehouse."""
        return _cluster(await clusters.create(principal, data.name, data.warehouse, data.properties or {}))

    @get("/clusters", operation_id="listClusters")
    async def list_clusters(self, principal: Principal, clusters: ClusterService) -> ListClustersResponse:
        return ListClustersResponse([_cluster(r) for r in await clusters.list(principal)])

    @get("/clusters/{name:str}", operation_id="getCluster")
    async def get_cluster(self, name: str, principal: Principal, clusters: ClusterService) -> Cluster:
        return _cluster(await clusters.get(principal, name))

    @delete("/clusters/{name:str}", operation_id="deleteCluster", status_code=204, guards=[admin_only])
    async def delete_cluster(self, name: str, principal: Principal, clusters: ClusterService) -> None:
        """Delete a cluster with its keys and (empty) namespace; refused while it still has tables."""
        await clusters.delete(principal, name)

    # -- API keys ---------------------------------------------------------------------------------

    @post("/keys", operation_id="createKey", status_code=201)
    async def create_key(
        self, principal: Principal, keys: KeyService, data: CreateKeyRequest
    ) -> ApiKeyWithSecret:
        """Create an API key; its secret is in this response only."""
        request = NewKey(data.role, data.cluster, data.description, data.expires_at, data.expires_in_seconds)
        return _with_secret(await keys.create(principal, request))

    @get("/keys", operation_id="listKeys")
    async def list_keys(
        self, principal: Principal, keys: KeyService, cluster: str | None = None
    ) -> ListKeysResponse:
        return ListKeysResponse([_key(r) for r in await keys.list(principal, cluster)])

    @delete("/keys/{client_id:str}", operation_id="revokeKey", status_code=204)
    async def revoke_key(self, client_id: str, principal: Principal, keys: KeyService) -> None:
        """Revoke a key: no new tokens, and tokens already issued stop working within seconds."""
        await keys.revoke(principal, client_id)

    @post("/keys/{client_id:str}/rotate", operation_id="rotateKey", status_code=200)
    async def rotate_key(self, client_id: str, principal: Principal, keys: KeyService) -> ApiKeyWithSecret:
        """Give a key a new secret; the old secret stops working at once."""
        return _with_secret(await keys.rotate(principal, client_id))

    # -- signing keys and audit -------------------------------------------------------------------

    @post("/signing-keys/rotate", operation_id="rotateSigningKey", status_code=200, guards=[admin_only])
    async def rotate_signing_key(self, principal: Principal, keys: KeyService) -> RotateSigningKeyResponse:
        """Sign new tokens with a new key; tokens signed earlier stay valid until they expire."""
        return RotateSigningKeyResponse(await keys.rotate_signing_key(principal))

    @get("/audit", operation_id="listAudit")
    async def list_audit(
        self,
        principal: Principal,
        audit: AuditService,
        cluster: str | None = None,
        limit: Annotated[int, Parameter(ge=1, le=1000)] = 100,
        before: Annotated[int | None, Parameter(ge=1, le=MAX_AUDIT_ID)] = None,
        subject: Annotated[str | None, Parameter(max_length=255)] = None,
        action: Annotated[str | None, Parameter(max_length=128)] = None,
        target: Annotated[str | None, Parameter(max_length=1000)] = None,
        outcome: Annotated[str | None, Parameter(max_length=16)] = None,
        since: Annotated[str | None, Parameter(max_length=64)] = None,
        until: Annotated[str | None, Parameter(max_length=64)] = None,
        hide_pipeline: bool = False,
    ) -> ListAuditResponse:
        """Mutations and token requests, newest first (by time, then id; `before` pages further back),
        narrowed by the console's filters: the key (`subject`), `action`, a substring of the `target`,
        `outcome` (ok, denied, failed), a time range (`since` inclusive, `until` exclusive; ISO 8601,
        UTC without an offset) and `hide_pipeline` (without floe's pipeline keys' entries)."""
        filters = audit_filter(
            subject=subject,
            action=action,
            target=target,
            outcome=outcome,
            since=since,
            until=until,
            hide_pipeline=hide_pipeline,
        )
        page = await audit.list(principal, cluster, limit, before, filters)
        return ListAuditResponse([_audit(e) for e in page.entries], page.next_before)
