"""What the services need from persistence: one `typing.Protocol` per aggregate, and `CatalogStore`, all
of them together. `SqlCatalogStore` implements every one (mypy checks it where `create_store` returns
it as a `CatalogStore`); services name the narrowest protocol they use, so a fake for a test or another
backend only has to provide that much."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from catalog.store.commit_records import CommitRecords
from catalog.store.idempotency import IdempotencyRecord, IdempotencyState
from catalog.store.ingest_history import IngestSample
from catalog.store.leases import LeaseRecord
from catalog.store.maintenance import MaintenancePassRecord
from catalog.store.outbox import OutboxRow, PublisherLock
from catalog.store.pipelines import PipelineRevisionRecord
from catalog.store.records import (
    ClusterQuota,
    DroppedTabular,
    NamespaceRecord,
    PendingCommit,
    TabularKind,
    TabularRecord,
    WarehouseRecord,
)
from catalog.store.security import (
    ApiKeyRecord,
    AuditEntry,
    AuditFilter,
    ClusterRecord,
    Revocations,
    SigningKeyRecord,
)
from catalog.store.watermarks import TopicProgress, Transition


class WarehouseStore(Protocol):
    async def get_warehouse(self, name: str) -> WarehouseRecord | None: ...

    async def list_warehouses(self) -> list[WarehouseRecord]: ...

    async def upsert_warehouse(
        self, name: str, location: str, properties: dict[str, str]
    ) -> WarehouseRecord: ...


class NamespaceStore(Protocol):
    async def get_namespace(self, warehouse_id: str, key: str) -> NamespaceRecord | None: ...

    async def get_listing_version(self, warehouse_id: str, key: str) -> tuple[str, int] | None: ...

    async def list_namespaces(
        self, warehouse_id: str, parent_key: str, page_token: str | None, page_size: int | None
    ) -> tuple[list[str], str | None]: ...

    async def create_namespace(
        self, warehouse_id: str, key: str, properties: dict[str, str], quota: ClusterQuota | None = None
    ) -> NamespaceRecord: ...

    async def drop_namespace(self, warehouse_id: str, key: str) -> bool: ...

    async def update_namespace_properties(
        self, warehouse_id: str, key: str, removals: Sequence[str], updates: dict[str, str]
    ) -> tuple[list[str], list[str], list[str]] | None: ...


class TabularStore(Protocol):
    """Tables and views (they share names within a namespace) and their metrics reports."""

    async def get_tabular(
        self, warehouse_id: str, namespace_key: str, name: str, *, metadata_json: bool = True
    ) -> TabularRecord | None: ...

    async def get_tabulars(
        self, warehouse_id: str, names: Sequence[tuple[str, str]], *, metadata_json: bool = True
    ) -> dict[tuple[str, str], TabularRecord]: ...

    async def get_tabular_location(
        self, warehouse_id: str, namespace_key: str, name: str
    ) -> tuple[str, str | None] | None: ...

    async def list_tabulars(
        self, namespace_id: str, kind: TabularKind, page_token: str | None, page_size: int | None
    ) -> tuple[list[str], str | None]: ...

    async def swap(self, commits: Sequence[PendingCommit], records: CommitRecords | None = None) -> bool: ...

    async def name_exists(self, namespace_id: str, name: str) -> str | None: ...

    async def drop_tabular(self, tabular_id: str) -> DroppedTabular | None: ...

    async def mentions_path(self, path: str) -> bool: ...

    async def rename_tabular(
        self, tabular_id: str, namespace_id: str, name: str, kind: TabularKind
    ) -> None: ...

    async def add_metrics_report(self, tabular_id: str, report_type: str, report: dict[str, Any]) -> None: ...

    async def list_metrics_reports(self, tabular_id: str) -> list[dict[str, Any]]: ...

    async def count_tabulars(self) -> int: ...

    async def count_in_cluster(self, warehouse_id: str, root: str, kind: str) -> int: ...

    async def list_cluster_tables(
        self, warehouse_id: str, root: str, offset: int, limit: int
    ) -> list[tuple[str, str]]: ...


class KafkaOffsetStore(Protocol):
    """Offsets are written by `TabularStore.swap` with the commit that covers them."""

    async def get_kafka_offsets(self, tabular_id: str, topic: str) -> dict[int, int]: ...

    async def get_kafka_offsets_of(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], dict[int, int]]: ...

    async def list_kafka_offsets(self, tabular_id: str) -> list[tuple[str, int, int, datetime]]: ...

    async def topic_progress(self, tabular_id: str) -> dict[str, TopicProgress]: ...

    async def table_ids(
        self, warehouse_id: str, names: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]: ...

    async def observe_end_offsets(
        self, transitions: Mapping[tuple[str, str], Transition]
    ) -> dict[tuple[str, str], TopicProgress]: ...


class ClusterStore(Protocol):
    async def create_cluster(
        self, name: str, warehouse_id: str, properties: dict[str, str]
    ) -> ClusterRecord: ...

    async def list_clusters(self) -> list[ClusterRecord]: ...

    async def get_cluster(self, name: str) -> ClusterRecord | None: ...

    async def delete_cluster(self, name: str) -> None: ...


class ApiKeyStore(Protocol):
    """API keys and the token endpoint's failure counters."""

    async def count_api_keys(self) -> int: ...

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
    ) -> ApiKeyRecord: ...

    async def get_api_key(self, client_id: str) -> ApiKeyRecord | None: ...

    async def token_request_state(
        self, client_id: str, failure_keys: Sequence[str], window: timedelta
    ) -> tuple[ApiKeyRecord | None, dict[str, int]]: ...

    async def list_api_keys(self, cluster: str | None = None) -> list[ApiKeyRecord]: ...

    async def revoke_api_key(self, client_id: str) -> bool: ...

    async def set_api_key_secret(self, client_id: str, secret_hash: str) -> bool: ...

    async def replace_api_key_secret_hash(self, client_id: str, old_hash: str, new_hash: str) -> bool: ...

    async def touch_api_key(self, client_id: str) -> None: ...

    async def auth_failure_counts(self, keys: Sequence[str], window: timedelta) -> dict[str, int]: ...

    async def record_auth_failure(
        self, keys: Sequence[str], window: timedelta, *, capped: Sequence[str] = (), max_rows: int = 0
    ) -> None: ...

    async def prune_auth_failures(self, window: timedelta) -> int: ...

    async def get_api_key_state(self, client_id: str) -> tuple[ApiKeyRecord | None, Revocations]: ...

    async def revoke_token(
        self, subject: str, jti: str, expires_at: datetime, *, max_per_subject: int
    ) -> None: ...


class SigningKeyStore(Protocol):
    async def list_signing_keys(self) -> list[SigningKeyRecord]: ...

    async def add_signing_key(self, kid: str, private_jwk: str, *, retire_others: bool) -> None: ...

    async def delete_signing_keys_retired_before(self, cutoff: datetime) -> int: ...


class AuditStore(Protocol):
    async def add_audit_entries(self, entries: Sequence[AuditEntry]) -> None: ...

    async def list_audit(
        self,
        *,
        cluster: str | None = None,
        limit: int = 100,
        before_id: int | None = None,
        filters: AuditFilter | None = None,
    ) -> list[AuditEntry]: ...


class SecurityStore(ClusterStore, ApiKeyStore, SigningKeyStore, AuditStore, Protocol):
    """Everything authentication and the management API keep."""


class PipelineStore(Protocol):
    async def latest_pipeline_revision(self) -> PipelineRevisionRecord | None: ...

    async def list_pipeline_revisions(
        self, *, limit: int = 100, revision: int | None = None
    ) -> list[PipelineRevisionRecord]: ...

    async def add_pipeline_revision(
        self,
        *,
        after: int,
        warehouse: str,
        config: dict[str, Any],
        plan: list[dict[str, Any]],
        applied_by: str,
    ) -> PipelineRevisionRecord: ...


class MaintenanceStore(Protocol):
    async def add_maintenance_pass(self, record: MaintenancePassRecord) -> MaintenancePassRecord: ...

    async def list_maintenance_passes(
        self,
        *,
        warehouse: str | None = None,
        namespace: str | None = None,
        table: str | None = None,
        within: str | None = None,
        limit: int = 100,
    ) -> list[MaintenancePassRecord]: ...


class LeaseStore(Protocol):
    async def renew_lease(
        self, scope: str, group: str, member: str, now_ms: int, expires_at_ms: int, max_members: int
    ) -> list[LeaseRecord] | None: ...

    async def end_lease(self, scope: str, group: str, member: str) -> bool: ...


class IdempotencyStore(Protocol):
    async def claim_idempotency_key(
        self, key: str, fingerprint: str, owner: str, lease: timedelta
    ) -> tuple[str, IdempotencyRecord | None] | None: ...

    async def renew_idempotency_lease(self, key: str, owner: str, lease: timedelta) -> bool: ...

    async def finish_idempotency_key(
        self,
        key: str,
        owner: str,
        state: IdempotencyState,
        status_code: int,
        body: str | None,
        content_type: str,
    ) -> None: ...

    async def release_idempotency_key(self, key: str, owner: str) -> None: ...

    async def expire_idempotency_keys(self, older_than: timedelta) -> int: ...


class IngestHistoryStore(Protocol):
    async def add_ingest_samples(self, bucket: int, samples: Sequence[IngestSample]) -> bool: ...

    async def list_ingest_samples(
        self, table: str, since: datetime, limit: int = 5000
    ) -> list[IngestSample]: ...

    async def prune_ingest_samples(self, before: datetime) -> int: ...


class OutboxStore(Protocol):
    """Commit events waiting in the transactional outbox (catalog/store/outbox.py)."""

    commit_events_enabled: bool

    def publisher_lock(self) -> PublisherLock: ...

    async def pending_events(self, limit: int) -> list[OutboxRow]: ...

    async def delete_events(self, ids: Sequence[int]) -> None: ...

    async def outbox_depth(self) -> tuple[int, int | None]: ...


class CatalogStore(
    WarehouseStore,
    NamespaceStore,
    TabularStore,
    KafkaOffsetStore,
    SecurityStore,
    PipelineStore,
    MaintenanceStore,
    LeaseStore,
    IdempotencyStore,
    IngestHistoryStore,
    OutboxStore,
    Protocol,
):
    """The whole store, as the catalog process opens it."""

    async def ping(self) -> None: ...

    async def close(self) -> None: ...
