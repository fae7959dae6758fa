"""The maintenance worker: every table floe serves, kept fast and tidy while ingestion writes.

A pass over one table reads its state (pyiceberg, metadata only), plans (`maintenance.planner`), runs
the actions — in this process for small append-only tables (`maintenance.inprocess`, pyarrow +
pyiceberg), through Spark otherwise (`maintenance.spark_actions`); every commit goes through floe; old
metadata and orphan files are deleted without Spark (`maintenance.orphans`) — then records what it did
in floe (`POST /management/v1/maintenance/passes`) and in its metrics. A failed action is recorded and
the pass goes on; a failed table does not stop the others.

Policies come from the applied floe.yaml (`GET /management/v1/pipeline`): a table's `maintenance:`
block over the top-level one over the built-in defaults (`--interval` sets the default interval; an
upsert table's defaults are `UPSERT_DEFAULTS`). Tables outside floe.yaml get the top-level block and
defaults.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from catalog.client import ClientError, FloeClient, Forbidden, RequestFailed
from catalog.metadata_files import metadata_folder
from catalog.pipelines import InvalidConfig, parse_config
from catalog.pipelines.maintenance import (
    DEFAULT_POLICY,
    MaintenanceConfig,
    MaintenancePolicy,
    defaults_for_mode,
    resolve_policy,
)
from maintenance import cpu_share, inprocess, manifest_cache, metrics, orphans, quick_check
from maintenance.inprocess import compacts_in_process
from maintenance.pass_result import ActionOutcome, PassResult
from maintenance.planner import (
    ORPHAN_SCAN_INTERVAL_SECONDS,
    CompactionRun,
    needs_manifest_rewrite,
    plan_expiry,
    plan_table,
    stale_metadata_files,
)
from maintenance.pyiceberg_rewrite import FloeRestCatalog
from maintenance.shards import maintenance_shard_key
from maintenance.spark_actions import SparkActions, TableRef, describe_error, is_commit_conflict
from maintenance.table_state import CommittedTable, TableState, read_table_state
from runtime.shards import shard_of
from runtime.spark import CatalogConnection

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
# How often a long-running worker looks for new tables and policy changes, at the latest.
DISCOVERY_SECONDS = 60.0
# Runs of an action that keeps losing commit races before the pass records it as failed.
CONFLICT_ATTEMPTS = 3
# Tables maintained at once by default: on a busy 2-core node two were no faster than one and ingestion
# was less fresh meanwhile (benchmarks/results/many-tables-maintenance.md); `--parallel` for a node with
# cores to spare or a remote store whose round trips a pass waits on.
DEFAULT_PARALLEL = 1


@dataclass(frozen=True)
class WorkerOptions:
    url: str
    client_id: str
    client_secret: str
    # Warehouses to maintain; empty: the default one, the pipeline's and every cluster's.
    warehouses: tuple[str, ...] = ()
    # Only these namespaces (dotted, with the namespaces below them); empty: all.
    namespaces: tuple[str, ...] = ()
    default_warehouse: str = "default"
    defaults: MaintenancePolicy = DEFAULT_POLICY
    # Small append-only tables' compaction, manifests, expiry and properties without Spark
    # (`maintenance.inprocess`); False: every action through Spark (the previous design).
    in_process: bool = True
    in_process_max_bytes: int = inprocess.MAX_BYTES
    # Tables maintained at once (threads; each table by one of them at a time).
    parallel: int = DEFAULT_PARALLEL
    # A table whose metadata shows nothing to compact, expire or merge is not read further
    # (`maintenance.quick_check`); False: every pass reads every manifest (the previous design).
    quick_check: bool = True
    # This instance's share of the tables (`floe maintain --shard i/n`): index i of n, by the same
    # stable hash as `floe ingest --shard`, a dead-letter table with its table (`runtime.shards`).
    shard: tuple[int, int] = (0, 1)
    # At most this share of a core per visiting thread (`maintenance.cpu_share`, `floe up`); None: no limit.
    cpu_share: float | None = None


@dataclass(frozen=True)
class TableBlock:
    """What floe.yaml says of one table's maintenance: its own block and its mode."""

    maintenance: MaintenanceConfig | None = None
    mode: str = "append"


@dataclass(frozen=True)
class MaintainedTable:
    warehouse: str
    namespace: tuple[str, ...]
    name: str
    policy: MaintenancePolicy

    @property
    def key(self) -> tuple[str, tuple[str, ...], str]:
        return self.warehouse, self.namespace, self.name

    def __str__(self) -> str:
        return ".".join((*self.namespace, self.name))


class MaintenanceWorker:
    """Maintains every table it can see, on one Spark session (or a function starting one when an
    action first needs Spark)."""

    def __init__(
        self,
        spark: SparkSession | Callable[[], SparkSession],
        options: WorkerOptions,
        control: FloeClient | None = None,
        owns: Callable[[str], bool] | None = None,
    ) -> None:
        self.options = options
        # Whether a table (`maintenance_shard_key`) is this instance's: its lease's (`--shard auto`,
        # `runtime.leases`), else its static shard's (`--shard i/n`).
        index, count = options.shard
        self._owns = owns or (lambda key: shard_of(key, count) == index)
        self.actions = SparkActions(spark)
        self.control = control or FloeClient(
            options.url, options.client_id, options.client_secret, purpose="the maintenance"
        )
        # One catalog client per thread and warehouse (a pass's HTTP session is its own).
        self._local = threading.local()
        # What the last full pass over each table left (`quick_check.Memo`).
        self._memos: dict[tuple[str, tuple[str, ...], str], quick_check.Memo] = {}
        self._next_due: dict[tuple[str, tuple[str, ...], str], float] = {}
        self._last_orphan_scan: dict[tuple[str, tuple[str, ...], str], float] = {}

    # -- what to maintain -------------------------------------------------------------------------

    def _connection(self, warehouse: str) -> CatalogConnection:
        o = self.options
        return CatalogConnection(o.url, warehouse, o.client_id, o.client_secret)

    @property
    def _catalogs(self) -> dict[str, FloeRestCatalog]:
        catalogs: dict[str, FloeRestCatalog] | None = getattr(self._local, "catalogs", None)
        if catalogs is None:
            catalogs = self._local.catalogs = {}
        return catalogs

    def _catalog(self, warehouse: str) -> FloeRestCatalog:
        catalog = self._catalogs.get(warehouse)
        if catalog is None:
            # Metadata is read where Spark reads it: the same storage endpoint (pyiceberg also sends
            # every `header.*` property as a request header).
            headers = {f"header.{key}": value for key, value in self._connection(warehouse).headers.items()}
            catalog = FloeRestCatalog(
                f"floe-{warehouse}",
                uri=self.options.url,
                credential=f"{self.options.client_id}:{self.options.client_secret}",
                warehouse=warehouse,
                **headers,
            )
            self._catalogs[warehouse] = catalog
        return catalog

    def _policies(
        self,
    ) -> tuple[MaintenanceConfig | None, dict[tuple[str, tuple[str, ...], str], TableBlock], list[str]]:
        """The top-level block, each pipeline table's own block and mode, and the pipeline's warehouses."""
        try:
            pipeline = self.control.pipeline()
        except Forbidden:  # a key that may not read the pipeline: default policies
            return None, {}, []
        except ClientError as exc:
            log.warning("cannot read the pipeline (default policies apply): %s", exc)
            return None, {}, []
        if pipeline is None:
            return None, {}, []
        try:
            config = parse_config(pipeline.config)
        except InvalidConfig as exc:
            log.warning("the applied pipeline does not parse (default policies apply): %s", exc)
            return None, {}, []
        blocks: dict[tuple[str, tuple[str, ...], str], TableBlock] = {}
        warehouses = sorted({t.warehouse for t in pipeline.tables})
        for entry in pipeline.tables:
            # A pipeline table's namespace is its source cluster's name: one level.
            namespace = (entry.namespace,)
            try:
                table = config.table(entry.namespace, entry.table)
            except KeyError:
                continue
            blocks[(entry.warehouse, namespace, entry.table)] = TableBlock(
                table.maintenance, table.table_mode
            )
            # The dead-letter table is appended to, whatever the table's mode.
            blocks[(entry.warehouse, namespace, entry.dlq_table)] = TableBlock(table.maintenance)
        return config.maintenance, blocks, warehouses

    def _warehouses(self, from_pipeline: list[str]) -> list[str]:
        if self.options.warehouses:
            return list(self.options.warehouses)
        found = {self.options.default_warehouse, *from_pipeline}
        try:
            found.update(cluster.warehouse for cluster in self.control.clusters())
        except RequestFailed:  # only administrators list clusters; others maintain what they can see
            pass
        except ClientError as exc:
            log.warning("cannot list the clusters' warehouses: %s", exc)
        return sorted(found)

    def _wanted(self, namespace: tuple[str, ...]) -> bool:
        if not self.options.namespaces:
            return True
        dotted = ".".join(namespace)
        return any(dotted == n or dotted.startswith(n + ".") for n in self.options.namespaces)

    def _namespaces(
        self, catalog: FloeRestCatalog, parent: tuple[str, ...] = ()
    ) -> Iterable[tuple[str, ...]]:
        for namespace in catalog.list_namespaces(parent):
            yield tuple(namespace)
            yield from self._namespaces(catalog, tuple(namespace))

    def _in_shard(self, namespace: tuple[str, ...], name: str) -> bool:
        return self._owns(maintenance_shard_key(namespace, name))

    def discover(self) -> list[MaintainedTable]:
        """Every table to maintain, with its policy."""
        top_level, blocks, pipeline_warehouses = self._policies()
        tables: list[MaintainedTable] = []
        for warehouse in self._warehouses(pipeline_warehouses):
            try:
                catalog = self._catalog(warehouse)
                for namespace in self._namespaces(catalog):
                    if not self._wanted(namespace):
                        continue
                    for ident in catalog.list_tables(namespace):
                        name = ident[-1]
                        if not self._in_shard(namespace, name):
                            continue
                        block = blocks.get((warehouse, namespace, name), TableBlock())
                        policy = resolve_policy(
                            top_level, block.maintenance, defaults_for_mode(self.options.defaults, block.mode)
                        )
                        tables.append(MaintainedTable(warehouse, namespace, name, policy))
            except Exception as exc:
                self._catalogs.pop(warehouse, None)
                log.warning("cannot list the tables of warehouse %s: %s", warehouse, describe_error(exc))
        return tables

    # -- one table --------------------------------------------------------------------------------

    def run_action(
        self, result: PassResult, name: str, action: Callable[[], dict[str, Any]], **context: Any
    ) -> bool:
        """Run one action into `result`: again (up to `CONFLICT_ATTEMPTS` runs) when it loses a commit
        race, recorded as failed when it fails otherwise. True when it succeeded."""
        started = time.monotonic()
        outcome = ActionOutcome(name, 0.0, dict(context))
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            try:
                outcome.result.update(action())
            except Exception as exc:
                outcome.error = describe_error(exc)
                if attempt < CONFLICT_ATTEMPTS and is_commit_conflict(exc):
                    # Lost a race with another commit (ingestion): plan again on the table as it is now.
                    log.info(
                        "%s: %s lost a commit race, running it again: %s", result.table, name, outcome.error
                    )
                    continue
                log.warning("%s: %s failed: %s", result.table, name, outcome.error)
            else:
                outcome.error = None
            if attempt > 1:
                outcome.result["attempts"] = attempt
            break
        outcome.duration_seconds = time.monotonic() - started
        result.actions.append(outcome)
        metrics.observe_action(result.table.warehouse, str(result.table), name, outcome.error is None)
        return outcome.error is None

    def _load_table(self, table: MaintainedTable) -> Table:
        loaded: Table = self._catalog(table.warehouse).load_table((*table.namespace, table.name))
        return loaded

    def maintain(self, table: MaintainedTable, *, scan_orphans: bool = True) -> PassResult:
        """One pass over `table`; never raises (failures are in the result)."""
        result = PassResult(table, datetime.now(UTC))
        started = time.monotonic()
        try:
            with manifest_cache.scope() as cache:
                self._maintain(table, result, scan_orphans=scan_orphans, cache=cache)
        except NoSuchTableError as exc:
            result.error = f"the table is gone: {exc}"
        except Exception as exc:
            result.error = describe_error(exc)
            log.warning("%s: maintenance failed: %s", table, result.error)
        result.duration_seconds = time.monotonic() - started
        return result

    def _maintain(
        self,
        table: MaintainedTable,
        result: PassResult,
        *,
        scan_orphans: bool,
        cache: manifest_cache.Scope | None = None,
    ) -> None:
        policy = table.policy
        # Named, not registered: Spark starts only when an action needs it.
        spark_catalog = self.actions.catalog_name(self._connection(table.warehouse))
        ref = TableRef(spark_catalog, table.namespace, table.name)
        committed = CommittedTable(partial(self._load_table, table))
        loaded = committed.table
        if cache is not None:
            cache.owns(loaded.metadata.location)
        if self.options.quick_check and self._nothing_to_do(table, loaded, result, scan_orphans=scan_orphans):
            return
        state = read_table_state(loaded, policy.target_file_size_bytes)
        result.before = state.stats
        plan = plan_table(
            state, policy, int(time.time() * 1000), functions_catalog=spark_catalog, scan_orphans=scan_orphans
        )
        here = self.options.in_process
        if here and compacts_in_process(state, plan.compactions, self.options.in_process_max_bytes):
            runs = plan.compactions
            self._run_here(
                result,
                "rewrite_data_files",
                committed,
                lambda t: inprocess.compact(t, runs, policy.target_file_size_bytes),
                kind="+".join(sorted({run.kind for run in runs})),
                partitions=sum(len(run.partitions) for run in runs),
                small_files=sum(run.small_files for run in runs),
            )
        elif plan.compactions:
            self._compact_with_spark(result, ref, plan.compactions)
            committed.current = False
        if plan.rewrite_position_deletes:
            self.run_action(
                result,
                "rewrite_position_delete_files",
                lambda: self.actions.rewrite_position_delete_files(ref),
            )
            committed.current = False
        if plan.set_properties:
            props = plan.set_properties
            if here:
                action = partial(inprocess.set_properties, properties=props)
                self._run_here(result, "set_properties", committed, action)
            else:
                self.run_action(result, "set_properties", lambda: self.actions.set_properties(ref, props))
                committed.current = False
        # Compaction changed the manifests and snapshots: decide on the table as it is now.
        current = state
        if result.actions:
            current = read_table_state(committed.get(), policy.target_file_size_bytes, with_files=False)
        # In-process compaction commits its files with the data manifests merged into one, so the
        # after-compaction rule (two small manifests are enough: Spark's compaction leaves its files in
        # manifests of a few entries) does not apply: what ingestion appended since waits for the usual
        # threshold, rather than a second commit on every busy table at every visit.
        merged = any(
            a.name == "rewrite_data_files" and a.error is None and a.result.get("engine") == "in-process"
            for a in result.actions
        )
        if needs_manifest_rewrite(current.manifests, compacted=bool(plan.compactions) and not merged):
            # Without Spark when the data manifests are all of the default spec and there is no delete.
            simple = all(m.content == 0 and m.spec_id == current.default_spec_id for m in current.manifests)
            if here and simple:
                self._run_here(result, "rewrite_manifests", committed, inprocess.rewrite_manifests)
            else:
                self.run_action(result, "rewrite_manifests", lambda: self.actions.rewrite_manifests(ref))
                committed.current = False
            current = read_table_state(committed.get(), policy.target_file_size_bytes, with_files=False)
        expire = plan_expiry(current, policy, int(time.time() * 1000))
        if expire is not None:
            context: dict[str, Any] = {
                "retain_last": expire.retain_last,
                "older_than": datetime.fromtimestamp(expire.older_than_ms / 1000, UTC).isoformat(),
            }
            if here:
                action = partial(inprocess.expire_snapshots, run=expire)
                self._run_here(result, "expire_snapshots", committed, action, **context)
            else:
                self.run_action(
                    result, "expire_snapshots", lambda: self.actions.expire_snapshots(ref, expire), **context
                )
                committed.current = False
            current = read_table_state(committed.get(), policy.target_file_size_bytes, with_files=False)
        loaded = committed.get()
        self.run_action(
            result, "remove_old_metadata_files", lambda: self._remove_old_metadata(loaded, current)
        )
        if plan.remove_orphans_older_than_ms is not None:
            older_than = plan.remove_orphans_older_than_ms
            self.run_action(
                result,
                "remove_orphan_files",
                lambda: self._remove_orphans(table, older_than, loaded),
                older_than=datetime.fromtimestamp(older_than / 1000, UTC).isoformat(),
            )
        # The table as this pass left it (its manifests mostly read already, `manifest_cache`).
        after = read_table_state(committed.get(), policy.target_file_size_bytes)
        result.after = after.stats
        self._memos[table.key] = quick_check.memo_of(after, policy.target_file_size_bytes)

    def _run_here(
        self,
        result: PassResult,
        name: str,
        committed: CommittedTable,
        action: Callable[[Table], dict[str, Any]],
        **context: Any,
    ) -> bool:
        """`run_action` of an in-process action on the table as last committed (loaded afresh for a
        run after a lost race); when it succeeds, the table it committed through is current."""
        done = self.run_action(result, name, lambda: action(committed.for_action()), **context)
        committed.current = done
        return done

    def _nothing_to_do(
        self, table: MaintainedTable, loaded: Table, result: PassResult, *, scan_orphans: bool
    ) -> bool:
        """When the table's metadata (`loaded`) shows nothing to compact, expire, merge or set: only old
        metadata and (when due) orphan files are removed, and True."""
        now_ms = int(time.time() * 1000)
        stats = quick_check.nothing_to_do(loaded, table.policy, now_ms, self._memos.get(table.key))
        if stats is None:
            return False
        result.before = result.after = stats
        state = read_table_state(loaded, table.policy.target_file_size_bytes, with_manifests=False)
        self.run_action(
            result,
            "remove_old_metadata_files",
            lambda: self._remove_old_metadata(loaded, state),
            quick_check="nothing to compact, expire or merge (table metadata)",
        )
        if scan_orphans and state.current_snapshot_id is not None:
            older_than = now_ms - table.policy.orphan_file_age * 1000
            self.run_action(
                result,
                "remove_orphan_files",
                lambda: self._remove_orphans(table, older_than, loaded),
                older_than=datetime.fromtimestamp(older_than / 1000, UTC).isoformat(),
            )
        return True

    def _compact_with_spark(self, result: PassResult, ref: TableRef, runs: list[CompactionRun]) -> None:
        for run in runs:
            context: dict[str, Any] = {
                "kind": run.kind,
                "partitions": len(run.partitions),
                "small_files": run.small_files,
            }
            if run.where:
                context["where"] = run.where
            done = self.run_action(
                result, "rewrite_data_files", partial(self.actions.rewrite_data_files, ref, run), **context
            )
            outcome = result.actions[-1].result
            if done and not outcome.get("rewritten_data_files_count"):
                # With partial progress Iceberg drops a file group whose commit lost to a writer's
                # (an upsert merging into the same files) and reports nothing: say so in the record.
                outcome["note"] = (
                    "no file rewritten: every file group lost its commit to a concurrent writer, or none "
                    "needed rewriting; the next pass tries again"
                )

    def _remove_old_metadata(self, loaded: Table, state: TableState) -> dict[str, Any]:
        folder = metadata_folder(state.location, state.properties)
        listed = [f.location for f in orphans.list_files(loaded.io, folder + "/")]
        stale = stale_metadata_files(listed, state)
        return {"metadata_files_removed": orphans.delete_files(loaded.io, stale)}

    def _remove_orphans(
        self, table: MaintainedTable, older_than_ms: int, loaded: Table | None = None
    ) -> dict[str, Any]:
        """Delete the table's unreferenced files older than `older_than_ms` (no Spark job): list its
        location (`loaded`'s, as loaded last), and only when some file is old enough load it again and
        read what every snapshot references."""
        loaded = loaded or self._load_table(table)
        location = loaded.metadata.location
        listed = orphans.list_files(loaded.io, location)
        partition_names = orphans.partition_names(loaded.metadata)
        candidates = orphans.orphan_candidates(listed, location, older_than_ms, partition_names)
        outcome: dict[str, Any] = {"files_listed": len(listed), "orphan_candidates": len(candidates)}
        if not candidates:
            return outcome | {"orphan_files_removed": 0}
        # Metadata read after the listing: a file a commit added meanwhile is referenced by it.
        loaded = self._load_table(table)
        referenced = orphans.referenced_files(loaded)
        # Confined to the location the table has now, too (a set-location in between).
        found = orphans.orphan_candidates(
            orphans.orphans(candidates, referenced), loaded.metadata.location, older_than_ms, partition_names
        )
        removed = [f.location for f in found]
        orphans.delete_files(loaded.io, removed)
        return outcome | {
            "referenced_files": len(referenced),
            "orphan_files_removed": len(removed),
            "removed": removed[: orphans.ORPHAN_SAMPLE],
        }

    # -- passes -----------------------------------------------------------------------------------

    def _finish(self, result: PassResult) -> None:
        table = result.table
        ended = time.time()
        if result.after is not None:
            metrics.observe_table(table.warehouse, str(table), result.after)
        metrics.observe_pass(table.warehouse, str(table), ended, result.duration_seconds, result.failed)
        try:
            self.control.record_pass(result.to_record())
        except ClientError as exc:
            log.warning("%s: %s", table, exc)
        (log.warning if result.failed else log.info)("%s", result.summary())

    def _visit(
        self, tables: list[MaintainedTable], visit: Callable[[MaintainedTable], PassResult | None]
    ) -> list[PassResult]:
        """`visit` every table, `options.parallel` at a time; each result recorded as it ends, in
        the order of `tables`."""
        if self.options.parallel <= 1 or len(tables) <= 1:
            found = [visit(table) for table in tables]
        else:
            with ThreadPoolExecutor(self.options.parallel, thread_name_prefix="maintain") as pool:
                found = list(pool.map(visit, tables))
        return [result for result in found if result is not None]

    def run_once(self, tables: list[MaintainedTable] | None = None) -> list[PassResult]:
        """One pass over every table (orphan removal included)."""

        def visit(table: MaintainedTable) -> PassResult:
            result = self.maintain(table)
            self._finish(result)
            return result

        return self._visit(self.discover() if tables is None else tables, visit)

    def run_forever(self, stop: threading.Event) -> None:
        """Maintain each table every `interval` of its policy until `stop` is set."""
        while not stop.is_set():
            tables = self.discover()
            now = time.monotonic()
            due = [t for t in tables if self._next_due.get(t.key, 0.0) <= now]
            due.sort(key=lambda t: self._next_due.get(t.key, 0.0))

            def visit(table: MaintainedTable) -> PassResult | None:
                if stop.is_set():
                    return None
                started = time.monotonic()
                last_scan = self._last_orphan_scan.get(table.key)
                scan = last_scan is None or started - last_scan >= ORPHAN_SCAN_INTERVAL_SECONDS
                with cpu_share.held_to(self.options.cpu_share, stop):
                    result = self.maintain(table, scan_orphans=scan)
                    if scan:
                        self._last_orphan_scan[table.key] = started
                    self._next_due[table.key] = started + table.policy.interval
                    self._finish(result)
                return result

            self._visit(due, visit)
            known = {t.key for t in tables}
            upcoming = [due_at for key, due_at in self._next_due.items() if key in known]
            wait = min([*upcoming, time.monotonic() + DISCOVERY_SECONDS]) - time.monotonic()
            stop.wait(max(1.0, wait))

    def close(self) -> None:
        self.control.close()


__all__ = [
    "ActionOutcome",
    "MaintainedTable",
    "MaintenanceWorker",
    "PassResult",
    "WorkerOptions",
]
