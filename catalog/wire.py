"""The management API's results as they are on the wire: one definition, used by the server's API layer
to answer and by `catalog/client.py` to decode.

Field for field the JSON of `/management/v1`; a change here is a change of the API (and of
openapi/floe.json, whose component names are these class names). A docstring becomes the schema's
description in the OpenAPI document, so what is said of a type for readers of the code is a comment.
Only msgspec here: the client (imported by ingestion and maintenance) must not pull in the server.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

# -- clusters and keys ------------------------------------------------------------------------------


# A Kafka source cluster: a tenant with its namespace in one warehouse.
class Cluster(msgspec.Struct, frozen=True):
    name: str
    warehouse: str
    namespace: list[str]
    properties: dict[str, str]
    created_at: datetime


class ListClustersResponse(msgspec.Struct, frozen=True):
    clusters: list[Cluster]


# An API key (never its secret): OAuth2 client credentials bound to a cluster and a role.
class ApiKey(msgspec.Struct, frozen=True, omit_defaults=True):
    client_id: str
    cluster: str | None
    role: str
    description: str
    created_by: str
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None


# A key just created or rotated, with its secret (shown only this once).
class ApiKeyWithSecret(ApiKey, frozen=True, omit_defaults=True):
    client_secret: str = ""


class ListKeysResponse(msgspec.Struct, frozen=True):
    keys: list[ApiKey]


# -- audit ------------------------------------------------------------------------------------------


# One mutation or token request of the audit log.
class AuditRecord(msgspec.Struct, frozen=True):
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
    # The requests this entry records (identical successful token requests are summarized as one).
    count: int = 1


# Audit entries, newest first; `next_before` pages further back when there may be more.
class ListAuditResponse(msgspec.Struct, frozen=True, omit_defaults=True):
    entries: list[AuditRecord]
    next_before: int | None = None


# -- the pipeline (floe.yaml) -----------------------------------------------------------------------


# What an apply did (or would do) to one table: create, evolve, unchanged or removed.
class PlannedTable(msgspec.Struct, frozen=True):
    namespace: str
    table: str
    kind: str
    cluster: str
    topic: str
    action: str
    changes: list[str]


class ApplyPipelineResponse(msgspec.Struct, frozen=True):
    """The revision now in force (the previous one for a dry run or a no-op), and what the apply did
    (or would do) to each table: create, evolve, unchanged or removed (kept, no longer ingested)."""

    revision: int | None
    warehouse: str
    dry_run: bool
    applied: bool
    plan: list[PlannedTable]


# One table of the applied pipeline, where it lives and how it is fed.
class PipelineTable(msgspec.Struct, frozen=True):
    cluster: str
    topic: str
    namespace: str
    table: str
    dlq_table: str
    warehouse: str
    source_format: str
    schema_mode: str
    schema_registry_url: str | None
    commit_interval_seconds: float | None
    partitioning: list[str]


# The applied floe.yaml revision: the normalized document (`config`) and its tables.
class PipelineResponse(msgspec.Struct, frozen=True):
    revision: int
    applied_at: datetime
    applied_by: str
    warehouse: str
    config: dict[str, Any]
    tables: list[PipelineTable]


# -- Kafka positions --------------------------------------------------------------------------------


# The next Kafka offset of one partition that a table has committed, and when.
class PartitionOffset(msgspec.Struct, frozen=True):
    partition: int
    next_offset: int = msgspec.field(name="next-offset")
    committed_at: datetime = msgspec.field(name="committed-at")


class TopicOffsets(msgspec.Struct, frozen=True):
    topic: str
    partitions: list[PartitionOffset]


class KafkaOffsetsResponse(msgspec.Struct, frozen=True):
    topics: list[TopicOffsets]


# -- completeness watermarks (docs/watermarks.md) ---------------------------------------------------


# One partition of a table's topic: what the table committed, the broker's end offset as ingestion last
# saw it, and the latest time (epoch ms) the partition was seen caught up.
class PartitionWatermark(msgspec.Struct, frozen=True):
    partition: int
    committed_offset: int | None = msgspec.field(name="committed-offset")
    end_offset: int | None = msgspec.field(name="end-offset")
    observed_at_ms: int | None = msgspec.field(name="observed-at-ms")
    complete_through_ms: int | None = msgspec.field(name="complete-through-ms")


# A table's completeness for one topic: every record with a Kafka timestamp before `watermark-ms` is in
# the table (null: not known to be complete through any time yet); `offset-completeness` is committed ÷
# end offsets as ingestion last saw them (at `as-of-ms`, the oldest of those observations).
class TopicWatermark(msgspec.Struct, frozen=True):
    topic: str
    watermark_ms: int | None = msgspec.field(name="watermark-ms")
    watermark: datetime | None
    offset_completeness: float | None = msgspec.field(name="offset-completeness")
    committed_records: int = msgspec.field(name="committed-records")
    end_records: int = msgspec.field(name="end-records")
    as_of_ms: int | None = msgspec.field(name="as-of-ms")
    partitions: list[PartitionWatermark]


# A table's completeness: its watermark is the earliest of its topics'; with `until`, whether it is
# complete through that time (after waiting up to `wait` seconds for it).
class WatermarkResponse(msgspec.Struct, frozen=True, omit_defaults=True):
    namespace: list[str]
    table: str
    watermark_ms: int | None = msgspec.field(name="watermark-ms")
    watermark: datetime | None
    topics: list[TopicWatermark]
    until_ms: int | None = msgspec.field(default=None, name="until-ms")
    complete: bool | None = None


# What ingestion reports: the broker's end offset of each partition of a table's topic, read at
# `observed-at-ms` (epoch ms, taken before the request to the broker).
class ObservedTable(msgspec.Struct, frozen=True):
    namespace: list[str]
    table: str
    topic: str
    end_offsets: dict[str, int] = msgspec.field(name="end-offsets")


class EndOffsetsReport(msgspec.Struct, frozen=True):
    warehouse: str
    observed_at_ms: int = msgspec.field(name="observed-at-ms")
    tables: list[ObservedTable]


class EndOffsetsAccepted(msgspec.Struct, frozen=True):
    tables: list[WatermarkResponse]


# -- instance leases ---------------------------------------------------------------------------------


class RenewLease(msgspec.Struct, frozen=True):
    # How long the lease holds without another renewal (2 to 300 seconds).
    ttl_seconds: float = msgspec.field(name="ttl-seconds", default=15.0)


# One live instance of a group: since when (the catalog's clock, epoch ms) and until when it holds.
class LeaseHolder(msgspec.Struct, frozen=True):
    member: str
    joined_at_ms: int = msgspec.field(name="joined-at-ms")
    expires_at_ms: int = msgspec.field(name="expires-at-ms")


# The group's live instances by name, as of `now-ms` (the catalog's clock).
class LeaseGroup(msgspec.Struct, frozen=True):
    group: str
    members: list[LeaseHolder]
    now_ms: int = msgspec.field(name="now-ms")


# The snapshot of a table as of a Kafka record or record time, and the offsets that snapshot covers.
class SnapshotAtResponse(msgspec.Struct, frozen=True, omit_defaults=True):
    snapshot_id: int = msgspec.field(name="snapshot-id")
    sequence_number: int = msgspec.field(name="sequence-number")
    timestamp_ms: int = msgspec.field(name="timestamp-ms")
    topic: str
    start_offsets: dict[str, int] = msgspec.field(name="start-offsets")
    end_offsets: dict[str, int] = msgspec.field(name="end-offsets")
    # Record time (epoch ms): the snapshot's batch's Kafka timestamp range, and the newest record time of
    # all it holds (≤ the asked time); when its summary records them (always for `timestamp` answers).
    min_record_time_ms: int | None = msgspec.field(default=None, name="min-record-time-ms")
    max_record_time_ms: int | None = msgspec.field(default=None, name="max-record-time-ms")
    as_of_record_time_ms: int | None = msgspec.field(default=None, name="as-of-record-time-ms")


# -- maintenance passes -----------------------------------------------------------------------------


class TableStats(msgspec.Struct, frozen=True):
    """A table at one moment: live data and delete files of its current snapshot, its manifests and
    snapshots."""

    data_files: int
    data_bytes: int
    delete_files: int
    delete_bytes: int
    manifests: int
    snapshots: int


class MaintenanceAction(msgspec.Struct, frozen=True, omit_defaults=True):
    """One step of a pass (`rewrite_data_files`, `expire_snapshots` …) and what it reported."""

    name: str
    duration_seconds: float
    result: dict[str, Any] = msgspec.field(default_factory=dict)
    error: str | None = None


class MaintenancePassReport(msgspec.Struct, frozen=True):
    """A pass as the worker reports it."""

    warehouse: str
    namespace: list[str]
    table: str
    started_at: datetime
    duration_seconds: float
    actions: list[MaintenanceAction]
    before: TableStats | None = None
    after: TableStats | None = None
    error: str | None = None


# A recorded maintenance pass, with who recorded it and when.
class MaintenancePass(msgspec.Struct, frozen=True):
    id: int
    warehouse: str
    namespace: list[str]
    table: str
    started_at: datetime
    duration_seconds: float
    actions: list[MaintenanceAction]
    before: TableStats | None
    after: TableStats | None
    error: str | None
    recorded_by: str
    recorded_at: datetime


class ListPassesResponse(msgspec.Struct, frozen=True):
    passes: list[MaintenancePass]
