"""`floe up`: the whole product on one machine with embedded defaults, until Ctrl-C.

Start-up, in order: the jars a first run needs (downloaded with progress bars), then the local Kafka
broker, the catalog server and the Spark session at once, then the configuration (the applied pipeline
in the catalog is the source of truth: floe.yaml is applied on a fresh catalog, or when the file changed
since floe up last applied it), then ingestion; "ready" is printed once every table's streaming query
has read its topic's offsets, so a record produced from then on is picked up by the next trigger. The
maintenance worker shares the Spark session (a second JVM would double the memory) unless
`--no-maintenance`. Spark's and Kafka's own logs go to files in $FLOE_HOME, not the terminal.

The admin key stays in this process (it applies floe.yaml and issues keys): ingestion and maintenance
write through each source cluster's pipeline keys (`floe.cli.pipeline_keys`), rotated at every start,
and the Spark JVM starts with no key at all (catalogs are registered on the running session).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from catalog.client import ClientError, FloeClient, Pipeline, admin_credentials
from devtools.kafka_broker import KAFKA_CLASSPATH, LocalKafka
from devtools.ports import port_is_free
from devtools.processes import stop_process, wait_until_answering
from floe.cli.ingest import DEFAULT_METRICS_PORT, check_commit_interval, run_ingest
from floe.cli.output import console
from floe.cli.pipeline_keys import INGEST, MAINTAIN, IngestAccess, PipelineKeys
from floe.cli.ready_summary import ready_summary
from floe.cli.services import configure_logging
from floe.cli.settings import client_settings
from floe.cli.up_maintenance import UpMaintenance
from runtime.artifacts import Artifact, fetch, missing
from runtime.settings import RuntimeSettings, read_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ingest.ingest_table import IngestTable


def port_answers(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on `host:port` (within half a second)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def floe_home() -> Path:
    """FLOE_HOME, by default `.floe` in the working directory: where `floe up` keeps everything."""
    return client_settings().home.expanduser()


LOCAL_CLUSTER = "local"
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
# Commits in floe up: often enough that a produced record is queryable within seconds.
UP_COMMIT_INTERVAL = 1.0
# What floe up remembers of the floe.yaml it applied: its SHA-256 and the revision it became.
APPLIED_RECORD = "floe.yaml.applied.json"


def shown_path(path: Path) -> str:
    """`path` as floe's lines name it: relative to the working directory when inside it (as typed),
    else absolute."""
    absolute = path.absolute()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def example_config(kafka_port: int, path: str = ".floe/floe.yaml") -> str:
    """The floe.yaml a fresh home starts with, at `path`: complete (its cluster included), so that
    `floe apply -f <path>` accepts it as it is."""
    # A line break in the path would end the YAML comment: such a path is not written into it.
    command = (
        shlex.join(["floe", "apply", "-f", path])
        if path.isprintable()
        else 'floe apply -f "$FLOE_HOME/floe.yaml"'
    )
    return f"""\
# floe.yaml: Kafka topics to Iceberg tables (compatible with WarpStream Tableflow's format).
# Edit it and run `{command}` (or restart `floe up`, which applies it when it changed).
source_clusters:
  # floe up runs this broker itself (creating the topics below on it).
  - name: {LOCAL_CLUSTER}
    bootstrap_brokers:
      - {{ hostname: 127.0.0.1, port: {kafka_port} }}
tables:
  - source_cluster_name: {LOCAL_CLUSTER}
    source_topic: events
    source_format: json
    schema_mode: inline
    partitioning_scheme: hour
    schema:
      fields:
        - {{ name: user_id, id: 1, type: long }}
        - {{ name: action, id: 2, type: string }}
        - {{ name: amount, id: 3, type: double, optional: true }}
"""


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


def catalog_environment(home: Path, metrics_port: int) -> dict[str, str]:
    """The catalog server's environment: this home, and (unless metrics are off) the console reading
    the metrics of the ingestion floe up runs, so its overview shows each table's lag and records/s."""
    env = {**os.environ, "FLOE_HOME": str(home)}
    if metrics_port:
        env["FLOE_CONSOLE_INGEST_METRICS_URL"] = f"http://127.0.0.1:{metrics_port}/metrics"
    return env


# -- first-run downloads ------------------------------------------------------------------------------


class _DownloadBars:
    """`runtime.artifacts.DownloadProgress` as rich progress bars: one per file while it downloads,
    and one for the whole set."""

    def __init__(self, count: int) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TaskID,
            TextColumn,
            TransferSpeedColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            console=console,
            transient=True,
        )
        self.overall = self.progress.add_task(f"{count} files", total=count)
        self._tasks: dict[Artifact, TaskID] = {}
        self._lock = threading.Lock()
        self.bytes = 0

    def started(self, artifact: Artifact, total_bytes: int | None) -> None:
        with self._lock:
            self._tasks[artifact] = self.progress.add_task(f"  {artifact.file_name}", total=total_bytes)

    def advanced(self, artifact: Artifact, chunk_bytes: int) -> None:
        with self._lock:
            self.bytes += chunk_bytes
            self.progress.advance(self._tasks[artifact], chunk_bytes)

    def finished(self, artifact: Artifact) -> None:
        with self._lock:
            self.progress.remove_task(self._tasks.pop(artifact))
            self.progress.advance(self.overall, 1)


def download_missing(artifacts: Sequence[Artifact]) -> None:
    """Fetch what the cache lacks (a first run: 54 jars, 160 MiB), with progress bars."""
    needed = missing(artifacts)
    if not needed:
        return
    console.print(f"downloading {len(needed)} jars from Maven Central (once; cached for later runs)")
    started = time.monotonic()
    bars = _DownloadBars(len(needed))
    with bars.progress, ThreadPoolExecutor(max_workers=6) as pool:
        for future in [pool.submit(fetch, artifact, None, bars) for artifact in needed]:
            future.result()
    seconds = time.monotonic() - started
    console.print(f"downloaded {bars.bytes / 2**20:.1f} MiB in {seconds:.1f} s", highlight=False)


# -- the configuration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AppliedRecord:
    """The floe.yaml floe up last applied from this home."""

    sha256: str
    revision: int | None

    @classmethod
    def read(cls, home: Path) -> AppliedRecord | None:
        try:
            data = json.loads((home / APPLIED_RECORD).read_text())
            return cls(str(data["sha256"]), data.get("revision"))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, home: Path) -> None:
        (home / APPLIED_RECORD).write_text(json.dumps({"sha256": self.sha256, "revision": self.revision}))


def settle_configuration(
    client: FloeClient, home: Path, config_file: Path, text: str, raw: dict[str, Any]
) -> Pipeline:
    """Apply floe.yaml only when the catalog has no configuration yet, or the file changed since floe up
    last applied it; otherwise keep what the catalog has (a newer `floe apply` stays). Says which."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    current = client.pipeline()
    record = AppliedRecord.read(home)
    if current is not None and record is not None and record.sha256 == digest:
        console.print(
            f"configuration: revision {current.revision} (applied by {current.applied_by} "
            f"{current.applied_at:%Y-%m-%d %H:%M}); {config_file} unchanged since floe up applied it",
            highlight=False,
            soft_wrap=True,
        )
        return current
    if current is not None and record is None:
        console.print(
            f"configuration: revision {current.revision} as applied (applied by {current.applied_by}); "
            f"{config_file} was not applied — run floe apply -f {config_file} to apply it",
            highlight=False,
            soft_wrap=True,
        )
        AppliedRecord(digest, None).write(home)
        return current
    outcome = client.apply_pipeline(raw)
    AppliedRecord(digest, outcome.revision).write(home)
    if current is None:
        console.print(
            f"configuration: {config_file} applied as revision {outcome.revision}",
            highlight=False,
            soft_wrap=True,
        )
    elif not outcome.applied:
        console.print(
            f"configuration: {config_file} changed and matches revision {outcome.revision}: nothing to apply",
            highlight=False,
            soft_wrap=True,
        )
    else:
        replaced = ""
        if record is not None and record.revision is not None and current.revision > record.revision:
            replaced = f" (it replaces revision {current.revision}, applied by {current.applied_by})"
        console.print(
            f"configuration: {config_file} changed since floe up last applied it: applied as "
            f"revision {outcome.revision}{replaced}",
            highlight=False,
            soft_wrap=True,
        )
    pipeline = client.pipeline()
    assert pipeline is not None
    return pipeline


# -- start-up ---------------------------------------------------------------------------------------


@contextmanager
def _step(text: str) -> Iterator[None]:
    """A spinner while a start-up step runs, then one line saying how long it took."""
    started = time.monotonic()
    with console.status(text):
        yield
    console.print(f"{text} ({time.monotonic() - started:.1f} s)", highlight=False, soft_wrap=True)


def _start_spark(log_file: Path) -> SparkSession:
    """floe up's session, with no catalog and no key: each cluster's ingestion and maintenance register
    a catalog of their own pipeline key once it runs (so no secret is on the JVM's command line)."""
    from runtime.spark import spark_session

    conf = {
        "spark.driver.memory": "2g",
        # One session for ingestion and maintenance: pools share the cores fairly between them.
        "spark.scheduler.mode": "FAIR",
    }
    return spark_session(
        "floe-up",
        None,
        master=read_settings(RuntimeSettings).spark_master or "local[*]",
        conf=conf,
        log_file=log_file,
    )


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
@click.option(
    "--commit-interval",
    type=float,
    default=None,
    help=f"Seconds between commits for every table (default: floe.yaml's, else {UP_COMMIT_INTERVAL:g}).",
)
@click.option("--metrics-port", type=int, default=DEFAULT_METRICS_PORT, show_default=True)
@click.option(
    "--no-maintenance",
    is_flag=True,
    help="Do not run the maintenance worker (compaction, snapshot expiry, orphan removal) in floe up.",
)
def up_command(
    config_file: Path | None,
    port: int,
    kafka_port: int,
    commit_interval: float | None,
    metrics_port: int,
    no_maintenance: bool,
) -> None:
    """Run floe end to end on embedded defaults: catalog (SQLite in $FLOE_HOME), a local Kafka broker
    when floe.yaml names none, floe.yaml applied (on a fresh catalog, or when the file changed),
    ingestion and maintenance — until Ctrl-C."""
    from catalog.pipelines import InvalidConfig, parse_config
    from catalog.pipelines.config import read_yaml
    from runtime.spark import SPARK_JARS

    check_commit_interval(commit_interval)
    started = time.monotonic()
    configure_logging("info", quiet=("py4j", "httpx", "httpx2", "pyiceberg"), timestamps=False)
    home = floe_home()
    home.mkdir(parents=True, exist_ok=True)
    if config_file is None:
        config_file = home / "floe.yaml"
        if not config_file.exists():
            config_file.write_text(example_config(kafka_port, shown_path(config_file)))
            console.print(f"wrote an example configuration to {config_file}", highlight=False, soft_wrap=True)
    try:
        text = config_file.read_text()
        raw, _, _ = read_yaml(text)
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
    download_missing([*SPARK_JARS, *(KAFKA_CLASSPATH if broker_port is not None else ())])

    url = f"http://127.0.0.1:{port}"
    spark_log = home / "spark.log"
    _log_py4j_to(spark_log)
    catalog_log = home / "catalog.log"
    kafka = LocalKafka(port=broker_port, data_dir=home / "kafka") if broker_port is not None else None
    server: subprocess.Popen[bytes] | None = None
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="floe-up-start")
    spark_future: Future[SparkSession] | None = None
    try:
        env = catalog_environment(home, metrics_port)
        with catalog_log.open("ab") as log_file:
            server = subprocess.Popen(
                [sys.executable, "-m", "floe.cli", "serve", "--port", str(port)],
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                # Its own session: Ctrl-C reaches floe up, which stops the catalog after ingestion.
                start_new_session=True,
            )
        kafka_future = pool.submit(kafka.start) if kafka is not None else None
        with _step(f"catalog on {url}"):
            wait_until_answering(
                server, f"{url}/healthz", name="floe catalog", timeout=120, log_text=catalog_log.read_text
            )
        client_id, client_secret = admin_credentials(env)
        spark_future = pool.submit(_start_spark, spark_log)
        if kafka is not None and kafka_future is not None:
            with _step(f"Kafka broker on {kafka.bootstrap_servers}"):
                kafka_future.result()
        # The admin key stays in this process: it applies floe.yaml and issues the pipeline keys.
        admin = FloeClient(url, client_id, client_secret)
        keys = PipelineKeys(admin, home)
        try:
            pipeline = settle_configuration(admin, home, config_file, text, raw)
            for cluster in _clusters(pipeline):
                keys.key(INGEST, cluster)
                if not no_maintenance:
                    keys.key(MAINTAIN, cluster)
        except ClientError as exc:
            admin.close()
            raise click.ClickException(str(exc)) from exc
        with _step("Spark session"):
            spark = spark_future.result()
        # As typed, each (the broker resolves its folder): not relative and absolute paths in one line.
        logs = [Path(shown_path(p)) for p in (catalog_log, spark_log, *([kafka.log_path] if kafka else []))]
        broker = kafka.bootstrap_servers if kafka is not None else None
        own_brokers = frozenset(
            {f"127.0.0.1:{broker_port}", f"localhost:{broker_port}"} if broker_port else ()
        )
        maintenance = UpMaintenance(spark, keys, url, pipeline.warehouse, lambda: _clusters(admin.pipeline()))
        access = IngestAccess(keys, url, pipeline.warehouse)

        def on_started(tables: list[IngestTable]) -> None:
            if not no_maintenance:
                maintenance.start()
            summary = ready_summary(
                url=url,
                home=home,
                client_id=client_id,
                warehouse=pipeline.warehouse,
                tables=tables,
                pipeline_keys=[key.name for key in keys.issued()],
                broker=broker,
                logs=logs,
                metrics_port=metrics_port,
                maintenance=not no_maintenance,
                seconds=time.monotonic() - started,
            )
            console.print(summary, highlight=False, soft_wrap=True)

        try:
            run_ingest(
                url,
                client_id,
                client_secret,
                commit_interval=commit_interval or _default_interval(pipeline),
                metrics_port=metrics_port,
                state_dir=home / "ingest",
                spark=spark,
                create_topics_at=own_brokers,
                on_started=on_started,
                warm_up=True,
                access_for=access,
            )
        finally:
            maintenance.stop()
            access.close()
            admin.close()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        if spark_future is not None and spark_future.done() and spark_future.exception() is None:
            spark_future.result().stop()
        stop_process(server)
        if kafka is not None:
            kafka.stop()
        console.print("floe stopped", highlight=False)


def _log_py4j_to(path: Path) -> None:
    """py4j's own log (it prints the traceback of a batch function interrupted when a query stops, as
    every Ctrl-C does) goes to the Spark log: the ingestion service reports real failures itself."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    py4j = logging.getLogger("py4j")
    py4j.addHandler(handler)
    py4j.propagate = False


def _clusters(pipeline: Pipeline | None) -> list[str]:
    """The source clusters of the applied pipeline: each gets pipeline keys of its own."""
    from catalog.pipelines import parse_config

    if pipeline is None:
        return []
    return [cluster.name for cluster in parse_config(pipeline.config).source_clusters]


def _default_interval(pipeline: Pipeline) -> float | None:
    """floe up's commit interval: the tables' own when floe.yaml sets one, else a short one."""
    from catalog.pipelines import parse_config

    if any(t.commit_interval_seconds for t in parse_config(pipeline.config).tables):
        return None
    return UP_COMMIT_INTERVAL
