"""What one maintenance pass does to a table, decided from its state and policy (pure).

- Compaction (`rewrite_data_files`, binpack; one commit, or partial progress where upserts may race
  it): a partition is a candidate when it has at least `MIN_INPUT_FILES` small data files (below 75%
  of the target size) or `DELETE_FILES_TO_COMPACT` delete files, or, once cold, any delete file (an
  upsert table that stopped changing keeps no deletes for readers to apply; a hot one, still merged
  into, waits until they accumulate). Cold partitions (not written for `cold_after`) are compacted
  first, oldest first; the hot ones (still being written by ingestion) only when they have
  `hot_partition_max_files` small files (or `DELETE_FILES_TO_COMPACT` delete files), so a pass does not
  rewrite the files ingestion is about to add to. Each run names its partitions in a `where` predicate
  on the source columns (ranges for time transforms, equality for identity, Iceberg's
  `system.bucket`/`system.truncate` functions otherwise).
- Delete files: compaction applies them (`delete-file-threshold`); `rewrite_position_delete_files`
  then drops the position deletes left pointing at no live row, and merges partition-scoped ones when
  a partition has several.
- Manifests: `rewrite_manifests` when there are many small ones (decided after compaction, which
  changes them).
- Snapshots: `expire_snapshots` older than `snapshot_retention` or beyond the newest `max_snapshots`,
  keeping `min_snapshots_to_keep`.
- Metadata files: the table keeps `write.metadata.previous-versions-max` of them in its log
  (`write.metadata.delete-after-commit.enabled`); files older than the log's oldest are removed.
- Orphan files: unreferenced files older than `orphan_file_age` (`maintenance.orphans`, no Spark).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from pyiceberg.partitioning import PartitionField
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

from catalog.metadata_files import numbered_metadata_file_version
from catalog.pipelines.maintenance import MaintenancePolicy
from maintenance.table_state import ManifestState, PartitionState, TableState

MIN_INPUT_FILES = 5
DELETE_FILES_TO_COMPACT = 10
POSITION_DELETE_FILES_TO_REWRITE = 2
MANIFESTS_TO_REWRITE = 10
SMALL_MANIFEST_BYTES = 1024 * 1024
# A `where` naming more partitions than this is split into several runs.
PARTITIONS_PER_RUN = 100
# Orphan removal lists every file of the table: not on every pass.
ORPHAN_SCAN_INTERVAL_SECONDS = 3_600
METADATA_PROPERTIES = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
}


@dataclass(frozen=True)
class CompactionRun:
    """One `rewrite_data_files` call."""

    kind: str  # "cold" or "hot"
    partitions: tuple[PartitionState, ...]
    where: str | None
    options: dict[str, str]

    @property
    def small_files(self) -> int:
        return sum(p.small_files for p in self.partitions)


@dataclass(frozen=True)
class ExpireRun:
    older_than_ms: int
    retain_last: int
    expirable: int
    # The snapshots the run removes (as planned; the in-process expiry removes exactly these).
    snapshot_ids: tuple[int, ...] = ()


@dataclass
class TablePlan:
    compactions: list[CompactionRun] = field(default_factory=list)
    rewrite_position_deletes: bool = False
    expire: ExpireRun | None = None
    set_properties: dict[str, str] = field(default_factory=dict)
    remove_orphans_older_than_ms: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.compactions
            or self.rewrite_position_deletes
            or self.expire
            or self.set_properties
            or self.remove_orphans_older_than_ms is not None
        )


def plan_table(
    state: TableState,
    policy: MaintenancePolicy,
    now_ms: int,
    *,
    functions_catalog: str,
    scan_orphans: bool = True,
) -> TablePlan:
    """The pass for `state` at `now_ms`; `functions_catalog` is the Spark catalog whose `system`
    functions (bucket, truncate) predicates may call."""
    plan = TablePlan()
    plan.compactions = plan_compaction(state, policy, now_ms, functions_catalog=functions_catalog)
    # Compaction applies the deletes of the partitions it rewrites; rewriting the position delete files
    # afterwards drops those that now point at no live row. File-scoped deletes (Iceberg's default
    # granularity) cover one data file each, so merging them gains nothing; partition-scoped ones merge.
    compacted_deletes = any(p.position_delete_files for run in plan.compactions for p in run.partitions)
    mergeable = state.properties.get("write.delete.granularity") == "partition" and any(
        p.position_delete_files >= POSITION_DELETE_FILES_TO_REWRITE for p in state.partitions
    )
    plan.rewrite_position_deletes = compacted_deletes or mergeable
    plan.expire = plan_expiry(state, policy, now_ms)
    plan.set_properties = {k: v for k, v in METADATA_PROPERTIES.items() if k not in state.properties}
    if scan_orphans and state.current_snapshot_id is not None:
        plan.remove_orphans_older_than_ms = now_ms - policy.orphan_file_age * 1000
    return plan


def plan_compaction(
    state: TableState, policy: MaintenancePolicy, now_ms: int, *, functions_catalog: str
) -> list[CompactionRun]:
    cold_before = now_ms - policy.cold_after * 1000
    cold: list[PartitionState] = []
    hot: list[PartitionState] = []
    for partition in state.partitions:
        is_cold = partition.last_write_ms is None or partition.last_write_ms <= cold_before
        needs_deletes_applied = partition.delete_files >= DELETE_FILES_TO_COMPACT
        if is_cold and (partition.small_files >= MIN_INPUT_FILES or partition.delete_files):
            cold.append(partition)
        elif not is_cold and (
            partition.small_files >= policy.hot_partition_max_files or needs_deletes_applied
        ):
            hot.append(partition)
    # Oldest first: the partitions readers are least likely to race with.
    cold.sort(key=lambda p: p.last_write_ms or 0)
    candidates = [p for p in state.partitions if p.small_files >= 2 or p.delete_files]
    options = compaction_options(state, policy)
    runs: list[CompactionRun] = []
    for kind, chosen in (("cold", cold), ("hot", hot)):
        if not chosen:
            continue
        if len(chosen) == len(candidates) and kind == "cold" and not hot:
            # Every partition that could be rewritten: no predicate needed.
            runs.append(CompactionRun(kind, tuple(chosen), None, options))
            continue
        for start in range(0, len(chosen), PARTITIONS_PER_RUN):
            batch = chosen[start : start + PARTITIONS_PER_RUN]
            predicates = [partition_predicate(state, p, functions_catalog) for p in batch]
            if any(predicate is None for predicate in predicates):
                # A partition no predicate can name: rewrite the whole table (binpack still only
                # rewrites the partitions with enough small files).
                return [CompactionRun(kind, tuple(cold + hot), None, options)]
            where = " OR ".join(f"({predicate})" for predicate in predicates if predicate)
            runs.append(CompactionRun(kind, tuple(batch), where or None, options))
    return runs


def compaction_options(state: TableState, policy: MaintenancePolicy) -> dict[str, str]:
    options = {
        "target-file-size-bytes": str(policy.target_file_size_bytes),
        "min-input-files": str(MIN_INPUT_FILES),
        "max-concurrent-file-group-rewrites": "2",
        "rewrite-job-order": "files-desc",
    }
    if any(p.delete_files for p in state.partitions):
        # Upserts merge into the files a rewrite replaces: a group whose commit loses to one is retried
        # by Iceberg, one that still fails is counted (failed_data_files_count), not fatal, and the other
        # groups keep their work. An append-only table commits once instead: appends never conflict with
        # a rewrite (Iceberg retries on the fresh metadata), and each group's commit re-filters every
        # manifest, and raced the other groups' commits (1,000 small files in 4 partitions, fresh JVM,
        # loaded machine: 34.6 CPU-s and 143 s with a commit per group, 29.6 CPU-s and 103 s with one).
        options["partial-progress.enabled"] = "true"
        options["partial-progress.max-commits"] = "10"
        options["partial-progress.max-failed-commits"] = "1000"
        options["delete-file-threshold"] = "1"
        options["remove-dangling-deletes"] = "true"
        # The rewritten files take the new snapshot's sequence number, so the position deletes they
        # absorbed fall behind them and count as dangling (with the starting snapshot's number they
        # would still apply and stay). A delete committed meanwhile makes the group's commit fail
        # validation instead: retried on the next pass, never lost.
        options["use-starting-sequence-number"] = "false"
    return options


def plan_expiry(state: TableState, policy: MaintenancePolicy, now_ms: int) -> ExpireRun | None:
    """Expire when some snapshot is older than the retention (or than the newest `max_snapshots` of the
    current snapshot's ancestry), not among the newest kept, and no branch or tag points at it."""
    cutoff = now_ms - policy.snapshot_retention * 1000
    ancestry = state.main_ancestry()
    if 0 < policy.max_snapshots < len(state.snapshots) and ancestry:
        # Iceberg expires what is older than a timestamp: the oldest of the newest `max_snapshots`.
        cutoff = max(cutoff, ancestry[: policy.max_snapshots][-1].timestamp_ms)
    kept = {s.snapshot_id for s in ancestry[: policy.min_snapshots_to_keep]}
    expirable = [
        s
        for s in state.snapshots
        if s.timestamp_ms < cutoff
        and s.snapshot_id not in kept
        and s.snapshot_id not in state.referenced_snapshot_ids
    ]
    if not expirable:
        return None
    return ExpireRun(
        cutoff, policy.min_snapshots_to_keep, len(expirable), tuple(s.snapshot_id for s in expirable)
    )


def needs_manifest_rewrite(manifests: Sequence[ManifestState], *, compacted: bool = False) -> bool:
    """Many small data manifests: planning reads each of them on every query. Right after a pass
    compacted the table, two small ones are enough: compaction leaves the rewritten files in manifests
    of a few entries beside the ones it kept (an upsert table's 16 buckets in 8 manifests of 2 files, plus
    delete manifests listing only removed files), and DuckDB read such a table 3-7x slower than the same
    files in one manifest (benchmarks/results/upsert.md); one rewrite of a few small manifests is cheap."""
    data = [m for m in manifests if m.content == 0]
    if len(data) < (2 if compacted else MANIFESTS_TO_REWRITE):
        return False
    return sum(m.length for m in data) / len(data) < SMALL_MANIFEST_BYTES


def stale_metadata_files(listed: Sequence[str], state: TableState) -> list[str]:
    """Metadata files older than every file the table still references (its log and current file).

    Only versions below the oldest referenced one: a commit in flight writes a version above the
    current one, and a file it wrote from an older base loses its swap (the catalog retries from the
    new base), so neither is ever needed."""
    referenced = [p for p in (*state.metadata_log, state.metadata_location or "") if p]
    versions = [v for v in (numbered_metadata_file_version(p) for p in referenced) if v is not None]
    if not versions:
        return []
    oldest = min(versions)
    names = {p.rsplit("/", 1)[-1] for p in referenced}
    stale = []
    for path in listed:
        version = numbered_metadata_file_version(path)
        if version is not None and version < oldest and path.rsplit("/", 1)[-1] not in names:
            stale.append(path)
    return stale


# -- partition predicates ------------------------------------------------------------------------


def partition_predicate(state: TableState, partition: PartitionState, functions_catalog: str) -> str | None:
    """A Spark SQL predicate true exactly for the rows of `partition` ("" for the unpartitioned
    table), or None when a value cannot be written as a literal."""
    spec = state.specs.get(partition.spec_id)
    if spec is None:
        return None
    terms: list[str] = []
    for index, spec_field in enumerate(spec.fields):
        value = partition.values[index] if index < len(partition.values) else None
        term = field_predicate(state.schema, spec_field, value, functions_catalog)
        if term is None:
            return None
        if term:
            terms.append(term)
    return " AND ".join(terms)


def column_reference(schema: Schema, field_id: int) -> tuple[str, IcebergType] | None:
    """`` `a`.`b` `` for a (possibly nested in structs) column, with its type."""
    path = _path_to(schema.fields, field_id)
    if path is None:
        return None
    return ".".join(quote_identifier(f.name) for f in path), path[-1].field_type


def _path_to(fields: Sequence[NestedField], field_id: int) -> list[NestedField] | None:
    for candidate in fields:
        if candidate.field_id == field_id:
            return [candidate]
        if isinstance(candidate.field_type, StructType):
            below = _path_to(candidate.field_type.fields, field_id)
            if below is not None:
                return [candidate, *below]
    return None


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def field_predicate(
    schema: Schema, spec_field: PartitionField, value: Any, functions_catalog: str
) -> str | None:
    transform = spec_field.transform
    if isinstance(transform, VoidTransform):
        return ""
    found = column_reference(schema, spec_field.source_id)
    if found is None:
        return None
    column, column_type = found
    if value is None:
        return f"{column} IS NULL"
    if isinstance(transform, IdentityTransform):
        literal = sql_literal(value, column_type)
        return f"{column} = {literal}" if literal is not None else None
    if isinstance(transform, YearTransform | MonthTransform | DayTransform | HourTransform):
        bounds = _time_bounds(transform, value)
        if bounds is None:
            return None
        low, high = (_time_literal(bound, column_type) for bound in bounds)
        if low is None or high is None:
            return None
        return f"{column} >= {low} AND {column} < {high}"
    functions = f"{quote_identifier(functions_catalog)}.system"
    if isinstance(transform, BucketTransform):
        return f"{functions}.bucket({transform.num_buckets}, {column}) = {int(value)}"
    if isinstance(transform, TruncateTransform):
        literal = sql_literal(value, column_type)
        return f"{functions}.truncate({transform.width}, {column}) = {literal}" if literal else None
    return None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _add_months(months: int) -> datetime:
    year, month = divmod(months, 12)
    return datetime(1970 + year, month + 1, 1, tzinfo=UTC)


def _time_bounds(transform: Any, value: Any) -> tuple[datetime, datetime] | None:
    if isinstance(value, date) and not isinstance(value, datetime):
        value = (value - date(1970, 1, 1)).days
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if isinstance(transform, YearTransform):
        return _add_months(12 * value), _add_months(12 * (value + 1))
    if isinstance(transform, MonthTransform):
        return _add_months(value), _add_months(value + 1)
    if isinstance(transform, DayTransform):
        return _EPOCH + timedelta(days=value), _EPOCH + timedelta(days=value + 1)
    return _EPOCH + timedelta(hours=value), _EPOCH + timedelta(hours=value + 1)


def _time_literal(moment: datetime, column_type: IcebergType) -> str | None:
    if isinstance(column_type, DateType):
        return f"DATE '{moment.date().isoformat()}'"
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(column_type, TimestamptzType):
        return f"TIMESTAMP '{text}+00:00'"
    if isinstance(column_type, TimestampType):
        return f"TIMESTAMP_NTZ '{text}'"
    return None


def _string_literal(text: str) -> str:
    # Spark SQL string literals take backslash escapes.
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_literal(value: Any, column_type: IcebergType) -> str | None:
    """A Spark SQL literal of a partition value of `column_type`, or None."""
    if isinstance(column_type, StringType) and isinstance(value, str):
        return _string_literal(value)
    if isinstance(column_type, BooleanType) and isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(column_type, IntegerType | LongType) and isinstance(value, int):
        return f"{value}L" if isinstance(column_type, LongType) else str(value)
    if isinstance(column_type, FloatType | DoubleType) and isinstance(value, float):
        if not math.isfinite(value):
            return None
        return f"CAST({value!r} AS {'FLOAT' if isinstance(column_type, FloatType) else 'DOUBLE'})"
    if isinstance(column_type, DecimalType) and isinstance(value, Decimal | int):
        return f"CAST('{value}' AS DECIMAL({column_type.precision}, {column_type.scale}))"
    if isinstance(column_type, DateType):
        if isinstance(value, int) and not isinstance(value, bool):
            value = date(1970, 1, 1) + timedelta(days=value)
        return f"DATE '{value.isoformat()}'" if isinstance(value, date) else None
    if isinstance(column_type, TimestampType | TimestamptzType):
        if isinstance(value, int) and not isinstance(value, bool):
            moment = _EPOCH + timedelta(microseconds=value)
            text = moment.strftime("%Y-%m-%d %H:%M:%S.%f")
            if isinstance(column_type, TimestamptzType):
                return f"TIMESTAMP '{text}+00:00'"
            return f"TIMESTAMP_NTZ '{text}'"
        return None
    if isinstance(column_type, BinaryType | FixedType) and isinstance(value, bytes):
        return f"X'{value.hex()}'"
    return None


__all__ = [
    "CompactionRun",
    "ExpireRun",
    "TablePlan",
    "column_reference",
    "compaction_options",
    "needs_manifest_rewrite",
    "partition_predicate",
    "plan_compaction",
    "plan_expiry",
    "plan_table",
    "sql_literal",
    "stale_metadata_files",
]
