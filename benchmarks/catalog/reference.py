"""The peer: Apache Iceberg's reference REST server (`org.apache.iceberg.rest.RESTCatalogServer`).

The same server the `apache/iceberg-rest-fixture` image runs, with a JdbcCatalog on a SQLite file and
HadoopFileIO on local disk (the image's defaults). Apache publishes only the thin `test-fixtures` jar on
Maven Central (the fat `iceberg-open-api-test-fixtures-runtime` jar the image copies is a build
output), so the runtime classpath is assembled here from pinned Maven Central artifacts, each checked
against its `.sha1` file and cached in `~/.cache/floe/jars/`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from devtools.ports import free_port
from devtools.processes import stop_process, wait_until_answering
from runtime.artifacts import Artifact, fetch_all

ICEBERG_VERSION = "1.11.0"
JETTY_VERSION = "12.1.8"
HADOOP_VERSION = "3.4.3"
MAIN_CLASS = "org.apache.iceberg.rest.RESTCatalogServer"


def _iceberg(name: str, classifier: str = "") -> Artifact:
    return Artifact("org.apache.iceberg", name, ICEBERG_VERSION, classifier=classifier)


def _jetty(group: str, name: str) -> Artifact:
    return Artifact(group, name, JETTY_VERSION)


# The runtime classpath of RESTCatalogServer 1.11.0 with a JDBC (SQLite) catalog and HadoopFileIO on
# the local file system; versions follow Iceberg 1.11.0's gradle/libs.versions.toml and Hadoop 3.4.3's
# hadoop-project pom. RESTCatalogAdapter and RESTCatalogServlet live in iceberg-core's test jar.
ARTIFACTS: tuple[Artifact, ...] = (
    _iceberg("iceberg-open-api", "test-fixtures"),
    _iceberg("iceberg-core"),
    _iceberg("iceberg-core", "tests"),
    _iceberg("iceberg-api"),
    _iceberg("iceberg-common"),
    _iceberg("iceberg-bundled-guava"),
    Artifact("com.fasterxml.jackson.core", "jackson-core", "2.21.3"),
    Artifact("com.fasterxml.jackson.core", "jackson-databind", "2.21.3"),
    Artifact("com.fasterxml.jackson.core", "jackson-annotations", "2.21"),
    Artifact("com.github.ben-manes.caffeine", "caffeine", "2.9.3"),
    Artifact("org.roaringbitmap", "RoaringBitmap", "1.6.14"),
    Artifact("io.airlift", "aircompressor", "2.0.3"),
    Artifact("org.apache.avro", "avro", "1.12.1"),
    Artifact("org.apache.httpcomponents.client5", "httpclient5", "5.6.1"),
    Artifact("org.apache.httpcomponents.core5", "httpcore5", "5.4"),
    Artifact("org.apache.httpcomponents.core5", "httpcore5-h2", "5.4"),
    Artifact("org.slf4j", "slf4j-api", "2.0.17"),
    Artifact("org.slf4j", "slf4j-simple", "2.0.17"),
    Artifact("org.xerial", "sqlite-jdbc", "3.53.0.0"),
    Artifact("jakarta.servlet", "jakarta.servlet-api", "6.0.0"),
    _jetty("org.eclipse.jetty", "jetty-server"),
    _jetty("org.eclipse.jetty", "jetty-http"),
    _jetty("org.eclipse.jetty", "jetty-io"),
    _jetty("org.eclipse.jetty", "jetty-util"),
    _jetty("org.eclipse.jetty", "jetty-security"),
    _jetty("org.eclipse.jetty", "jetty-session"),
    _jetty("org.eclipse.jetty.ee10", "jetty-ee10-servlet"),
    _jetty("org.eclipse.jetty.compression", "jetty-compression-server"),
    _jetty("org.eclipse.jetty.compression", "jetty-compression-common"),
    _jetty("org.eclipse.jetty.compression", "jetty-compression-gzip"),
    Artifact("org.apache.hadoop", "hadoop-common", HADOOP_VERSION),
    Artifact("org.apache.hadoop", "hadoop-auth", HADOOP_VERSION),
    Artifact("org.apache.hadoop.thirdparty", "hadoop-shaded-guava", "1.5.0"),
    Artifact("org.apache.commons", "commons-configuration2", "2.10.1"),
    Artifact("org.apache.commons", "commons-lang3", "3.18.0"),
    Artifact("org.apache.commons", "commons-text", "1.14.0"),
    Artifact("org.apache.commons", "commons-collections4", "4.4"),
    Artifact("commons-io", "commons-io", "2.16.1"),
    Artifact("commons-logging", "commons-logging", "1.3.0"),
    Artifact("com.fasterxml.woodstox", "woodstox-core", "5.4.0"),
    Artifact("org.codehaus.woodstox", "stax2-api", "4.2.1"),
    Artifact("com.google.re2j", "re2j", "1.1"),
    Artifact("org.apache.commons", "commons-compress", "1.28.0"),
)


def classpath(cache: Path | None = None) -> list[Path]:
    return fetch_all(ARTIFACTS, cache)


def artifact_versions() -> dict[str, str]:
    """The reference server's component versions, for the results."""
    return {
        "iceberg_rest_server": ICEBERG_VERSION,
        "jetty": JETTY_VERSION,
        "sqlite_jdbc": next(a.version for a in ARTIFACTS if a.name == "sqlite-jdbc"),
    }


class ReferenceServer:
    """RESTCatalogServer in a JVM subprocess on 127.0.0.1, with its SQLite catalog and warehouse in a
    temporary directory that is deleted on exit."""

    def __init__(self, port: int | None = None, java_options: tuple[str, ...] = ()) -> None:
        self.port = port or free_port()
        self.java_options = java_options
        self.root = Path(tempfile.mkdtemp(prefix="floe-iceberg-ref-"))
        self.log_path = self.root / "server.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    def start(self, timeout: float = 120) -> ReferenceServer:
        jars = classpath()
        self.warehouse.mkdir(parents=True, exist_ok=True)
        # RCKUtils maps CATALOG_* variables to catalog properties: CATALOG_REST_PORT -> rest.port.
        env = {
            **os.environ,
            "CATALOG_CATALOG__IMPL": "org.apache.iceberg.jdbc.JdbcCatalog",
            # The same durability trade-off as the benchmark's PostgreSQL (fsync off): no syncs.
            "CATALOG_URI": f"jdbc:sqlite:{self.root / 'iceberg_catalog.db'}?journal_mode=WAL&synchronous=OFF",
            "CATALOG_JDBC_USER": "user",
            "CATALOG_JDBC_PASSWORD": "password",
            "CATALOG_JDBC_STRICT__MODE": "true",
            "CATALOG_WAREHOUSE": self.warehouse.as_uri(),
            "CATALOG_REST_PORT": str(self.port),
        }
        command = [
            "java",
            *self.java_options,
            "-cp",
            os.pathsep.join(str(jar) for jar in jars),
            MAIN_CLASS,
        ]
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        wait_until_answering(
            self.process,
            f"{self.url}/v1/config",
            name="RESTCatalogServer",
            timeout=timeout,
            log_text=self.log_text,
            interval=0.2,
        )
        return self

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None
        shutil.rmtree(self.root, ignore_errors=True)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> ReferenceServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
