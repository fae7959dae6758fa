"""A real single-node Apache Kafka broker (KRaft, combined broker+controller) on 127.0.0.1.

The broker is the official Apache Kafka release, run from its Maven Central jars: the exact runtime
classpath of `org.apache.kafka:kafka_2.13` is pinned below by SHA-1 and fetched once into floe's jar
cache (`ingest.artifacts`). Used by `floe dev kafka`, `floe up` (when floe.yaml names no broker), the
tests and the benchmarks. Needs Java 17+ (`$JAVA_HOME/bin/java`, else `java` on PATH).
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType, TracebackType

import click
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from rich.console import Console

from catalog.dev.postgres import free_port
from catalog.dev.processes import stop_process
from ingest.artifacts import Artifact, cache_dir, fetch
from ingest.java import find_java, java_version_text

KAFKA_VERSION = "4.1.1"
SCALA_VERSION = "2.13"
MINIMUM_JAVA = 17
NODE_ID = 1

# `mvn dependency:list -DincludeScope=runtime` of org.apache.kafka:kafka_2.13:4.1.1, plus
# log4j-slf4j-impl 2.24.3: the SLF4J binding the official distribution ships in libs/ (the POM leaves the
# binding to the application; without one every broker log line is silently dropped).
_CLASSPATH_PINS = """
com.dynatrace.hash4j:hash4j:0.22.0 2d61bfb5b38469cb76141b06dc68d36a9007e9ad
com.fasterxml.jackson.core:jackson-annotations:2.19.0 fd1e7c56de1e5b658563c8c66d5074cceb4e3a0b
com.fasterxml.jackson.core:jackson-core:2.19.0 a90640e59ea42632a8e331ff1d6b706cf306050a
com.fasterxml.jackson.core:jackson-databind:2.19.0 b3f7506f6414fb04760561eec11a0880165c2a4a
com.fasterxml.jackson.dataformat:jackson-dataformat-csv:2.19.0 b7275a6795c70304e8b399db31b11ac72d6bc954
com.fasterxml.jackson.dataformat:jackson-dataformat-yaml:2.19.0 2d735ab4ecebf5c2bf248d4036fd4ba6d73d0cc1
com.fasterxml.jackson.datatype:jackson-datatype-jdk8:2.19.0 69312135ff6d6646203b9681fa48505f369210a6
com.github.ben-manes.caffeine:caffeine:3.2.0 35eba09997476a39492ac7f7b2bb0e8292c09d17
com.github.luben:zstd-jni:1.5.6-10 7e146ecb598af55d1f64d1c118af27569a848558
com.google.re2j:re2j:1.8 12c25e923e9e4fb1575a7640a2698745c6f19a94
com.typesafe.scala-logging:scala-logging_2.13:3.9.5 d5a0f61168371d8cff1c510f55407aa46bea8366
com.yammer.metrics:metrics-core:2.2.0 f82c035cfa786d3cbec362c38c22a5f5b1bc8724
commons-beanutils:commons-beanutils:1.9.4 d52b9abcd97f38c81342bb7e7ae1eee9b73cba51
commons-collections:commons-collections:3.2.2 8ad72fe39fa8c91eaaf12aadb21e0c3661fe26d5
commons-digester:commons-digester:2.1 73a8001e7a54a255eef0f03521ec1805dc738ca0
commons-logging:commons-logging:1.3.2 3dc966156ef19d23c839715165435e582fafa753
commons-validator:commons-validator:1.9.0 26e49d333890ccad072eb530a85fceb9c07818df
net.sf.jopt-simple:jopt-simple:5.0.4 4fdac2fbe92dfad86aa6e9301736f6b4342a3f5c
net.sourceforge.argparse4j:argparse4j:0.7.0 6f0621d0c3888de39e0f06d01f37ba53a798e657
org.apache.kafka:kafka-clients:4.1.1 094cb8f39c3157038ec9577634d310a2bf5fb516
org.apache.kafka:kafka-coordinator-common:4.1.1 a404eaac7fc653d63453005ab003bf308599f87d
org.apache.kafka:kafka-group-coordinator-api:4.1.1 40b61cb614687a50188f3c5fa7cf65dbcd059221
org.apache.kafka:kafka-group-coordinator:4.1.1 5d0e09fc27c29c7186fe94116712a09d00f29979
org.apache.kafka:kafka-metadata:4.1.1 a11c8a6e27aa783ec3e8b4b7f5c318281fa494a8
org.apache.kafka:kafka-raft:4.1.1 b5bae33d2adf96738119e40f76c283d24cc58361
org.apache.kafka:kafka-server-common:4.1.1 1bf567866482bd9d7a8ad3eb73b3ffbab51a6b5b
org.apache.kafka:kafka-server:4.1.1 947c8b919656c51c431bae9cd9196f8d0911c5b6
org.apache.kafka:kafka-share-coordinator:4.1.1 eed38c6dba008d378cfa24f8d9212ece225a56bd
org.apache.kafka:kafka-storage-api:4.1.1 b571e6253b711ad633174a283232e5f26b107718
org.apache.kafka:kafka-storage:4.1.1 9419c2775056356d815db7681dda97e2670e8dd7
org.apache.kafka:kafka-tools-api:4.1.1 e9dd9701e3d13cfd6c6b84ce7bfd11769641e937
org.apache.kafka:kafka-transaction-coordinator:4.1.1 d0f94fcfb53a7574262750ebf465b484d0841859
org.apache.kafka:kafka_2.13:4.1.1 3183b1bb5d0209dce5634cf56e8893cf42b17467
org.apache.logging.log4j:log4j-api:2.24.3 b02c125db8b6d295adf72ae6e71af5d83bce2370
org.apache.logging.log4j:log4j-core:2.24.3 7f6a261243ca767c7f38fd4b542bcde626c8894e
org.apache.logging.log4j:log4j-slf4j-impl:2.24.3 182894dfec8b730639c9ea065f1084ba85fcbaa3
org.bitbucket.b_c:jose4j:0.9.6 357a3836bb5da16f314f3a1e954518e5468cd915
org.hdrhistogram:HdrHistogram:2.2.2 7959933ebcc0f05b2eaa5af0a0c8689fa257b15c
org.jspecify:jspecify:1.0.0 7425a601c1c7ec76645a78d22b8c6a627edee507
org.lz4:lz4-java:1.8.0 4b986a99445e49ea5fbf5d149c4b63f6ed6c6780
org.pcollections:pcollections:4.0.2 c8398b4443deae11e6eaffbc04a371b4eb8f6b8e
org.scala-lang:scala-library:2.13.16 9e064d9304904fd7b6bd2b55a9e601b8c1c9006e
org.scala-lang:scala-reflect:2.13.16 4958d4e43faf2d6d66f18ce2aa9a3e5ba141f87b
org.slf4j:slf4j-api:1.7.36 6c62681a2f655b49963a5983b8b0950a6120ae14
org.xerial.snappy:snappy-java:1.1.10.7 3049f95640f4625a945cfab85715f603fa4c8f80
org.yaml:snakeyaml:2.4 e0666b825b796f85521f02360e77f4c92c5a7a07
"""


def _pinned(line: str) -> Artifact:
    coordinates, sha1 = line.split()
    group, name, version = coordinates.split(":")
    return Artifact(group, name, version, sha1)


KAFKA_CLASSPATH: tuple[Artifact, ...] = tuple(
    _pinned(line) for line in _CLASSPATH_PINS.splitlines() if line.strip()
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
    floe_home = os.environ.get("FLOE_HOME")
    if floe_home:
        return Path(floe_home).expanduser() / "kafka"
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home).expanduser() / "floe" / "kafka"


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


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
        if not _port_is_free(self.port):
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
        lines = ["# Written by floe (ingest/kafka_broker.py) at every start; edits are overwritten."]
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


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@click.command("kafka")
@click.option("--port", type=int, default=9092, show_default=True, help="PLAINTEXT port on 127.0.0.1.")
@click.option(
    "--dir",
    "data_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Data directory, kept between runs [default: $FLOE_HOME/kafka, else ~/.local/share/floe/kafka].",
)
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Partitions of auto-created topics.",
)
def kafka_command(port: int, data_dir: Path | None, partitions: int) -> None:
    """Run a local single-node Apache Kafka broker (KRaft) in the foreground until Ctrl-C."""
    console = Console()
    directory = data_dir or default_data_dir()
    broker = LocalKafka(port=port, data_dir=directory, partitions_default=partitions)
    # SIGTERM (kill, service managers) stops the broker as cleanly as Ctrl-C does.
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        with console.status(f"Starting Apache Kafka {KAFKA_VERSION} (first run downloads it)..."):
            broker.start()
        console.print(
            f"[green]Kafka {KAFKA_VERSION}[/green] (KRaft, single node) listening on "
            f"[bold]{broker.bootstrap_servers}[/bold]  (started in {broker.startup_seconds:.1f} s)\n"
            f"data: {broker.data_dir}\nlog:  {broker.log_path}\nPress Ctrl-C to stop."
        )
        assert broker.process is not None
        returncode = broker.process.wait()
        raise click.ClickException(f"Kafka broker exited on its own ({returncode}):\n{broker.log_tail()}")
    except KeyboardInterrupt:
        console.print("Stopping Kafka...")
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        broker.stop()
    console.print("Kafka stopped.")
