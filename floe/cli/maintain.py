"""`floe maintain`: the maintenance worker (compaction, expiry, orphan removal) on the command line."""

from __future__ import annotations

import signal
import threading
from dataclasses import replace
from pathlib import Path
from types import FrameType

import click
from rich.table import Table
from rich.text import Text

from catalog.client import DEFAULT_URL
from catalog.pipelines.maintenance import DEFAULT_POLICY, parse_duration
from floe.cli.output import console, printable
from floe.cli.remote import cli_credentials, key_file_option
from floe.cli.services import (
    check_catalog,
    check_java,
    configure_logging,
    lower_cpu_priority,
    parse_shard_option,
    parse_spark_conf,
    serve_metrics,
    start_lease,
)
from floe.cli.settings import MAINTAIN_NICE, client_settings
from maintenance.worker import (
    DEFAULT_PARALLEL,
    MaintenanceWorker,
    PassResult,
    WorkerOptions,
)

DEFAULT_METRICS_PORT = 9465


def _duration(_ctx: click.Context, _param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    seconds = parse_duration(value)
    if seconds is None or seconds < 10:
        raise click.BadParameter(f"expected a duration of at least 10s like 30s, 10m or 1h; got {value!r}")
    return seconds


def print_results(results: list[PassResult]) -> None:
    """One row per table pass, then the errors of the failed ones in full."""
    table = Table(title="floe maintain")
    for column in ("table", "actions", "data files", "avg file KiB", "snapshots", "seconds", "error"):
        table.add_column(column)
    for result in results:
        before, after = result.before, result.after
        files = f"{before.data_files} → {after.data_files}" if before and after else "-"
        average = (
            f"{before.average_data_file_bytes / 1024:.0f} → {after.average_data_file_bytes / 1024:.0f}"
            if before and after
            else "-"
        )
        snapshots = f"{before.snapshots} → {after.snapshots}" if before and after else "-"
        actions = ", ".join(a.name + ("!" if a.error else "") for a in result.actions) or "-"
        errors = [result.error or "", *(f"{a.name}: {a.error}" for a in result.actions if a.error)]
        # Cells as Text: a name or error is never read as markup, its control characters are escapes.
        cells = [
            f"{result.table.warehouse}/{result.table}",
            actions,
            files,
            average,
            snapshots,
            f"{result.duration_seconds:.1f}",
            "; ".join(e for e in errors if e)[:200],
        ]
        table.add_row(*(Text(printable(cell)) for cell in cells))
    console.print(table)
    for result in results:
        if result.failed:
            console.print(Text(printable(result.summary())), highlight=False, soft_wrap=True)
            for action in result.actions:
                if action.error:
                    line = f"  {action.name}: {action.error}"
                    console.print(Text(printable(line)), highlight=False, soft_wrap=True)


@click.command("maintain")
@click.option("--url", envvar="FLOE_URL", default=DEFAULT_URL, show_default=True, help="floe's catalog URL.")
@click.option("--once", is_flag=True, help="One pass over every table (orphan removal included), then exit.")
@click.option(
    "--interval",
    callback=_duration,
    default=None,
    help="Default time between two passes over a table (floe.yaml's maintenance.interval overrides it; "
    f"default {DEFAULT_POLICY.interval // 60}m).",
)
@click.option("--warehouse", "warehouses", multiple=True, help="Only this warehouse (repeatable).")
@click.option(
    "--namespace", "namespaces", multiple=True, help="Only this namespace and those below it (repeatable)."
)
@click.option(
    "--master", envvar="FLOE_SPARK_MASTER", default="local[2]", show_default=True, help="Spark master."
)
@click.option("--driver-memory", default="1g", show_default=True)
@click.option("--spark-conf", multiple=True, help="Extra Spark setting KEY=VALUE (repeatable).")
@click.option("--metrics-port", type=int, default=DEFAULT_METRICS_PORT, show_default=True, help="0: off.")
@click.option("--metrics-host", default="127.0.0.1", show_default=True)
@click.option("--log-level", default="info", show_default=True)
@click.option(
    "--design",
    type=click.Choice(["inprocess", "spark"]),
    default="inprocess",
    show_default=True,
    help="inprocess: small append-only tables are compacted and expired without Spark (Spark starts only "
    "for a table that needs it); spark: every action through Spark (the previous design).",
)
@click.option(
    "--parallel",
    type=click.IntRange(1, 64),
    default=DEFAULT_PARALLEL,
    show_default=True,
    help="Tables maintained at once (each table by one at a time).",
)
@click.option(
    "--shard",
    default="0/1",
    show_default=True,
    callback=lambda _ctx, _param, value: parse_shard_option(value),
    help="i/n: maintain only the tables whose name hashes to shard i of n (run n instances, i = 0..n-1; "
    "the same split as floe ingest --shard, a dead-letter table with its table). auto: divide the tables "
    "among the running instances that say auto (leases in floe: a stopped instance's tables go to the "
    "others within about 30 s).",
)
@click.option(
    "--nice",
    envvar="FLOE_MAINTAIN_NICE",
    type=click.IntRange(0, 19),
    default=MAINTAIN_NICE,
    show_default=True,
    help="CPU priority below the rest of the machine (Unix niceness, Spark's JVM included): on a node "
    "shared with floe ingest or the catalog, maintenance takes the CPU they leave idle. 0: the same "
    "priority as they have.",
)
@key_file_option
def maintain_command(
    url: str,
    once: bool,
    interval: int | None,
    warehouses: tuple[str, ...],
    namespaces: tuple[str, ...],
    master: str,
    driver_memory: str,
    spark_conf: tuple[str, ...],
    metrics_port: int,
    metrics_host: str,
    log_level: str,
    design: str,
    parallel: int,
    shard: tuple[int, int] | None,
    nice: int,
    key_file: Path | None,
) -> None:
    """Keep every table fast and tidy: compact small files, rewrite manifests and delete files, expire
    snapshots, remove old metadata and orphan files, per floe.yaml's maintenance policies
    (FLOE_CLIENT_ID/SECRET or --key-file: an admin key, or a cluster's writer key for its own tables,
    such as the pipeline-maintain-<cluster> key floe up keeps in $FLOE_HOME/keys)."""
    from pyspark.sql import SparkSession

    from maintenance.metrics import GROUP_INSTANCES, REGISTRY
    from runtime.spark import CatalogConnection, spark_session

    configure_logging(log_level, quiet=("py4j", "httpx", "pyiceberg"))
    # Before any thread or the JVM starts: they inherit it.
    lower_cpu_priority(nice)
    client_id, client_secret = cli_credentials(key_file)
    default_warehouse = client_settings().warehouse_name
    options = WorkerOptions(
        url=url,
        client_id=client_id,
        client_secret=client_secret,
        warehouses=warehouses,
        namespaces=namespaces,
        default_warehouse=default_warehouse,
        defaults=DEFAULT_POLICY if interval is None else replace(DEFAULT_POLICY, interval=interval),
        in_process=design == "inprocess",
        parallel=parallel,
        shard=shard or (0, 1),
    )
    check_java()
    check_catalog(url, client_id, client_secret, "the maintenance")
    serve_metrics(REGISTRY, metrics_port, metrics_host)
    # In-process callers (tests) may already run a session: use it and leave it running.
    existing = SparkSession.getActiveSession()
    conf = {"spark.driver.memory": driver_memory, "spark.ui.showConsoleProgress": "false"}

    def start_spark() -> SparkSession:
        return spark_session(
            "floe-maintain",
            CatalogConnection(url, default_warehouse, client_id, client_secret),
            master=master,
            conf={**conf, **parse_spark_conf(spark_conf)},
        )

    # The in-process design starts Spark only when a table needs it (a large or upsert table).
    spark = existing or (start_spark if options.in_process else start_spark())
    lease = None
    if shard is None:
        filters = [*(f"warehouse:{w}" for w in warehouses), *(f"namespace:{n}" for n in namespaces)]
        lease = start_lease(
            url, client_id, client_secret, "maintain", filters, on_members=GROUP_INSTANCES.set
        )
    worker = MaintenanceWorker(spark, options, owns=lease.owns if lease is not None else None)
    try:
        if once:
            results = worker.run_once()
            print_results(results)
            if any(result.failed for result in results):
                raise SystemExit(1)
            return
        stop = threading.Event()

        def _stop(signum: int, _frame: FrameType | None) -> None:
            console.print(f"stopping maintenance (signal {signum})")
            stop.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        engine = f"Spark on {master}" + (" when a table needs it" if options.in_process else "")
        console.print(f"[bold]floe maintain[/bold]: {engine}, catalog {url}")
        worker.run_forever(stop)
    finally:
        if lease is not None:
            lease.stop()
        worker.close()
        if existing is None and worker.actions.started:
            worker.actions.spark.stop()
