"""Relational schema of the catalog (SQLAlchemy Core); Alembic migrations create it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    literal_column,
)

metadata = MetaData()

warehouses = Table(
    "warehouses",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(255), nullable=False, unique=True),
    Column("location", Text, nullable=False),
    Column("properties", Text, nullable=False, server_default="{}"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

namespaces = Table(
    "namespaces",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("warehouse_id", String(36), ForeignKey("warehouses.id", ondelete="CASCADE"), nullable=False),
    # Levels joined by 0x1F; `parent_key` is the key of the parent ("" at the top level).
    Column("key", Text, nullable=False),
    Column("parent_key", Text, nullable=False),
    Column("properties", Text, nullable=False, server_default="{}"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # Bumped in the transaction of every create, drop, rename or register of a table or view in the
    # namespace: listings cached per version are checked against it with one indexed read.
    Column("listing_version", BigInteger, nullable=False, server_default="0"),
    UniqueConstraint("warehouse_id", "key", name="uq_namespaces_warehouse_key"),
    Index("ix_namespaces_parent", "warehouse_id", "parent_key"),
)

# Tables and views share one name space inside a namespace, as the spec requires.
tabulars = Table(
    "tabulars",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("namespace_id", String(36), ForeignKey("namespaces.id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("kind", String(8), nullable=False),
    Column("metadata_location", Text, nullable=True),
    Column("metadata_json", Text, nullable=False),
    Column("version", Integer, nullable=False, server_default="0"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # The catalog-assigned folder a table was created in (canonical), None for a location the client
    # chose: purge deletes everything in it, not only the files the metadata lists.
    Column("managed_location", Text, nullable=True),
    UniqueConstraint("namespace_id", "name", name="uq_tabulars_namespace_name"),
)

table_metrics = Table(
    "table_metrics",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("tabular_id", String(36), ForeignKey("tabulars.id", ondelete="CASCADE"), nullable=False),
    Column("report_type", String(32), nullable=False),
    Column("report", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_table_metrics_tabular", "tabular_id"),
)

# `key` is sha256(caller + Idempotency-Key): one caller never sees, replays or blocks another's keys.
# A pending row is held by `owner` (a process and claim) while `lease_until` lies ahead: the owner renews
# the lease as its request runs, so a crashed owner's row can be reclaimed seconds later.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("fingerprint", Text, nullable=False),
    Column("state", String(8), nullable=False),
    Column("status_code", Integer, nullable=True),
    Column("response_body", Text, nullable=True),
    Column("content_type", String(128), nullable=True),
    Column("owner", String(64), nullable=True),
    Column("lease_until", DateTime(timezone=True), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_idempotency_created", "created_at"),
)

# -- security ---------------------------------------------------------------------------------------

# A Kafka source cluster; its topics' tables live in the namespace named after it in its warehouse.
clusters = Table(
    "clusters",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(255), nullable=False, unique=True),
    Column("warehouse_id", String(36), ForeignKey("warehouses.id"), nullable=False),
    Column("properties", Text, nullable=False, server_default="{}"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# API keys: bound to one cluster with a role, or global admin keys (cluster_id NULL, role admin).
api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("client_id", String(64), nullable=False, unique=True),
    Column("secret_hash", Text, nullable=False),
    Column("cluster_id", String(36), ForeignKey("clusters.id", ondelete="CASCADE"), nullable=True),
    Column("role", String(16), nullable=False),
    Column("description", Text, nullable=False, server_default=""),
    Column("created_by", String(64), nullable=False, server_default=""),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("expires_at", DateTime(timezone=True), nullable=True),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Column("last_used_at", DateTime(timezone=True), nullable=True),
)

# Token signing keys; retired keys stay until every token they signed has expired.
signing_keys = Table(
    "signing_keys",
    metadata,
    Column("kid", String(64), primary_key=True),
    Column("private_jwk", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("retired_at", DateTime(timezone=True), nullable=True),
)

audit_log = Table(
    "audit_log",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("subject", String(255), nullable=False),
    Column("cluster", String(255), nullable=True),
    Column("action", String(128), nullable=False),
    Column("target", Text, nullable=False, server_default=""),
    Column("outcome", String(16), nullable=False),
    Column("status_code", Integer, nullable=False),
    Column("request_id", String(64), nullable=False, server_default=""),
    Column("source", String(64), nullable=False, server_default=""),
    # The requests the entry stands for: more than 1 for repeated successful token requests (0010).
    Column("count", Integer, nullable=False, server_default="1"),
    Index("ix_audit_log_at", "at"),
)

# Failed token requests per client id and per source address, in fixed windows (rate limiting that
# holds across worker processes).
auth_failures = Table(
    "auth_failures",
    metadata,
    Column("key", String(128), primary_key=True),
    Column("window_start", DateTime(timezone=True), nullable=False),
    Column("failures", Integer, nullable=False),
)

# Tokens ended before their expiry (console sign-out), kept until they would have expired (0011). The
# `*` row of a subject ends every token of that key issued up to its `revoked_at`.
revoked_tokens = Table(
    "revoked_tokens",
    metadata,
    Column("subject", String(64), primary_key=True),
    Column("jti", String(64), primary_key=True),
    Column("revoked_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Index("ix_revoked_tokens_expires_at", "expires_at"),
)

# The next Kafka offset per partition that each table has committed (see catalog/kafka_offsets.py);
# written in the same transaction as the table's pointer swap.
kafka_offsets = Table(
    "kafka_offsets",
    metadata,
    Column("tabular_id", String(36), ForeignKey("tabulars.id", ondelete="CASCADE"), primary_key=True),
    Column("topic", String(255), primary_key=True),
    Column("partition", Integer, primary_key=True, autoincrement=False),
    Column("next_offset", BigInteger, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# The broker end offsets ingestion last saw per table partition, and when the table was last seen
# caught up (0012; see catalog/watermarks.py). Times are epoch milliseconds, as Kafka's.
kafka_end_offsets = Table(
    "kafka_end_offsets",
    metadata,
    Column("tabular_id", String(36), ForeignKey("tabulars.id", ondelete="CASCADE"), primary_key=True),
    Column("topic", String(255), primary_key=True),
    Column("partition", Integer, primary_key=True, autoincrement=False),
    Column("end_offset", BigInteger, nullable=False),
    Column("observed_at_ms", BigInteger, nullable=False),
    Column("pending_end_offset", BigInteger, nullable=True),
    Column("pending_observed_at_ms", BigInteger, nullable=True),
    Column("caught_up_at_ms", BigInteger, nullable=True),
)

# -- pipelines --------------------------------------------------------------------------------------

# Every applied floe.yaml (normalized), newest = the desired state ingestion reads.
pipeline_revisions = Table(
    "pipeline_revisions",
    metadata,
    Column("revision", Integer, primary_key=True, autoincrement=False),
    Column("warehouse", String(255), nullable=False),
    Column("config", Text, nullable=False),
    Column("plan", Text, nullable=False),
    Column("applied_by", String(255), nullable=False),
    Column("applied_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# -- instance leases --------------------------------------------------------------------------------

# The live `--shard auto` instances of floe ingest and floe maintain (0015; catalog/store/leases.py): one
# row per instance of a group, renewed by its heartbeat, gone once `expires_at_ms` (the catalog's clock)
# passes.
# `scope` is the key the instances authenticate with: one key's groups are invisible to another's.
instance_leases = Table(
    "instance_leases",
    metadata,
    Column("scope", String(128), primary_key=True),
    Column("group_name", String(128), primary_key=True),
    Column("member", String(128), primary_key=True),
    Column("joined_at_ms", BigInteger, nullable=False),
    Column("expires_at_ms", BigInteger, nullable=False),
)

# -- commit events ----------------------------------------------------------------------------------

# The transactional outbox (0013; catalog/store/outbox.py): one row per change of a table or view,
# inserted in the change's own transaction, deleted once the events broker acknowledged it. The names
# are the table's as of the change; no foreign key, a drop's event outlives the table's row.
commit_events = Table(
    "commit_events",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("event_type", String(64), nullable=False),
    Column("tabular_id", String(36), nullable=False),
    Column("kind", String(8), nullable=False),
    Column("warehouse", String(255), nullable=False),
    Column("namespace", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("payload", Text, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
)


def tabular_record_columns(*, metadata_json: bool = True) -> tuple[Any, ...]:
    """A `tabulars` row's columns (joined to `namespaces`) in `TabularRecord`'s order; without
    `metadata_json`, an empty string in its place (not read: a commit whose tables' parsed models are
    cached needs none of it, and a hundred tables' JSON is megabytes)."""
    json_column = tabulars.c.metadata_json if metadata_json else literal_column("''").label("metadata_json")
    return (
        tabulars.c.id,
        tabulars.c.namespace_id,
        namespaces.c.key.label("namespace_key"),
        tabulars.c.name,
        tabulars.c.kind,
        tabulars.c.metadata_location,
        json_column,
        tabulars.c.version,
    )
