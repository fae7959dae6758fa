"""`floe ingest`, `floe status` and `floe up` (registered on the `floe` command line in catalog/cli.py)."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import click
import httpx
from rich.console import Console
from rich.table import Table

from catalog.admin_client import DEFAULT_URL, ClientError, admin_credentials

console = Console(stderr=True)
DEFAULT_METRICS_PORT = 9464


def cli_credentials() -> tuple[str, str]:
    """The admin credentials (`admin_credentials`), or a command-line error saying what is missing."""
    try:
        return admin_credentials()
    except ClientError as exc:
        raise click.ClickException(str(exc)) from exc


def configure_logging(level: str, *, quiet: tuple[str, ...] = ("py4j", "httpx")) -> None:
    """Service logs on stderr with time, level and logger; the `quiet` loggers (py4j's and httpx's
    line per call) only from WARNING up."""
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    for noisy in quiet:
        logging.getLogger(noisy).setLevel(logging.WARNING)


def parse_spark_conf(pairs: tuple[str, ...]) -> dict[str, str]:
    """`--spark-conf KEY=VALUE` options as Spark settings."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--spark-conf")
        conf[key.strip()] = value.strip()
    return conf


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
) -> None:
    """Run the ingestion service in the foreground until SIGINT/SIGTERM."""
    from prometheus_client import start_http_server

    from ingest.catalog_client import CatalogClient
    from ingest.metrics import REGISTRY
    from ingest.service import IngestOptions, IngestService
    from ingest.spark import CatalogConnection, spark_session
    from ingest.tables import ingest_tables

    catalog = CatalogClient(url, client_id, client_secret)
    warehouse = os.environ.get("FLOE_WAREHOUSE_NAME", "default")
    if metrics_port:
        start_http_server(metrics_port, addr=metrics_host, registry=REGISTRY)
        console.print(f"metrics on http://{metrics_host}:{metrics_port}/metrics", highlight=False)
    conf = {"spark.driver.memory": driver_memory, **(spark_conf or {})}
    spark = spark_session(
        "floe-ingest", CatalogConnection(url, warehouse, client_id, client_secret), master=master, conf=conf
    )
    service = IngestService(
        spark,
        catalog,
        CatalogConnection(url, warehouse, client_id, client_secret),
        lambda pipeline: ingest_tables(pipeline, default_warehouse=warehouse),
        IngestOptions(
            commit_interval=commit_interval,
            max_records_per_batch=max_records_per_batch,
            poll_interval=poll_interval,
            clusters=frozenset(clusters),
            state_dir=state_dir,
        ),
    )

    def _stop(signum: int, _frame: FrameType | None) -> None:
        console.print(f"stopping ingestion (signal {signum})")
        service.stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    console.print(
        f"[bold]floe ingest[/bold]: Spark {spark.version} on {master}, catalog {url}", highlight=False
    )
    try:
        service.run()
    finally:
        spark.stop()
        catalog.close()


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
@click.option("--log-level", default="info", show_default=True)
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
    log_level: str,
) -> None:
    """Ingest every table of the applied floe.yaml: Kafka → Iceberg through floe (FLOE_CLIENT_ID/SECRET:
    an admin key, or a writer key of the --cluster it ingests)."""
    if commit_interval is not None and commit_interval <= 0:
        raise click.BadParameter("must be positive", param_hint="--commit-interval")
    configure_logging(log_level)
    client_id, client_secret = cli_credentials()
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
    )


# -- floe status ------------------------------------------------------------------------------------


def read_status(metrics_url: str) -> dict[str, Any]:
    """The ingestion service's metrics, per table and partition."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        text = httpx.get(metrics_url, timeout=10).text
    except httpx.HTTPError as exc:
        raise click.ClickException(f"Cannot reach the ingestion service at {metrics_url}: {exc}") from exc
    tables: dict[str, dict[str, Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            table = sample.labels.get("table")
            if table is None:
                continue
            entry = tables.setdefault(table, {"table": table, "partitions": {}})
            partition = sample.labels.get("partition")
            name = sample.name
            if partition is not None and partition != "all":
                part = entry["partitions"].setdefault(partition, {"partition": int(partition)})
                if name == "floe_ingest_partition_offset_lag":
                    part["offset_lag"] = int(sample.value)
                elif name == "floe_ingest_partition_time_lag_seconds":
                    part["time_lag_seconds"] = round(sample.value, 3)
                elif name == "floe_ingest_committed_offset":
                    part["committed_offset"] = int(sample.value)
            elif name == "floe_ingest_records_per_second":
                entry["records_per_second"] = round(sample.value, 1)
            elif name == "floe_ingest_bytes_per_second":
                entry["mib_per_second"] = round(sample.value / 2**20, 3)
            elif name == "floe_ingest_dead_letters_total":
                entry["dead_letters"] = int(sample.value)
            elif name == "floe_ingest_records_total":
                entry["records"] = int(sample.value)
            elif name == "floe_ingest_last_commit_timestamp_seconds":
                entry["last_commit"] = sample.value
    for entry in tables.values():
        entry["partitions"] = sorted(entry["partitions"].values(), key=lambda p: p["partition"])
    return {"tables": sorted(tables.values(), key=lambda t: t["table"])}


def read_maintenance(url: str, client_id: str, client_secret: str, limit: int = 200) -> list[dict[str, Any]]:
    """The newest maintenance pass of each table (from floe's management API)."""
    from catalog.admin_client import ManagementClient

    client = ManagementClient(url, client_id, client_secret)
    try:
        passes = client.call("GET", "/maintenance/passes", params={"limit": limit})["passes"]
    finally:
        client.close()
    newest: dict[str, dict[str, Any]] = {}
    for entry in passes:
        name = ".".join([*entry["namespace"], entry["table"]])
        newest.setdefault(name, {**entry, "table": name})
    return sorted(newest.values(), key=lambda e: e["table"])


def _maintenance_grid(passes: list[dict[str, Any]]) -> Table:
    grid = Table(title="floe maintenance (last pass per table)")
    for column in ("table", "started", "took (s)", "data files", "snapshots", "actions", "error"):
        grid.add_column(column, justify="left" if column in ("table", "actions", "error") else "right")
    for entry in passes:
        before, after = entry.get("before") or {}, entry.get("after") or {}
        grid.add_row(
            entry["table"],
            str(entry["started_at"])[:19],
            f"{entry['duration_seconds']:.1f}",
            f"{before.get('data_files', '?')} → {after.get('data_files', '?')}",
            f"{before.get('snapshots', '?')} → {after.get('snapshots', '?')}",
            ", ".join(a["name"] for a in entry["actions"]),
            entry.get("error") or "",
        )
    return grid


@click.command("status")
@click.option(
    "--metrics-url",
    envvar="FLOE_INGEST_METRICS_URL",
    default=f"http://127.0.0.1:{DEFAULT_METRICS_PORT}/metrics",
    show_default=True,
    help="The ingestion service's Prometheus endpoint.",
)
@click.option(
    "--url", envvar="FLOE_URL", default=DEFAULT_URL, show_default=True, help="floe's catalog (maintenance)."
)
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True)
def status_command(metrics_url: str, url: str, output: str) -> None:
    """Ingestion lag, throughput, dead letters and last commit per table and partition, and each table's
    last maintenance pass (with FLOE_CLIENT_ID/SECRET or admin.json for the catalog)."""
    status = read_status(metrics_url)
    try:
        status["maintenance"] = read_maintenance(url, *admin_credentials())
    except ClientError as exc:
        status["maintenance_error"] = str(exc)
    if output == "json":
        click.echo(json.dumps(status, indent=2, default=str))
        return
    grid = Table(title="floe ingestion")
    columns = ("table", "partition", "offset lag", "lag (s)", "committed", "records/s", "MiB/s")
    for column in (*columns, "dead letters", "last commit"):
        grid.add_column(column, justify="left" if column == "table" else "right")
    now = time.time()
    for entry in status["tables"]:
        last = entry.get("last_commit")
        age = f"{now - last:.1f}s ago" if last else "never"
        rows = entry["partitions"] or [{}]
        for i, part in enumerate(rows):
            grid.add_row(
                entry["table"] if i == 0 else "",
                str(part.get("partition", "")),
                str(part.get("offset_lag", "")),
                str(part.get("time_lag_seconds", "")),
                str(part.get("committed_offset", "")),
                str(entry.get("records_per_second", "")) if i == 0 else "",
                str(entry.get("mib_per_second", "")) if i == 0 else "",
                str(entry.get("dead_letters", 0)) if i == 0 else "",
                age if i == 0 else "",
            )
    out = Console()
    out.print(grid)
    if status.get("maintenance"):
        out.print(_maintenance_grid(status["maintenance"]))
    elif "maintenance_error" in status:
        out.print(f"maintenance passes unavailable: {status['maintenance_error']}")


def port_answers(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def floe_home() -> Path:
    return Path(os.environ.get("FLOE_HOME", ".floe")).expanduser()


# -- floe up ----------------------------------------------------------------------------------------

EXAMPLE_CONFIG = """\
# floe.yaml: Kafka topics to Iceberg tables (compatible with WarpStream Tableflow's format).
# With no source_clusters, `floe up` runs a local Kafka broker as cluster `local`.
tables:
  - source_cluster_name: local
    source_topic: events
    source_format: json
    schema_mode: inline
    partitioning_scheme: hour
    schema:
      fields:
        - { name: user_id, id: 1, type: long }
        - { name: action, id: 2, type: string }
        - { name: amount, id: 3, type: double, optional: true }
"""
LOCAL_CLUSTER = "local"
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


def _local_broker_port(raw: dict[str, Any], kafka_port: int) -> int | None:
    """The port of a local broker `floe up` must start: when floe.yaml names no source cluster (one
    named `local` is added), or names one on this machine where nothing listens yet."""
    if not raw.get("source_clusters"):
        raw["source_clusters"] = [
            {"name": LOCAL_CLUSTER, "bootstrap_brokers": [{"hostname": "127.0.0.1", "port": kafka_port}]}
        ]
        return kafka_port
    for cluster in raw["source_clusters"]:
        brokers = cluster.get("bootstrap_brokers") or []
        if len(brokers) == 1 and str(brokers[0].get("hostname")) in _LOCAL_HOSTS:
            port = int(brokers[0].get("port", 9092))
            if not port_answers("127.0.0.1", port):
                return port
    return None


@click.command("up")
@click.option(
    "-f",
    "--file",
    "config_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="floe.yaml (default: an example written to $FLOE_HOME/floe.yaml).",
)
@click.option("--port", default=8181, show_default=True, help="Catalog port.")
@click.option(
    "--kafka-port", default=9092, show_default=True, help="Port of the local broker, when one is started."
)
@click.option("--commit-interval", type=float, default=None, help="Seconds between commits (default 2).")
@click.option("--metrics-port", type=int, default=DEFAULT_METRICS_PORT, show_default=True)
def up_command(
    config_file: Path | None, port: int, kafka_port: int, commit_interval: float | None, metrics_port: int
) -> None:
    """Run floe end to end on embedded defaults: catalog (SQLite in $FLOE_HOME), a local Kafka broker
    when floe.yaml names none, floe.yaml applied, and ingestion — until Ctrl-C."""
    import subprocess

    from catalog.dev.processes import stop_process, wait_until_answering
    from catalog.pipelines import InvalidConfig, parse_config
    from catalog.pipelines.config import read_yaml

    configure_logging("info")
    home = floe_home()
    home.mkdir(parents=True, exist_ok=True)
    if config_file is None:
        config_file = home / "floe.yaml"
        if not config_file.exists():
            config_file.write_text(EXAMPLE_CONFIG)
            console.print(f"wrote an example configuration to {config_file}")
    try:
        raw, _, _ = read_yaml(config_file.read_text())
    except (OSError, InvalidConfig) as exc:
        raise click.ClickException(str(exc)) from exc
    if not isinstance(raw, dict):
        raise click.ClickException(f"{config_file}: expected a mapping at the top level")
    broker_port = _local_broker_port(raw, kafka_port)
    try:
        parse_config(raw)
    except InvalidConfig as exc:
        raise click.ClickException(f"{config_file}: {exc.summary()}") from exc

    kafka = None
    server: subprocess.Popen[bytes] | None = None
    try:
        if broker_port is not None:
            from ingest.kafka_broker import LocalKafka

            console.print(f"starting a local Kafka broker on 127.0.0.1:{broker_port}")
            kafka = LocalKafka(port=broker_port, data_dir=home / "kafka").start()
        url = f"http://127.0.0.1:{port}"
        log_path = home / "catalog.log"
        env = {**os.environ, "FLOE_HOME": str(home)}
        with log_path.open("ab") as log_file:
            server = subprocess.Popen(
                [sys.executable, "-m", "catalog.cli", "serve", "--port", str(port)],
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        wait_until_answering(
            server, f"{url}/healthz", name="floe catalog", timeout=120, log_text=log_path.read_text
        )
        console.print(f"catalog on {url} (log: {log_path})")
        client_id, client_secret = admin_credentials({**os.environ, "FLOE_HOME": str(home)})
        _apply(url, client_id, client_secret, raw)
        tables = parse_config(raw).tables
        for table in tables:
            console.print(
                f"  topic [bold]{table.source_topic}[/bold] → table "
                f"[bold]{table.namespace}.{table.table_name}[/bold] (dead letters: {table.dlq_table_name})",
                highlight=False,
            )
        console.print(
            f"query from DuckDB: ATTACH 'default' AS floe (TYPE ICEBERG, ENDPOINT '{url}', "
            f"CLIENT_ID '{client_id}', CLIENT_SECRET '…'); credentials in {home / 'admin.json'}",
            highlight=False,
        )
        run_ingest(
            url,
            client_id,
            client_secret,
            commit_interval=commit_interval,
            metrics_port=metrics_port,
            state_dir=home / "ingest",
        )
    finally:
        stop_process(server)
        if kafka is not None:
            kafka.stop()


def _apply(url: str, client_id: str, client_secret: str, raw: dict[str, Any]) -> None:
    from catalog.admin_client import ManagementClient

    try:
        client = ManagementClient(url, client_id, client_secret)
        try:
            result = client.call("PUT", "/pipeline", json={"config": raw, "dry_run": False})
        finally:
            client.close()
    except ClientError as exc:
        raise click.ClickException(str(exc)) from exc
    console.print(f"applied the configuration (revision {result.get('revision')})")
