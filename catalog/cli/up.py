"""`floe up`: the whole product on one machine with embedded defaults, until Ctrl-C."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from catalog.cli.ingest import DEFAULT_METRICS_PORT, check_commit_interval, run_ingest
from catalog.cli.output import console
from catalog.cli.services import configure_logging
from catalog.cli.settings import client_settings
from catalog.client import ClientError, FloeClient, admin_credentials
from devtools.kafka_broker import LocalKafka
from devtools.ports import port_is_free
from devtools.processes import stop_process, wait_until_answering


def port_answers(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on `host:port` (within half a second)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def floe_home() -> Path:
    """FLOE_HOME, by default `.floe` in the working directory: where `floe up` keeps everything."""
    return client_settings().home.expanduser()


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
    from catalog.pipelines import InvalidConfig, parse_config
    from catalog.pipelines.config import read_yaml

    check_commit_interval(commit_interval)
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

    wanted = [(p, option) for p, option in ((port, "--port"), (broker_port, "--kafka-port")) if p is not None]
    for taken, option in wanted:
        if not port_is_free(taken):
            raise click.ClickException(
                f"port {taken} on 127.0.0.1 is in use (is floe already running?); "
                f"pass {option} to use another"
            )
    kafka = None
    server: subprocess.Popen[bytes] | None = None
    try:
        if broker_port is not None:
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
    try:
        with FloeClient(url, client_id, client_secret) as client:
            result = client.apply_pipeline(raw)
    except ClientError as exc:
        raise click.ClickException(str(exc)) from exc
    console.print(f"applied the configuration (revision {result.revision})")
