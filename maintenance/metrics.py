"""Prometheus metrics of the maintenance worker, per table (`--metrics-port`, default 9465)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from maintenance.table_state import TableStats

REGISTRY = CollectorRegistry()
_TABLE = ("warehouse", "table")

GROUP_INSTANCES = Gauge(
    "floe_maintenance_group_instances",
    "Live `floe maintain --shard auto` instances of this instance's group, as floe last answered",
    registry=REGISTRY,
)
DATA_FILES = Gauge(
    "floe_maintenance_data_files",
    "Live data files of the table's current snapshot",
    _TABLE,
    registry=REGISTRY,
)
DATA_BYTES = Gauge(
    "floe_maintenance_data_bytes", "Bytes of the table's live data files", _TABLE, registry=REGISTRY
)
AVERAGE_FILE_BYTES = Gauge(
    "floe_maintenance_average_data_file_bytes",
    "Average size of the table's live data files",
    _TABLE,
    registry=REGISTRY,
)
DELETE_FILES = Gauge(
    "floe_maintenance_delete_files", "Live delete files of the table", _TABLE, registry=REGISTRY
)
MANIFESTS = Gauge(
    "floe_maintenance_manifests", "Manifests of the table's current snapshot", _TABLE, registry=REGISTRY
)
SNAPSHOTS = Gauge("floe_maintenance_snapshots", "Snapshots the table keeps", _TABLE, registry=REGISTRY)
LAST_PASS = Gauge(
    "floe_maintenance_last_pass_timestamp_seconds",
    "When the table's last maintenance pass ended",
    _TABLE,
    registry=REGISTRY,
)
LAST_PASS_DURATION = Gauge(
    "floe_maintenance_last_pass_duration_seconds",
    "How long the table's last maintenance pass took",
    _TABLE,
    registry=REGISTRY,
)
PASS_SECONDS = Histogram(
    "floe_maintenance_pass_seconds",
    "Duration of one table's maintenance pass",
    _TABLE,
    registry=REGISTRY,
    buckets=(1, 2, 5, 10, 30, 60, 120, 300, 600, 1800),
)
ACTIONS = Counter(
    "floe_maintenance_actions",
    "Maintenance actions run, by action and outcome (ok or failed)",
    (*_TABLE, "action", "outcome"),
    registry=REGISTRY,
)
FAILED_PASSES = Counter(
    "floe_maintenance_failed_passes", "Table passes with at least one failure", _TABLE, registry=REGISTRY
)


def observe_table(warehouse: str, table: str, stats: TableStats) -> None:
    labels = (warehouse, table)
    DATA_FILES.labels(*labels).set(stats.data_files)
    DATA_BYTES.labels(*labels).set(stats.data_bytes)
    AVERAGE_FILE_BYTES.labels(*labels).set(stats.average_data_file_bytes)
    DELETE_FILES.labels(*labels).set(stats.delete_files)
    MANIFESTS.labels(*labels).set(stats.manifests)
    SNAPSHOTS.labels(*labels).set(stats.snapshots)


def observe_pass(warehouse: str, table: str, ended_at: float, duration: float, failed: bool) -> None:
    labels = (warehouse, table)
    LAST_PASS.labels(*labels).set(ended_at)
    LAST_PASS_DURATION.labels(*labels).set(duration)
    PASS_SECONDS.labels(*labels).observe(duration)
    if failed:
        FAILED_PASSES.labels(*labels).inc()


def observe_action(warehouse: str, table: str, action: str, ok: bool) -> None:
    ACTIONS.labels(warehouse, table, action, "ok" if ok else "failed").inc()
