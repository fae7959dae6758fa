"""The maintenance actions, run by Spark against floe's REST catalog (every commit goes through floe).

Iceberg's Spark procedures do the work (`rewrite_data_files`, `rewrite_position_delete_files`,
`rewrite_manifests`, `expire_snapshots`); orphan and old metadata removal need no Spark job
(`maintenance.orphans`). Iceberg retries a commit that loses a race
(with ingestion, say) on the table's fresh metadata; `rewrite_data_files` with partial progress commits
file group by file group, so a group that still fails costs only itself. A race Iceberg gives up on
(`is_commit_conflict`) is retried by the worker, which runs the whole action again.

The worker binds its own Spark catalog per floe URL and warehouse (`floe_<hash>`), so one Spark session
can maintain several warehouses (and, in tests, several floe servers).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from maintenance.planner import CompactionRun, ExpireRun, quote_identifier
from runtime.spark import CatalogConnection

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
MAX_ERROR_CHARS = 4_000


def describe_error(exc: BaseException) -> str:
    """A short, readable error: the Java exception's message rather than its Python wrapper's."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else f"{type(exc).__name__}: {exc}"
    first = text.strip().split("\n\tat ", 1)[0].strip()
    return first[:MAX_ERROR_CHARS]


# Iceberg's exceptions for a commit that lost a race it could not resolve by itself: the action,
# re-planned on the table as it is now, usually goes through.
CONFLICT_EXCEPTIONS = (
    "org.apache.iceberg.exceptions.CommitFailedException",
    "org.apache.iceberg.exceptions.ValidationException",
)


def is_commit_conflict(exc: BaseException) -> bool:
    """Whether `exc` is a commit that lost a race with another writer (ingestion, say), in Spark or in
    this process (pyiceberg, `maintenance.inprocess`, once its own retries are spent).

    `RewriteManifests` is the usual case: an append drops manifests that list only deleted files, and
    a manifest rewrite planned before that append then fails validation instead of retrying."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    if isinstance(exc, CommitFailedException | ValidationException):
        return True
    return describe_error(exc).startswith(CONFLICT_EXCEPTIONS)


def sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_map(options: dict[str, str]) -> str:
    return "map(" + ", ".join(f"{sql_string(k)}, {sql_string(v)}" for k, v in options.items()) + ")"


def _row(row: Any) -> dict[str, Any]:
    return {key: value for key, value in row.asDict().items() if isinstance(value, int | float | str | bool)}


@dataclass(frozen=True)
class TableRef:
    """A table as Spark names it: its catalog, namespace levels and name."""

    catalog: str
    namespace: tuple[str, ...]
    name: str

    @property
    def sql(self) -> str:
        return ".".join(quote_identifier(part) for part in (self.catalog, *self.namespace, self.name))

    def __str__(self) -> str:
        return ".".join((*self.namespace, self.name))


class SparkActions:
    """Maintenance actions on one Spark session: the session itself, or a function that starts it, called
    when an action first needs Spark (a pass over small tables may never need it)."""

    def __init__(self, spark: SparkSession | Callable[[], SparkSession]) -> None:
        self._spark = spark
        self._catalogs: dict[tuple[str, str, str], str] = {}
        # Catalogs named but not yet registered on the session (registered when first used).
        self._pending: dict[str, CatalogConnection] = {}
        # Tables are maintained in parallel: the session starts, and a catalog registers, once.
        self._lock = threading.RLock()

    @property
    def started(self) -> bool:
        return not callable(self._spark)

    @property
    def spark(self) -> SparkSession:
        with self._lock:
            if callable(self._spark):
                log.info("starting Spark for the maintenance actions that need it")
                self._spark = self._spark()
            return self._spark

    def catalog_name(self, connection: CatalogConnection) -> str:
        """The Spark catalog for `connection`, registered on the session before an action uses it."""
        key = (connection.uri.rstrip("/"), connection.warehouse, connection.client_id)
        with self._lock:
            name = self._catalogs.get(key)
            if name is None:
                name = "floe_" + hashlib.sha1("|".join(key).encode()).hexdigest()[:10]
                self._catalogs[key] = name
                self._pending[name] = connection
            return name

    def _register(self, name: str) -> None:
        with self._lock:
            connection = self._pending.pop(name, None)
            if connection is not None:
                for setting, value in connection.spark_properties(name).items():
                    self.spark.conf.set(setting, value)

    def catalog(self, connection: CatalogConnection) -> str:
        """The Spark catalog bound to `connection` (registered now)."""
        name = self.catalog_name(connection)
        self._register(name)
        return name

    def _call(self, procedure: str, table: TableRef, arguments: str = "") -> list[dict[str, Any]]:
        self._register(table.catalog)
        extra = f", {arguments}" if arguments else ""
        target = quote_identifier(table.catalog)
        statement = f"CALL {target}.system.{procedure}(table => {sql_string(table.sql)}{extra})"
        log.debug("%s", statement)
        return [_row(row) for row in self.spark.sql(statement).collect()]

    def rewrite_data_files(self, table: TableRef, run: CompactionRun) -> dict[str, Any]:
        arguments = f"strategy => 'binpack', options => {sql_map(run.options)}"
        if run.where:
            arguments += f", where => {sql_string(run.where)}"
        rows = self._call("rewrite_data_files", table, arguments)
        return rows[0] if rows else {}

    def rewrite_position_delete_files(self, table: TableRef) -> dict[str, Any]:
        # Delete files are small: rewriting all of them is cheap and drops every dangling one.
        options = {"rewrite-all": "true", "partial-progress.enabled": "true"}
        rows = self._call("rewrite_position_delete_files", table, f"options => {sql_map(options)}")
        return rows[0] if rows else {}

    def rewrite_manifests(self, table: TableRef) -> dict[str, Any]:
        rows = self._call("rewrite_manifests", table)
        return rows[0] if rows else {}

    def expire_snapshots(self, table: TableRef, run: ExpireRun) -> dict[str, Any]:
        arguments = f"older_than => timestamp_millis({run.older_than_ms}L), retain_last => {run.retain_last}"
        rows = self._call("expire_snapshots", table, arguments)
        return rows[0] if rows else {}

    def set_properties(self, table: TableRef, properties: dict[str, str]) -> dict[str, Any]:
        pairs = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in sorted(properties.items()))
        self._register(table.catalog)
        self.spark.sql(f"ALTER TABLE {table.sql} SET TBLPROPERTIES ({pairs})")
        return {"properties": ",".join(sorted(properties))}


__all__ = ["SparkActions", "TableRef", "describe_error", "is_commit_conflict", "sql_map", "sql_string"]
