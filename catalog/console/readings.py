"""What the console's pages show, read through the same services (and so the same authorization) as the
REST API, and turned into plain values for the templates. Table facts come from the table's metadata
(the current snapshot and its summary), which the catalog database already holds: no data file is read.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import quote

from pyiceberg.table.metadata import TableMetadataUtil

from catalog.auth import Principal
from catalog.console.paging import CLUSTERS_PER_PAGE, TABLES_PER_PAGE, Pages
from catalog.console.replays import Replay, replay_history
from catalog.errors import CatalogError, NotFound
from catalog.identifiers import Namespace, TableIdent
from catalog.kafka_offsets import END_OFFSETS, START_OFFSETS, TOPIC, InvalidOffsets, parse_offsets
from catalog.locations import namespace_root
from catalog.pipelines import InvalidConfig
from catalog.pipelines.iceberg import TABLE_MODE_PROPERTY
from catalog.service.clusters import ClusterService
from catalog.service.ingest_history import IngestMetrics, IngestReading, read_ingest_metrics
from catalog.service.maintenance import MaintenanceService
from catalog.service.namespaces import NamespaceService
from catalog.service.pipelines import PipelineService
from catalog.service.tables import TableService
from catalog.service.watermarks import TableWatermark, WatermarkService
from catalog.storage import TableSample, sample_table
from catalog.wire import MaintenancePass

DLQ_SUFFIX = "_dlq"
# Freshness thresholds of the overview's lights: a table last committed longer ago turns amber, then red.
AMBER_AFTER_SECONDS = 5 * 60
RED_AFTER_SECONDS = 60 * 60
DEAD_LETTER_WINDOW_SECONDS = 3600
SAMPLE_ROWS = 20
# Data file size buckets of the small-file histogram: (upper bound in bytes, label).
SIZE_BUCKETS: tuple[tuple[int | None, str], ...] = (
    (1 << 20, "< 1 MiB"),
    (8 << 20, "1 to 8 MiB"),
    (32 << 20, "8 to 32 MiB"),
    (128 << 20, "32 to 128 MiB"),
    (512 << 20, "128 to 512 MiB"),
    (None, "≥ 512 MiB"),
)


class Health(StrEnum):
    GREEN = "green"
    AMBER = "amber"
    RED = "red"


@dataclass(frozen=True, slots=True)
class TableRef:
    """A table as the console's URLs name it."""

    warehouse: str
    namespace: tuple[str, ...]
    name: str

    @property
    def ident(self) -> TableIdent:
        return TableIdent(Namespace.of(list(self.namespace)), self.name)

    @property
    def dotted(self) -> str:
        return ".".join([*self.namespace, self.name])


@dataclass(frozen=True, slots=True)
class TableSummary:
    """One overview row."""

    ref: TableRef
    snapshots: int
    last_commit_ms: int | None
    total_records: int | None
    data_files: int | None
    data_bytes: int | None
    dead_letters_last_hour: int | None
    ingested: bool | None  # in the applied floe.yaml (None: this key may not read the pipeline)
    last_pass: MaintenancePass | None
    health: Health
    reasons: tuple[str, ...]
    ingest: IngestReading | None = None

    @property
    def age_seconds(self) -> float | None:
        return None if self.last_commit_ms is None else max(0.0, time.time() - self.last_commit_ms / 1000)


@dataclass(frozen=True, slots=True)
class ClusterOverview:
    name: str
    warehouse: str
    tables: list[TableSummary]  # one page of them
    pages: Pages  # of its tables


@dataclass(frozen=True, slots=True)
class Overview:
    clusters: list[ClusterOverview]
    ingest: IngestMetrics | None  # None: no ingestion metrics URL configured
    pages: Pages | None = None  # of the clusters; None when one cluster's tables are paged
    cluster: str | None = None  # the one cluster shown

    @property
    def query(self) -> str:
        """The query string that shows this page again (the rows' poll)."""
        if self.cluster is not None:
            return f"?cluster={quote(self.cluster, safe='')}&page={self.clusters[0].pages.number}"
        return f"?page={self.pages.number}" if self.pages is not None and self.pages.number > 1 else ""


@dataclass(frozen=True, slots=True)
class SnapshotRow:
    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    operation: str
    added_records: int | None
    added_files: int | None
    total_records: int | None
    total_files: int | None
    total_bytes: int | None
    kafka_topic: str | None
    start_offsets: dict[str, int]
    end_offsets: dict[str, int]
    current: bool


@dataclass(frozen=True, slots=True)
class FieldRow:
    field_id: int
    path: str
    type: str
    required: bool
    identifier: bool
    doc: str | None
    depth: int


@dataclass(frozen=True, slots=True)
class PartitionRow:
    name: str
    source: str
    transform: str
    field_id: int | None


@dataclass
class TableDetails:
    ref: TableRef
    location: str
    metadata_location: str
    format_version: int
    table_uuid: str
    fields: list[FieldRow]
    partition_fields: list[PartitionRow]
    properties: dict[str, str]
    snapshots: list[SnapshotRow]
    committed_offsets: dict[str, dict[int, int]]
    passes: list[MaintenancePass]
    data_files: int | None
    data_bytes: int | None
    delete_files: int | None
    total_records: int | None  # live rows (`live_records`)
    upsert: bool = False  # one row per key (floe.table-mode: upsert)
    dlq: TableRef | None = None
    throughput: list[tuple[int, int]] = field(default_factory=list)
    watermark: TableWatermark | None = None  # completeness (docs/watermarks.md)
    replays: list[Replay] = field(default_factory=list)  # `floe replay` commits (docs/replay.md)

    @property
    def mean_file_bytes(self) -> int | None:
        if not self.data_files or self.data_bytes is None:
            return None
        return self.data_bytes // self.data_files


def _int(summary: Mapping[str, Any], key: str) -> int | None:
    raw = summary.get(key)
    try:
        return int(raw) if raw is not None else None
    except (TypeError, ValueError):
        return None


def live_records(summary: Mapping[str, Any]) -> int | None:
    """The rows a `count(*)` gives: the data files' records less the rows position deletes and deletion
    vectors remove (each removes one live row: an upsert table's replaced rows); None with equality
    deletes, whose effect a summary cannot tell."""
    total, deleted = _int(summary, "total-records"), _int(summary, "total-position-deletes") or 0
    if total is None or _int(summary, "total-equality-deletes"):
        return None
    return max(0, total - deleted)


def _offsets(raw: Any) -> dict[str, int]:
    """A summary's offsets property as the page shows it; nothing for one floe would refuse today (a
    table committed by an older floe must not break its page)."""
    try:
        return {str(p): o for p, o in parse_offsets(raw, skip_invalid=True).items()}
    except InvalidOffsets:
        return {}


def current_snapshot(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    current = metadata.get("current-snapshot-id")
    for snapshot in metadata.get("snapshots") or []:
        if snapshot.get("snapshot-id") == current:
            return dict(snapshot)
    return None


def snapshot_rows(metadata: Mapping[str, Any]) -> list[SnapshotRow]:
    """The snapshot timeline, newest first, with each ingestion commit's Kafka offsets."""
    current = metadata.get("current-snapshot-id")
    rows = []
    for snapshot in metadata.get("snapshots") or []:
        summary = snapshot.get("summary") or {}
        rows.append(
            SnapshotRow(
                snapshot_id=int(snapshot["snapshot-id"]),
                parent_id=snapshot.get("parent-snapshot-id"),
                timestamp_ms=int(snapshot.get("timestamp-ms", 0)),
                operation=str(summary.get("operation", "")),
                added_records=_int(summary, "added-records"),
                added_files=_int(summary, "added-data-files"),
                total_records=_int(summary, "total-records"),
                total_files=_int(summary, "total-data-files"),
                total_bytes=_int(summary, "total-files-size"),
                kafka_topic=summary.get(TOPIC),
                start_offsets=_offsets(summary.get(START_OFFSETS)),
                end_offsets=_offsets(summary.get(END_OFFSETS)),
                current=snapshot.get("snapshot-id") == current,
            )
        )
    rows.sort(key=lambda r: (r.timestamp_ms, r.snapshot_id), reverse=True)
    return rows


def records_added_since(metadata: Mapping[str, Any], since_ms: int) -> int:
    """Records the snapshots committed since `since_ms` added (snapshots expired meanwhile not counted)."""
    return sum(
        _int(s.get("summary") or {}, "added-records") or 0
        for s in metadata.get("snapshots") or []
        if int(s.get("timestamp-ms", 0)) >= since_ms
    )


def _type_name(kind: Any) -> str:
    if isinstance(kind, str):
        return kind
    if isinstance(kind, dict):
        nested = kind.get("type")
        if nested == "list":
            return f"list<{_type_name(kind.get('element'))}>"
        if nested == "map":
            return f"map<{_type_name(kind.get('key'))}, {_type_name(kind.get('value'))}>"
        if nested == "struct":
            return "struct"
    return str(kind)


def _walk_fields(
    fields: Iterable[Mapping[str, Any]], prefix: str, depth: int, ids: set[int]
) -> list[FieldRow]:
    rows = []
    for f in fields:
        path = f"{prefix}{f['name']}"
        kind = f.get("type")
        rows.append(
            FieldRow(
                int(f["id"]),
                path,
                _type_name(kind),
                bool(f.get("required")),
                f["id"] in ids,
                f.get("doc"),
                depth,
            )
        )
        if isinstance(kind, dict) and kind.get("type") == "struct":
            rows.extend(_walk_fields(kind.get("fields") or [], path + ".", depth + 1, ids))
        elif isinstance(kind, dict) and kind.get("type") == "list" and isinstance(kind.get("element"), dict):
            element = kind["element"]
            if element.get("type") == "struct":
                rows.extend(_walk_fields(element.get("fields") or [], path + ".element.", depth + 1, ids))
    return rows


def schema_fields(metadata: Mapping[str, Any]) -> list[FieldRow]:
    """The current schema's fields, nested ones below their parent, with ids, types and identifier marks."""
    current = metadata.get("current-schema-id")
    for schema in metadata.get("schemas") or []:
        if schema.get("schema-id") == current:
            ids = set(schema.get("identifier-field-ids") or [])
            return _walk_fields(schema.get("fields") or [], "", 0, ids)
    return []


def partition_fields(metadata: Mapping[str, Any], fields: list[FieldRow]) -> list[PartitionRow]:
    by_id = {f.field_id: f.path for f in fields}
    default = metadata.get("default-spec-id")
    for spec in metadata.get("partition-specs") or []:
        if spec.get("spec-id") == default:
            return [
                PartitionRow(
                    str(p.get("name")),
                    by_id.get(p.get("source-id"), str(p.get("source-id"))),
                    str(p.get("transform")),
                    p.get("field-id"),
                )
                for p in spec.get("fields") or []
            ]
    return []


def health_of(
    age_seconds: float | None,
    dead_letters: int | None,
    last_pass: MaintenancePass | None,
    ingest: IngestReading | None = None,
) -> tuple[Health, tuple[str, ...]]:
    """Red when the ingestion service reports an error for the table, or it has not been committed to
    (or its ingestion has fallen behind) for an hour; amber after five minutes, for dead letters in the
    last hour, a missing source topic or a failed last maintenance pass; green otherwise. The reasons say
    which."""
    reasons: list[str] = []
    health = Health.GREEN
    time_lag = ingest.time_lag_seconds if ingest is not None else None
    if ingest is not None and ingest.error:
        health = Health.RED
        reasons.append(f"ingestion stopped: {ingest.error}")
    if ingest is not None and ingest.missing_topic:
        health = max(health, Health.AMBER, key=_severity)
        reasons.append(f"topic {ingest.missing_topic} does not exist")
    if time_lag is not None and time_lag >= RED_AFTER_SECONDS:
        health = Health.RED
        reasons.append("ingestion over an hour behind")
    elif time_lag is not None and time_lag >= AMBER_AFTER_SECONDS:
        health = max(health, Health.AMBER, key=_severity)
        reasons.append("ingestion over five minutes behind")
    if age_seconds is None:
        health = max(health, Health.AMBER, key=_severity)
        reasons.append("no commits yet")
    elif age_seconds >= RED_AFTER_SECONDS:
        health = Health.RED
        reasons.append("no commit for over an hour")
    elif age_seconds >= AMBER_AFTER_SECONDS:
        health = max(health, Health.AMBER, key=_severity)
        reasons.append("no commit for over five minutes")
    if dead_letters:
        health = max(health, Health.AMBER, key=_severity)
        reasons.append(f"{dead_letters} dead letters in the last hour")
    if last_pass is not None and last_pass.error:
        health = max(health, Health.AMBER, key=_severity)
        reasons.append("last maintenance pass failed")
    return health, tuple(reasons)


def size_histogram(sizes: Iterable[int]) -> list[tuple[str, int]]:
    """How many data files fall in each size bucket (many small ones are the compaction debt)."""
    counts = [0] * len(SIZE_BUCKETS)
    for size in sizes:
        for i, (bound, _) in enumerate(SIZE_BUCKETS):
            if bound is None or size < bound:
                counts[i] += 1
                break
    return [(label, counts[i]) for i, (_, label) in enumerate(SIZE_BUCKETS)]


def _severity(health: Health) -> int:
    return (Health.GREEN, Health.AMBER, Health.RED).index(health)


class ConsoleReader:
    """Reads for the console's pages, on behalf of one principal."""

    def __init__(
        self,
        principal: Principal,
        clusters: ClusterService,
        namespaces: NamespaceService,
        tables: TableService,
        maintenance: MaintenanceService,
        pipelines: PipelineService,
        watermarks: WatermarkService,
    ) -> None:
        self.principal = principal
        self.clusters = clusters
        self.namespaces = namespaces
        self.tables = tables
        self.maintenance = maintenance
        self.pipelines = pipelines
        self.watermarks = watermarks

    async def _table_page(self, warehouse: str, cluster: str, page: int) -> tuple[Pages, list[TableRef]]:
        """A page of the cluster's tables (by namespace and name) and where it lies among them."""
        offset = (page - 1) * TABLES_PER_PAGE
        read = self.namespaces.cluster_tables
        total, idents = await read(self.principal, warehouse, cluster, offset, TABLES_PER_PAGE)
        pages = Pages.of(page, TABLES_PER_PAGE, total)
        if pages.offset != offset:  # beyond the last page: the last one
            total, idents = await read(self.principal, warehouse, cluster, pages.offset, TABLES_PER_PAGE)
        return pages, [TableRef(warehouse, i.namespace.levels, i.name) for i in idents]

    async def _has_table(self, ref: TableRef) -> bool:
        try:
            await self.tables.exists(self.principal, ref.warehouse, ref.ident)
        except CatalogError:
            return False
        return True

    async def metadata(self, ref: TableRef) -> tuple[str, dict[str, Any]]:
        loaded = await self.tables.load(self.principal, ref.warehouse, ref.ident)
        assert loaded is not None  # no If-None-Match was sent
        return loaded.metadata_location or "", json.loads(loaded.metadata_json)

    async def _ingested_tables(self) -> set[tuple[str, str]] | None:
        """(namespace, table) of the applied floe.yaml; None when this key may not read the pipeline (or
        the applied revision no longer validates: the overview still shows the tables)."""
        try:
            state = await self.pipelines.current(self.principal)
        except NotFound:
            return set()
        except (CatalogError, InvalidConfig):
            return None
        return {(t.namespace, t.table_name) for t in state.config.tables}

    async def last_passes(self) -> dict[tuple[str, str, str], MaintenancePass]:
        passes = await self.maintenance.list(
            self.principal, warehouse=None, namespace=None, table=None, limit=1000
        )
        newest: dict[tuple[str, str, str], MaintenancePass] = {}
        for p in passes:  # newest first
            newest.setdefault((p.warehouse, ".".join(p.namespace), p.table), p)
        return newest

    async def overview(
        self, ingest_metrics_url: str | None = None, cluster: str | None = None, page: int = 1
    ) -> Overview:
        """The clusters the key sees, `CLUSTERS_PER_PAGE` a page, each with its first page of tables; or,
        for `cluster`, page `page` of that cluster's tables. Dead-letter tables are folded into theirs;
        the ingestion service's lag of each is shown when its metrics URL is configured."""
        if cluster is not None:
            shown, cluster_pages, table_page = [await self.clusters.get(self.principal, cluster)], None, page
        else:
            every = await self.clusters.list(self.principal)
            cluster_pages = Pages.of(page, CLUSTERS_PER_PAGE, len(every))
            shown = every[cluster_pages.offset : cluster_pages.offset + CLUSTERS_PER_PAGE]
            table_page = 1
        metrics = await read_ingest_metrics(ingest_metrics_url)
        readings = metrics.tables if metrics is not None else {}
        ingested = await self._ingested_tables()
        passes = await self.last_passes()
        now_ms = int(time.time() * 1000)
        result = []
        for record in shown:
            pages, refs = await self._table_page(record.warehouse, record.name, table_page)
            # `_summary` reads `<table>_dlq` when it is named here (a missing one reads as none).
            names = {r.dotted for r in refs} | {r.dotted + DLQ_SUFFIX for r in refs}
            rows = []
            for ref in refs:
                if ref.name.endswith(DLQ_SUFFIX):
                    base = TableRef(ref.warehouse, ref.namespace, ref.name.removesuffix(DLQ_SUFFIX))
                    if base.dotted in names or await self._has_table(base):
                        continue
                reading = readings.get(ref.dotted)
                rows.append(await self._summary(ref, names, ingested, passes, now_ms, reading))
            result.append(ClusterOverview(record.name, record.warehouse, rows, pages))
        return Overview(result, metrics, cluster_pages, cluster)

    async def _summary(
        self,
        ref: TableRef,
        names: set[str],
        ingested: set[tuple[str, str]] | None,
        passes: dict[tuple[str, str, str], MaintenancePass],
        now_ms: int,
        reading: IngestReading | None,
    ) -> TableSummary:
        try:
            _, metadata = await self.metadata(ref)
        except CatalogError:  # dropped since it was listed
            metadata = {}
        snapshot = current_snapshot(metadata)
        summary = (snapshot or {}).get("summary") or {}
        dead_letters = None
        if ref.dotted + DLQ_SUFFIX in names:
            dlq = TableRef(ref.warehouse, ref.namespace, ref.name + DLQ_SUFFIX)
            try:
                _, dlq_metadata = await self.metadata(dlq)
                dead_letters = records_added_since(dlq_metadata, now_ms - DEAD_LETTER_WINDOW_SECONDS * 1000)
            except CatalogError:
                dead_letters = None
        last_pass = passes.get((ref.warehouse, ".".join(ref.namespace), ref.name))
        last_ms = int(snapshot["timestamp-ms"]) if snapshot else None
        age = None if last_ms is None else max(0.0, (now_ms - last_ms) / 1000)
        health, reasons = health_of(age, dead_letters, last_pass, reading)
        return TableSummary(
            ref=ref,
            snapshots=len(metadata.get("snapshots") or []),
            last_commit_ms=last_ms,
            total_records=live_records(summary),
            data_files=_int(summary, "total-data-files"),
            data_bytes=_int(summary, "total-files-size"),
            dead_letters_last_hour=dead_letters,
            ingested=None if ingested is None else (".".join(ref.namespace), ref.name) in ingested,
            last_pass=last_pass,
            health=health,
            reasons=reasons,
            ingest=reading,
        )

    async def table(self, ref: TableRef) -> TableDetails:
        """The table page: schema, partitioning, properties, snapshots with offsets, maintenance passes."""
        metadata_location, metadata = await self.metadata(ref)
        fields = schema_fields(metadata)
        snapshot = current_snapshot(metadata)
        summary = (snapshot or {}).get("summary") or {}
        offsets = await self.tables.kafka_offsets(self.principal, ref.warehouse, ref.ident)
        watermark = await self.watermarks.watermark(self.principal, ref.warehouse, ref.ident)
        passes = await self.maintenance.list(
            self.principal,
            warehouse=ref.warehouse,
            namespace=ref.ident.namespace.key,
            table=ref.name,
            limit=20,
        )
        dlq = TableRef(ref.warehouse, ref.namespace, ref.name + DLQ_SUFFIX)
        dlq_ref = dlq if await self._has_table(dlq) else None
        snapshots = snapshot_rows(metadata)
        return TableDetails(
            ref=ref,
            location=str(metadata.get("location", "")),
            metadata_location=metadata_location,
            format_version=int(metadata.get("format-version", 0)),
            table_uuid=str(metadata.get("table-uuid", "")),
            fields=fields,
            partition_fields=partition_fields(metadata, fields),
            properties=dict(sorted((metadata.get("properties") or {}).items())),
            snapshots=snapshots,
            committed_offsets={
                topic: {p: offset for p, (offset, _) in sorted(parts.items())}
                for topic, parts in offsets.items()
            },
            passes=passes,
            watermark=watermark if watermark.topics else None,
            replays=replay_history(metadata),
            data_files=_int(summary, "total-data-files"),
            data_bytes=_int(summary, "total-files-size"),
            delete_files=_int(summary, "total-delete-files"),
            total_records=live_records(summary),
            upsert=(metadata.get("properties") or {}).get(TABLE_MODE_PROPERTY) == "upsert",
            dlq=dlq_ref if not ref.name.endswith(DLQ_SUFFIX) else None,
            throughput=[
                (s.timestamp_ms // 1000, s.added_records or 0)
                for s in reversed(snapshots)
                if s.operation == "append"
            ],
        )

    async def sample(
        self, ref: TableRef, limit: int = SAMPLE_ROWS, offset: int = 0, newest_first: bool = False
    ) -> TableSample:
        """The table's data file sizes and newest rows: read on request only (it reads files), with
        the key's read permission on the table, in the key's share of the storage pool, and only from
        the table's cluster folder."""
        loaded = await self.tables.load(self.principal, ref.warehouse, ref.ident)
        assert loaded is not None
        warehouse = await self.tables.warehouses.get(ref.warehouse)
        metadata = TableMetadataUtil.parse_raw(loaded.metadata_json)
        owned = namespace_root(warehouse.location, ref.ident.namespace.levels[0])
        storage = self.tables.storage.confined(warehouse, owned)
        sample: TableSample = await self.tables.storage.run(
            warehouse,
            self.principal,
            sample_table,
            storage,
            metadata,
            owned,
            limit,
            300,
            offset,
            newest_first,
        )
        return sample
