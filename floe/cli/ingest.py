"""`floe ingest`: the ingestion service (Kafka → Iceberg through floe), wired and run in the foreground."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import click

from catalog.client import DEFAULT_URL, FloeClient
from catalog.collector import full_collection_pauses, keep_full_collections_short
from catalog.pipelines.table_config import MAX_COMMIT_INTERVAL_SECONDS, MIN_COMMIT_INTERVAL_SECONDS
from floe.cli.output import console
from floe.cli.remote import cli_credentials, key_file_option
from floe.cli.services import (
    check_catalog,
    check_java,
    configure_logging,
    parse_shard_option,
    parse_spark_conf,
    serve_metrics,
    start_lease,
)
from floe.cli.settings import INGEST_METRICS_PORT, client_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ingest.ingest_table import IngestTable
    from ingest.service import CatalogAccess

DEFAULT_METRICS_PORT = INGEST_METRICS_PORT


def run_ingest(
    url: str,
    client_id: str,
    client_secret: str,
    *,
    master: str = "local[*]",
    commit_interval: float | None = None,
    clusters: tuple[str, ...] = (),
    metrics_port: int = DEFAULT_METRICS_PORT,
    metrics_host: str = "127.0.0.1",
    max_records_per_batch: int = 500_000,
    poll_interval: float = 5.0,
    driver_memory: str = "2g",
    spark_conf: dict[str, str] | None = None,
    state_dir: Path | None = None,
    spark: SparkSession | None = None,
    create_topics_at: frozenset[str] = frozenset(),
    on_started: Callable[[list[IngestTable]], None] | None = None,
    warm_up: bool = False,
    access_for: Callable[[str], CatalogAccess] | None = None,
    shard: tuple[int, int] | None = (0, 1),
) -> None:
    """Run the ingestion service in the foreground until SIGINT/SIGTERM. A `spark` session passed in is
    used and left running (`floe up` shares it with maintenance); else one is started and stopped. With
    `access_for`, each cluster's tables are written with the key it gives (`floe up`'s pipeline keys)
    and `client_id` only reads the pipeline. `shard` None: the tables are divided among the live
    instances of this instance's group (`--shard auto`, `runtime.leases`)."""
    from ingest.kafka_connection import PresentedCertificates
    from ingest.metrics import GROUP_INSTANCES, PROBLEMS, REGISTRY
    from ingest.service import IngestOptions, IngestService
    from ingest.tables import PipelineTables
    from runtime.spark import CatalogConnection, spark_session

    check_java()
    check_catalog(url, client_id, client_secret, "the ingestion")
    catalog = FloeClient(url, client_id, client_secret, purpose="the ingestion")
    warehouse = client_settings().warehouse_name
    serve_metrics(REGISTRY, metrics_port, metrics_host)
    owns_spark = spark is None
    session: SparkSession | Callable[[], SparkSession]
    if spark is None:
        conf = {"spark.driver.memory": driver_memory, **(spark_conf or {})}

        def start_spark() -> SparkSession:
            started = spark_session(
                "floe-ingest",
                CatalogConnection(url, warehouse, client_id, client_secret),
                master=master,
                conf=conf,
            )
            console.print(f"[bold]floe ingest[/bold]: Spark {started.version} on {master}", highlight=False)
            return started

        session = start_spark
    else:
        session = spark
    lease = None
    if shard is None:
        lease = start_lease(url, client_id, client_secret, "ingest", clusters, on_members=GROUP_INSTANCES.set)
    # Kept between polls: brokers' certificates for tls_insecure_skip_verify are fetched once in a while.
    certificates = PresentedCertificates(os.environ)
    service = IngestService(
        session,
        catalog,
        CatalogConnection(url, warehouse, client_id, client_secret),
        PipelineTables(warehouse, problems=PROBLEMS, presented_certificates=certificates),
        IngestOptions(
            commit_interval=commit_interval,
            max_records_per_batch=max_records_per_batch,
            poll_interval=poll_interval,
            clusters=frozenset(clusters),
            state_dir=state_dir,
            create_topics_at=create_topics_at,
            warm_up=warm_up,
            shard=shard or (0, 1),
        ),
        access_for=access_for,
        owns=lease.owns if lease is not None else None,
    )

    def _stop(signum: int, _frame: FrameType | None) -> None:
        console.print(f"stopping ingestion (signal {signum})")
        service.stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    console.print(f"[bold]floe ingest[/bold]: catalog {url}", highlight=False)
    try:
        service.run(on_started)
    finally:
        if lease is not None:
            lease.stop()
        if owns_spark and service.spark_started:
            service.spark.stop()
        catalog.close()


def check_commit_interval(seconds: float | None) -> None:
    """--commit-interval follows floe.yaml's rule for commit_interval_seconds (one rule for both)."""
    low, high = MIN_COMMIT_INTERVAL_SECONDS, MAX_COMMIT_INTERVAL_SECONDS
    if seconds is not None and not low <= seconds <= high:
        message = f"must be between {low} and {high}; got {seconds:g}"
        raise click.BadParameter(message, param_hint="--commit-interval")


@click.command("ingest")
@click.option("--url", envvar="FLOE_URL", default=DEFAULT_URL, show_default=True, help="floe's catalog URL.")
@click.option(
    "--master",
    envvar="FLOE_SPARK_MASTER",
    default="local[*]",
    show_default=True,
    help="Spark master: local[N], spark://host:7077, k8s://…",
)
@click.option(
    "--commit-interval",
    type=float,
    default=None,
    help="Seconds between commits for every table (overrides floe.yaml's commit_interval_seconds, "
    "default 2). Shorter: fresher tables, more small files and snapshots for maintenance to compact.",
)
@click.option("--cluster", "clusters", multiple=True, help="Only ingest this source cluster (repeatable).")
@click.option("--metrics-port", type=int, default=DEFAULT_METRICS_PORT, show_default=True, help="0: off.")
@click.option("--metrics-host", default="127.0.0.1", show_default=True)
@click.option("--max-records-per-batch", type=int, default=500_000, show_default=True)
@click.option(
    "--poll-interval", type=float, default=5.0, show_default=True, help="Seconds between pipeline checks."
)
@click.option("--driver-memory", default="2g", show_default=True)
@click.option("--spark-conf", multiple=True, help="Extra Spark setting KEY=VALUE (repeatable).")
@click.option("--state-dir", type=click.Path(path_type=Path), default=None, help="Spark scratch folder.")
@click.option(
    "--shard",
    default="0/1",
    show_default=True,
    callback=lambda _ctx, _param, value: parse_shard_option(value),
    help="i/n: ingest only the tables whose name hashes to shard i of n (run n instances, i = 0..n-1). "
    "auto: divide the tables among the running instances that say auto (leases in floe: a stopped or "
    "killed instance's tables are taken over within about 30 s).",
)
@click.option("--log-level", default="info", show_default=True)
@key_file_option
def ingest_command(
    url: str,
    master: str,
    commit_interval: float | None,
    clusters: tuple[str, ...],
    metrics_port: int,
    metrics_host: str,
    max_records_per_batch: int,
    poll_interval: float,
    driver_memory: str,
    spark_conf: tuple[str, ...],
    state_dir: Path | None,
    shard: tuple[int, int] | None,
    log_level: str,
    key_file: Path | None,
) -> None:
    """Ingest every table of the applied floe.yaml: Kafka → Iceberg through floe (FLOE_CLIENT_ID/SECRET
    or --key-file: an admin key, or a writer key of the cluster it ingests, such as the
    pipeline-ingest-<cluster> key floe up keeps in $FLOE_HOME/keys)."""
    check_commit_interval(commit_interval)
    configure_logging(log_level)
    client_id, client_secret = cli_credentials(key_file)
    # A long-running process whose appenders churn long-lived objects: full collections kept short.
    from ingest.metrics import REGISTRY

    keep_full_collections_short(pauses=full_collection_pauses(REGISTRY))
    run_ingest(
        url,
        client_id,
        client_secret,
        master=master,
        commit_interval=commit_interval,
        clusters=clusters,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        max_records_per_batch=max_records_per_batch,
        poll_interval=poll_interval,
        driver_memory=driver_memory,
        spark_conf=parse_spark_conf(spark_conf),
        state_dir=state_dir,
        shard=shard,
    )
