"""A real single-node Apache Kafka broker (KRaft, combined broker+controller) on 127.0.0.1.

The broker is the official Apache Kafka release, run from its Maven Central jars: the exact runtime
classpath of `org.apache.kafka:kafka_2.13` is pinned by SHA-1 in `devtools/data/kafka-4.1.1-classpath.txt`
and fetched once into floe's jar cache (`runtime.artifacts`). Used by `floe dev kafka`, `floe up` (when
floe.yaml names no broker), the tests and the benchmarks. Needs Java 17+ (`$JAVA_HOME/bin/java`, else
`java` on PATH).
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from devtools.pins import maven_artifact, pin_lines
from devtools.ports import free_port, port_is_free
from devtools.processes import stop_process
from devtools.settings import DevSettings
from runtime.artifacts import Artifact, cache_dir, fetch
from runtime.java import find_java, java_version_text
from runtime.settings import read_settings

KAFKA_VERSION = "4.1.1"
SCALA_VERSION = "2.13"
MINIMUM_JAVA = 17
NODE_ID = 1

KAFKA_CLASSPATH: tuple[Artifact, ...] = tuple(
    maven_artifact(*line.split()) for line in pin_lines(f"kafka-{KAFKA_VERSION}-classpath.txt")
)


def kafka_classpath() -> list[Path]:
    """The broker's jars from floe's cache, downloaded (in parallel, SHA-1-verified) on first use."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(fetch, KAFKA_CLASSPATH))


def java_executable() -> str:
    """`$JAVA_HOME/bin/java`, else `java` on PATH; Kafka 4 needs Java 17 or newer."""
    return find_java(
        f"Kafka {KAFKA_VERSION}",
        "install a JDK, e.g. Debian's openjdk-17-jre-headless, or set JAVA_HOME",
        MINIMUM_JAVA,
    )


def class_archive_path(java: str, classpath: str) -> Path:
    """Where the broker's class-data-sharing archive for this exact JVM build and classpath is cached.

    The JVM maps the archive instead of loading and verifying thousands of classes (~1 s less per start).
    It is only valid for one JVM build and classpath, hence the key; the JVM ignores a stale one.
    """
    key = hashlib.sha256("\0".join([java, java_version_text(java), classpath]).encode()).hexdigest()[:16]
    return cache_dir() / "kafka" / f"kafka-{KAFKA_VERSION}-{key}.jsa"


# Class-data-sharing messages (classes it skips, a stale archive) are notes, not broker output.
_QUIET_CLASS_SHARING = ("-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def _use_class_archive(archive: Path) -> list[str]:
    return [*_QUIET_CLASS_SHARING, f"-XX:SharedArchiveFile={archive}"]


def random_cluster_id() -> str:
    """A fresh KRaft cluster id, as `kafka-storage random-uuid` makes it (URL-safe base64 of a UUID4)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        # Kafka never hands out ids starting with "-": they read as options on its command lines.
        if not cluster_id.startswith("-"):
            return cluster_id


def default_data_dir() -> Path:
    """`$FLOE_HOME/kafka` when FLOE_HOME is set, else `~/.local/share/floe/kafka` (XDG_DATA_HOME honoured)."""
    floe_home = read_settings(DevSettings).home
    if floe_home:
        return floe_home.expanduser() / "kafka"
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home).expanduser() / "floe" / "kafka"


def _properties_value(value: str) -> str:
    # java.util.Properties treats backslashes as escapes.
    return value.replace("\\", "\\\\")


class LocalKafka:
    """One Kafka broker+controller on 127.0.0.1: `with LocalKafka() as kafka: kafka.bootstrap_servers`.

    The data directory holds the KRaft storage (`data/`), the generated `server.properties` and
    `log4j2.properties`, and the broker's log (`server.log`). An already formatted data directory is
    reused, so a restart keeps every topic and record. Without `data_dir` a temporary directory is used
    and deleted when the context exits.
    """

    def __init__(
        self,
        port: int | None = None,
        data_dir: Path | None = None,
        partitions_default: int = 1,
        *,
        heap: str = "512m",
    ) -> None:
        if partitions_default < 1:
            raise ValueError(f"partitions_default must be at least 1, got {partitions_default}")
        self.port = port or free_port()
        self.owns_data_dir = data_dir is None
        self.data_dir = (
            Path(tempfile.mkdtemp(prefix="floe-kafka-")) if data_dir is None else Path(data_dir).expanduser()
        )
        self.data_dir = self.data_dir.resolve()
        self.partitions_default = partitions_default
        self.heap = heap
        self.controller_port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None
        # Set while this run records the class archive (the first start with this JVM and classpath).
        self._archive_recording: tuple[Path, Path] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def storage_dir(self) -> Path:
        """Kafka's `log.dirs`: partitions and the KRaft metadata log."""
        return self.data_dir / "data"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "server.log"

    @property
    def console_path(self) -> Path:
        """The JVM's own stdout/stderr (crashes, log4j's status); broker logs go to `log_path`."""
        return self.data_dir / "server.out"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, characters: int = 4000) -> str:
        parts = []
        for path in (self.console_path, self.log_path):
            if path.exists():
                text = path.read_text(errors="replace")[-characters:].strip()
                if text:
                    parts.append(f"--- {path} ---\n{text}")
        return "\n".join(parts) or "(no log output)"

    def start(self, timeout: float = 120) -> LocalKafka:
        """Format the storage when new, start the JVM and wait until the broker answers metadata requests."""
        if self.running:
            return self
        if self.process is not None:
            self.stop()  # It exited on its own: reap it and drop a half-recorded class archive.
        started = time.monotonic()
        java = java_executable()
        classpath = os.pathsep.join(str(path) for path in kafka_classpath())
        if not port_is_free(self.port):
            raise RuntimeError(f"Port {self.port} on 127.0.0.1 is already in use; choose another Kafka port")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.controller_port = free_port()
        self._write_config()
        try:
            if not (self.storage_dir / "meta.properties").exists():
                self._format_storage(java, classpath)
            options = self._jvm_options() + self._class_archive_options(java, classpath)
            with self.console_path.open("ab") as console:
                self.process = subprocess.Popen(
                    [java, *options, "-cp", classpath, "kafka.Kafka", str(self.config_path)],
                    stdin=subprocess.DEVNULL,
                    stdout=console,
                    stderr=subprocess.STDOUT,
                    cwd=self.data_dir,
                    # Its own session: a terminal's Ctrl-C reaches floe, which then stops the broker cleanly.
                    start_new_session=True,
                )
            self._wait_until_answering(timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        """SIGTERM (Kafka's graceful shutdown), then SIGKILL after 15 s."""
        process = self.process
        stop_process(process)
        self.process = None
        if self._archive_recording is not None:
            recording, archive = self._archive_recording
            self._archive_recording = None
            # The JVM writes the archive as it exits; keep it only after a clean exit (SIGTERM is 143).
            if process is not None and process.returncode in (0, 143) and recording.exists():
                recording.replace(archive)
            else:
                recording.unlink(missing_ok=True)

    def _class_archive_options(self, java: str, classpath: str) -> list[str]:
        """Use the cached class archive, or record one when this broker exits (first start only)."""
        archive = class_archive_path(java, classpath)
        if archive.exists():
            return _use_class_archive(archive)
        try:
            archive.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            return []  # A read-only cache: just start without the archive.
        # A unique name next to the archive, renamed into place: concurrent first starts never clash.
        recording = archive.with_name(f"{archive.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.part")
        self._archive_recording = (recording, archive)
        return [*_QUIET_CLASS_SHARING, f"-XX:ArchiveClassesAtExit={recording}"]

    def admin_client(self, **config: str | int) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap_servers, **config})

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        *,
        config: dict[str, str] | None = None,
        exist_ok: bool = False,
        timeout: float = 60,
    ) -> None:
        """Create a topic (replication factor 1) and wait until every partition has a leader."""
        count = partitions or self.partitions_default
        admin = self.admin_client()
        future = admin.create_topics(
            [NewTopic(name, num_partitions=count, replication_factor=1, config=config or {})],
            operation_timeout=timeout,
            request_timeout=timeout,
        )[name]
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            error = exc.args[0]
            if not (
                exist_ok and isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS
            ):
                raise
        deadline = time.monotonic() + timeout
        while True:
            topic = admin.list_topics(topic=name, timeout=timeout).topics.get(name)
            partitions_led = (
                topic is not None
                and topic.error is None
                and bool(topic.partitions)
                and all(partition.leader >= 0 for partition in topic.partitions.values())
            )
            if partitions_led:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"Topic {name!r} has no leader for every partition after {timeout} s")
            time.sleep(0.05)

    def _jvm_options(self) -> list[str]:
        # Kafka's own defaults (kafka-run-class.sh / kafka-server-start.sh), with a small heap for dev use.
        return [
            "-Xms128m",
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
        ]

    def _write_config(self) -> None:
        controller = f"127.0.0.1:{self.controller_port}"
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(NODE_ID),
            # A static voter set: unlike a dynamic quorum (`--standalone`), the controller port may change
            # between runs on the same data directory.
            "controller.quorum.voters": f"{NODE_ID}@{controller}",
            "listeners": f"PLAINTEXT://{self.bootstrap_servers},CONTROLLER://{controller}",
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap_servers}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": _properties_value(str(self.storage_dir)),
            "num.partitions": str(self.partitions_default),
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            # Fewer internal partitions than the default 50: the first consumer group joins much faster.
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "10",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            # Dev and test groups have one member: no need to wait 3 s for others before the first rebalance.
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "4",
        }
        lines = ["# Written by floe (devtools/kafka_broker.py) at every start; edits are overwritten."]
        lines += [f"{key}={value}" for key, value in settings.items()]
        self.config_path.write_text("\n".join(lines) + "\n")
        log = _properties_value(str(self.log_path))
        (self.data_dir / "log4j2.properties").write_text(
            "\n".join(
                [
                    "status = error",
                    "appender.file.type = RollingFile",
                    "appender.file.name = file",
                    f"appender.file.fileName = {log}",
                    f"appender.file.filePattern = {log}.%i",
                    "appender.file.layout.type = PatternLayout",
                    "appender.file.layout.pattern = [%d] %p %m (%c)%n",
                    "appender.file.policies.type = Policies",
                    "appender.file.policies.size.type = SizeBasedTriggeringPolicy",
                    "appender.file.policies.size.size = 10MB",
                    "appender.file.strategy.type = DefaultRolloverStrategy",
                    "appender.file.strategy.max = 3",
                    "rootLogger.level = INFO",
                    "rootLogger.appenderRef.file.ref = file",
                    # One line per request at DEBUG/TRACE only; keep it quiet like Kafka's own config.
                    "logger.request.name = kafka.request.logger",
                    "logger.request.level = WARN",
                ]
            )
            + "\n"
        )

    def _format_storage(self, java: str, classpath: str) -> None:
        # A short-lived JVM: the C1 compiler alone and the serial collector start it fastest, and the
        # broker's class archive (when recorded already) holds most of the classes it loads.
        archive = class_archive_path(java, classpath)
        command = [
            java,
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            *(_use_class_archive(archive) if archive.exists() else []),
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-cp",
            classpath,
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            random_cluster_id(),
            "--config",
            str(self.config_path),
            "--ignore-formatted",
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        if result.returncode != 0:
            raise RuntimeError(
                f"Formatting Kafka storage in {self.storage_dir} failed ({result.returncode}): "
                f"{(result.stdout + result.stderr)[-3000:]}"
            )

    def _wait_until_answering(self, timeout: float) -> None:
        """Poll until a metadata request lists this broker; raise with the log tail on exit or timeout."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        admin: AdminClient | None = None
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"Kafka broker exited with {self.process.returncode} while starting:\n{self.log_tail()}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"Kafka broker did not answer within {timeout} s:\n{self.log_tail()}")
            # Only talk Kafka once the port accepts connections: librdkafka logs every refused connect.
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
            except OSError:
                time.sleep(0.1)
                continue
            if admin is None:
                admin = self.admin_client(log_level=0)
            try:
                if NODE_ID in admin.list_topics(timeout=min(5.0, remaining)).brokers:
                    return
            except KafkaException:
                pass
            time.sleep(0.1)

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        if self.owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
