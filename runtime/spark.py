"""Spark for floe: the pinned jars and a SparkSession whose Iceberg catalog is floe's REST API.

PySpark 4.0.0 with Iceberg 1.11.0's Spark 4.0 runtime (Scala 2.13) and Spark's own Kafka and Avro
connectors at the same Spark version, all from Maven Central (SHA-1 pinned, cached per user; see
`runtime.artifacts`). Every Iceberg commit Spark makes goes through floe's REST catalog with an API key
(OAuth2 client credentials), so floe's authorization, offsets fence and audit apply to Spark too.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.artifacts import Artifact, fetch_all
from runtime.java import spark_java_home
from runtime.settings import RuntimeSettings, read_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_VERSION = "4.0.0"
ICEBERG_VERSION = "1.11.0"
CATALOG_NAME = "floe"
# floe's REST extension (catalog.storage.STORAGE_ENDPOINT_HEADER; runtime does not import the catalog):
# `internal` asks for the S3 endpoint the catalog itself uses instead of the one engines are told.
STORAGE_ENDPOINT_HEADER = "X-Floe-Storage-Endpoint"


# The connectors' runtime dependencies that pyspark's own jars folder does not already ship
# (pyspark has zstd-jni, lz4-java, snappy-java, slf4j, jsr305 and scala-parallel-collections).
SPARK_JARS: tuple[Artifact, ...] = (
    Artifact(
        "org.apache.iceberg",
        "iceberg-spark-runtime-4.0_2.13",
        ICEBERG_VERSION,
        "70df6b99e6c07627805db0b5e5e58000a22e716e",
    ),
    Artifact(
        "org.apache.spark",
        "spark-sql-kafka-0-10_2.13",
        SPARK_VERSION,
        "7f3974645d9b7b9ca8ff570baaa0c5d84a23b85e",
    ),
    Artifact(
        "org.apache.spark",
        "spark-token-provider-kafka-0-10_2.13",
        SPARK_VERSION,
        "bb6fa56777661c2860cc5a9b7361fb1db7255554",
    ),
    Artifact("org.apache.kafka", "kafka-clients", "3.9.0", "e87443101adb03975297788cf7f2b5387c3cfe2d"),
    Artifact("org.apache.commons", "commons-pool2", "2.12.0", "458563f69fbdaebf7daadfe10dc3a22e42a7de50"),
    Artifact(
        "org.apache.spark", "spark-avro_2.13", SPARK_VERSION, "f993c9672f57f45a280d787f03ebd3e5c7c875e4"
    ),
    # The protobuf runtime of floe's JVM protobuf decoder (ingest/jvm): pyspark ships protobuf only shaded
    # (as do kafka-clients), so this unshaded one conflicts with nothing. 4.36 is the release of the
    # Python protobuf runtime (7.36) that compiles the descriptors the decoder reads.
    Artifact("com.google.protobuf", "protobuf-java", "4.36.2", "dbc5fbfc3936fb569a910679e971842a556a4d3d"),
    # S3FileIO and its AWS SDK, for S3 and S3-compatible (MinIO) warehouses.
    Artifact(
        "org.apache.iceberg",
        "iceberg-aws-bundle",
        ICEBERG_VERSION,
        "afe5b22dd5bc2d2c0639049b06a92dae2545cac7",
    ),
)


def spark_jars() -> list[Path]:
    """The connector jars, downloaded on first use."""
    return fetch_all(SPARK_JARS)


def _storage_endpoint() -> str:
    return read_settings(RuntimeSettings).spark_storage_endpoint


@dataclass(frozen=True)
class CatalogConnection:
    """How Spark reaches floe: the REST URI, the warehouse (prefix), an API key, which of the
    warehouse's S3 endpoints to use (`FLOE_SPARK_STORAGE_ENDPOINT` unless given), and the name of the
    Spark catalog it is for `warehouse` (others get `<spark_catalog>_<warehouse>`)."""

    uri: str
    warehouse: str
    client_id: str
    client_secret: str = field(repr=False)
    extra: dict[str, str] = field(default_factory=dict)
    storage_endpoint: str = field(default_factory=_storage_endpoint)
    spark_catalog: str = CATALOG_NAME

    @property
    def headers(self) -> dict[str, str]:
        """Request headers of floe's extensions this connection sends with every catalog request."""
        if self.storage_endpoint == "client":
            return {}
        return {STORAGE_ENDPOINT_HEADER: self.storage_endpoint}

    def spark_properties(self, name: str = CATALOG_NAME) -> dict[str, str]:
        prefix = f"spark.sql.catalog.{name}"
        uri = self.uri.rstrip("/")
        properties = {
            prefix: "org.apache.iceberg.spark.SparkCatalog",
            f"{prefix}.type": "rest",
            f"{prefix}.uri": uri,
            f"{prefix}.warehouse": self.warehouse,
            f"{prefix}.credential": f"{self.client_id}:{self.client_secret}",
            f"{prefix}.oauth2-server-uri": f"{uri}/v1/oauth/tokens",
            f"{prefix}.scope": "catalog",
            # Each write must see the table's current schema (floe apply evolves it while ingest runs).
            f"{prefix}.cache-enabled": "false",
        }
        # Iceberg's REST client sends every `header.*` property as a request header.
        properties.update({f"{prefix}.header.{key}": value for key, value in self.headers.items()})
        properties.update({f"{prefix}.{key}": value for key, value in self.extra.items()})
        return properties


def catalog_name(warehouse: str, default_warehouse: str = "default", base: str = CATALOG_NAME) -> str:
    """The Spark catalog of a floe warehouse: `base` (`floe`) for the default one, `<base>_<name>` for
    others."""
    if warehouse == default_warehouse:
        return base
    return base + "_" + re.sub(r"[^A-Za-z0-9_]", "_", warehouse)


def register_warehouse(session: SparkSession, connection: CatalogConnection, warehouse: str) -> str:
    """Make a floe warehouse available as a Spark catalog (Spark loads catalogs lazily): `floe`, which
    `spark_session` configures, or another one of `connection`'s key."""
    name = catalog_name(warehouse, connection.warehouse, connection.spark_catalog)
    if name != CATALOG_NAME:
        other = replace(connection, warehouse=warehouse)
        for key, value in other.spark_properties(name).items():
            session.conf.set(key, value)
    return name


def is_local_master(master: str) -> bool:
    """Whether `master` runs the executors inside the driver's JVM (`local`, `local[N]`, `local[N,F]`)."""
    return master == "local" or master.startswith("local[")


# Everything Spark and its Kafka client log (warnings with stack traces included) goes to one file.
_FILE_LOGGING = """\
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
"""


def _log_to_file(log_file: Path, level: str) -> str:
    """Write a log4j2 configuration sending every Spark log line to `log_file`; the JVM option using it."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    config = log_file.with_name(log_file.stem + "-log4j2.properties")
    config.write_text(_FILE_LOGGING.format(level=level.lower(), path=log_file))
    return f"-Dlog4j2.configurationFile=file:{config}"


# The JVM options of the driver and executors; `spark_session` adds a caller's own after them.
JAVA_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
# The garbage collector of a local master's JVM (it runs the executors too), unless the caller picks one.
# The throughput collector: ingestion allocates short-lived rows and buffers at a high rate and needs no
# short pauses (a micro-batch takes seconds), and G1's write barriers and concurrent work cost CPU on
# every allocation-heavy task. Measured with `python -m benchmarks.ingest` (1 KiB JSON, 2 cores,
# 1,000,000 records, runs alternated, 4 rounds each, both with zstd level 1): 2.87 instead of 3.05
# ingester CPU s per 100k records (-6 %), 41.8 instead of 39.4 MiB/s.
LOCAL_GC = "-XX:+UseParallelGC"


def java_options(master: str, key: str, extra: str = "") -> str:
    """floe's JVM options for `key` (one of JAVA_OPTIONS), then `extra`: UTC as the JVM's time zone, and
    on a local master's driver the throughput collector unless `extra` chooses a collector itself."""
    options = ["-Duser.timezone=UTC"]
    chooses_gc = re.search(r"-XX:[+-]Use\w*GC\b", extra) is not None
    if key == JAVA_OPTIONS[0] and is_local_master(master) and not chooses_gc:
        options.append(LOCAL_GC)
    if extra.strip():
        options.append(extra.strip())
    return " ".join(options)


# Settings under this prefix (catalogs' URIs, credentials, tokens) are set on the session once it runs,
# never given to the JVM at launch: PySpark starts the JVM with every launch setting on its command line
# (`spark-submit --conf k=v`), which any local user reads with `ps`. Spark loads a catalog when it is
# first used, from the session's settings of that moment.
RUNTIME_ONLY_PREFIX = "spark.sql.catalog."
# The default catalog names one of those catalogs, so it moves with them: given at launch it would be a
# JVM system property that every later session of the process inherits, naming a catalog they lack.
DEFAULT_CATALOG = "spark.sql.defaultCatalog"


def spark_session(
    app_name: str,
    connection: CatalogConnection | None,
    *,
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
    log_file: Path | None = None,
) -> SparkSession:
    """A SparkSession with the Iceberg, Kafka and Avro connectors and floe as catalog `floe` (no
    `connection`: no catalog yet; callers register their own with `register_warehouse`).

    On a cluster (`spark://…`, `k8s://…`, `yarn`) executors get the connector jars from the driver
    (`spark.jars`). JSON and Avro decoding are Spark SQL and maintenance is Iceberg's procedures, so they
    need Spark 4.0 and Java 17+ only; protobuf tables decode in the JVM too (floe's decoder jar, which
    ingestion adds to the session when it first decodes protobuf). Executors connect back to the driver
    at Spark's default address (this host's name; `SPARK_LOCAL_IP` or `spark.driver.host` choose
    another).

    With `log_file`, Spark's logs, its JVM's own output and no progress bars: the terminal stays quiet
    (`floe up`); without, Spark logs to the terminal as usual."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    os.environ["JAVA_HOME"] = spark_java_home()
    # Python workers (should anything start them: floe's own decoding runs in the JVM) run this
    # interpreter, which has floe and its dependencies; PySpark reads the variable, not
    # `spark.pyspark.python`, when it starts them.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name).master(master)
    settings: dict[str, str] = {
        "spark.jars": ",".join(str(path) for path in spark_jars()),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        # Decoding must turn a bad value into a dead letter, not fail the batch (ANSI casts throw).
        "spark.sql.ansi.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
    }
    if is_local_master(master):
        # Nothing outside this process talks to a local driver: keep it off the network.
        settings.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    if connection is not None:
        settings["spark.sql.defaultCatalog"] = connection.spark_catalog
        settings.update(connection.spark_properties(connection.spark_catalog))
    extra = dict(conf or {})
    settings.update(extra)
    at_runtime = {
        k: v for k, v in settings.items() if k.startswith(RUNTIME_ONLY_PREFIX) or k == DEFAULT_CATALOG
    }
    settings = {k: v for k, v in settings.items() if k not in at_runtime}
    # JVM options given in `conf` are added to floe's, not put in their place (the time zone stays UTC).
    for key in JAVA_OPTIONS:
        settings[key] = java_options(master, key, extra.get(key, ""))
    log_level = read_settings(RuntimeSettings).spark_log_level
    if log_file is not None:
        # The driver's JVM (which runs the executors of a local master); a cluster's executors log as
        # their cluster does.
        java_option = _log_to_file(log_file, log_level)
        key = "spark.driver.extraJavaOptions"
        settings[key] = f"{settings.get(key, '')} {java_option}".strip()
        settings["spark.ui.showConsoleProgress"] = "false"
        if SparkContext._gateway is None:
            # The JVM's own stdout/stderr (its startup notes) go to the log file too: the gateway is
            # launched here, with the settings it needs at start (driver options, jars), before the session.
            launch_conf = SparkConf(loadDefaults=False).setAppName(app_name).setMaster(master)
            launch_conf.setAll(list(settings.items()))
            with log_file.open("ab") as output:
                gateway = launch_gateway(  # type: ignore[no-untyped-call]
                    launch_conf, popen_kwargs={"stdout": output, "stderr": output}
                )
            SparkContext._ensure_initialized(gateway=gateway)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    for key, value in at_runtime.items():
        session.conf.set(key, value)
    session.sparkContext.setLogLevel(log_level)
    return session
