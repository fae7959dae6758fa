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
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from devtools.pins import maven_artifact, pin_lines
from devtools.ports import free_port, port_is_free
from devtools.processes import stop_process
from devtools.settings import DevSettings
from devtools.tls import DevCertificates, certificates_in
from runtime.artifacts import Artifact, cache_dir, fetch
from runtime.files import write_private
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


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _properties_value(value: str) -> str:
    # java.util.Properties treats backslashes as escapes.
    return value.replace("\\", "\\\\")


# The secured listeners `LocalKafka(secured=True)` opens besides PLAINTEXT: name → security protocol.
SECURED_LISTENERS = {
    "SASL_PLAIN": "SASL_SSL",  # SASL/PLAIN over TLS (Confluent Cloud's way)
    "SASL_SCRAM": "SASL_SSL",  # SASL/SCRAM-SHA-256 and -512 over TLS (MSK's way)
    "MTLS": "SSL",  # TLS with a client certificate the broker requires (mTLS)
    "SELF_SIGNED": "SSL",  # TLS with a self-signed certificate for a name no client uses
}
_SCRAM_MECHANISMS = (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
_PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
SECURED_USER = "floe"


@dataclass(frozen=True)
class SecuredListeners:
    """Where a secured LocalKafka listens, and what a client needs to get in.

    `sasl_plain_port`: SASL_SSL with PLAIN; `sasl_scram_port`: SASL_SSL with SCRAM-SHA-256 and
    SCRAM-SHA-512; `mtls_port`: SSL requiring a client certificate signed by `certificates.ca`; all three
    present `certificates.server` (signed by that CA, for 127.0.0.1 and localhost).
    `self_signed_port`: SSL presenting `certificates.self_signed_server`, self-signed for another name.
    One user, `username`/`password`, for PLAIN and both SCRAM mechanisms.
    """

    sasl_plain_port: int
    sasl_scram_port: int
    mtls_port: int
    self_signed_port: int
    username: str
    password: str
    certificates: DevCertificates

    def address(self, port: int) -> str:
        return f"127.0.0.1:{port}"

    @property
    def ports(self) -> dict[str, int]:
        """Listener name → port."""
        return {
            "SASL_PLAIN": self.sasl_plain_port,
            "SASL_SCRAM": self.sasl_scram_port,
            "MTLS": self.mtls_port,
            "SELF_SIGNED": self.self_signed_port,
        }


def _secured_password(directory: Path) -> str:
    """The secured listeners' password, kept in `directory` so a restarted broker keeps its users."""
    path = directory / "users.json"
    try:
        password = json.loads(path.read_text())["password"]
        if isinstance(password, str) and password:
            return password
    except (OSError, ValueError, KeyError, TypeError):
        pass
    password = secrets.token_urlsafe(18)
    directory.mkdir(parents=True, exist_ok=True)
    write_private(path, json.dumps({"username": SECURED_USER, "password": password}) + "\n")
    return password


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
        secured: bool = False,
        secured_ports: Mapping[str, int] | None = None,
        request_log: bool = False,
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
        # Every request logged with its times (queue, local, remote, send): a benchmark's diagnosis.
        self.request_log = request_log
        self.controller_port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None
        # Set while this run records the class archive (the first start with this JVM and classpath).
        self._archive_recording: tuple[Path, Path] | None = None
        # With `secured`: the ports of the secured listeners (`secured_ports`, by listener name, else free
        # now, like `port`), and after `start()` their certificates and user in `secured_listeners`.
        chosen = secured_ports or {}
        self.secured_ports = (
            {name: chosen.get(name) or free_port() for name in SECURED_LISTENERS} if secured else {}
        )
        self.secured_listeners: SecuredListeners | None = None

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
        if self.secured_ports:
            self.secured_listeners = self._prepare_secured_listeners()
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
            if self.secured_listeners is not None:
                self._create_scram_user(self.secured_listeners, timeout)
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
        if self.secured_listeners is not None:
            settings.update(self._secured_settings(settings, self.secured_listeners))
        lines = ["# Written by floe (devtools/kafka_broker.py) at every start; edits are overwritten."]
        lines += [f"{key}={value}" for key, value in settings.items()]
        write_private(self.config_path, "\n".join(lines) + "\n")  # secured: it holds the PLAIN password
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
                    f"appender.file.policies.size.size = {'2000MB' if self.request_log else '10MB'}",
                    "appender.file.strategy.type = DefaultRolloverStrategy",
                    "appender.file.strategy.max = 3",
                    "rootLogger.level = INFO",
                    "rootLogger.appenderRef.file.ref = file",
                    # One line per request at DEBUG/TRACE only; keep it quiet like Kafka's own config.
                    "logger.request.name = kafka.request.logger",
                    f"logger.request.level = {'DEBUG' if self.request_log else 'WARN'}",
                ]
            )
            + "\n"
        )

    def _prepare_secured_listeners(self) -> SecuredListeners:
        """Certificates (reused from an earlier run while valid), keystores and the user's password."""
        for name, port in self.secured_ports.items():
            if not port_is_free(port):
                raise RuntimeError(f"Port {port} on 127.0.0.1 (the {name} listener) is already in use")
        directory = self.data_dir / "tls"
        certificates = certificates_in(directory)
        # Kafka's PEM keystore file: the private key, then the certificate chain (server, then its CA).
        (directory / "server-keystore.pem").write_text(
            certificates.server.keystore_text() + certificates.ca.certificate.read_text()
        )
        (directory / "self-signed-server-keystore.pem").write_text(
            certificates.self_signed_server.keystore_text()
        )
        for keystore in ("server-keystore.pem", "self-signed-server-keystore.pem"):
            (directory / keystore).chmod(0o600)
        ports = self.secured_ports
        return SecuredListeners(
            sasl_plain_port=ports["SASL_PLAIN"],
            sasl_scram_port=ports["SASL_SCRAM"],
            mtls_port=ports["MTLS"],
            self_signed_port=ports["SELF_SIGNED"],
            username=SECURED_USER,
            password=_secured_password(directory),
            certificates=certificates,
        )

    def _secured_settings(self, settings: dict[str, str], secured: SecuredListeners) -> dict[str, str]:
        """`settings`' listener lists with the secured listeners added, and their TLS and SASL settings."""
        tls = secured.certificates.directory
        listeners = ",".join(f"{name}://{secured.address(port)}" for name, port in secured.ports.items())
        protocols = ",".join(f"{name}:{protocol}" for name, protocol in SECURED_LISTENERS.items())
        password = _jaas_quote(secured.password)
        scram_login = f"{_SCRAM_LOGIN} required;"
        return {
            "listeners": f"{settings['listeners']},{listeners}",
            "advertised.listeners": f"{settings['advertised.listeners']},{listeners}",
            "listener.security.protocol.map": f"{settings['listener.security.protocol.map']},{protocols}",
            # Every TLS listener presents the CA-signed server certificate and trusts that CA...
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": _properties_value(str(tls / "server-keystore.pem")),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": _properties_value(str(secured.certificates.ca.certificate)),
            # ...except SELF_SIGNED, whose certificate signs itself for another name.
            "listener.name.self_signed.ssl.keystore.type": "PEM",
            "listener.name.self_signed.ssl.keystore.location": _properties_value(
                str(tls / "self-signed-server-keystore.pem")
            ),
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.sasl_plain.sasl.enabled.mechanisms": "PLAIN",
            # PLAIN's users are the JAAS options `user_<name>="<password>"`.
            "listener.name.sasl_plain.plain.sasl.jaas.config": _properties_value(
                f"{_PLAIN_LOGIN} required user_{secured.username}={password};"
            ),
            "listener.name.sasl_scram.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_scram.scram-sha-256.sasl.jaas.config": scram_login,
            "listener.name.sasl_scram.scram-sha-512.sasl.jaas.config": scram_login,
        }

    def _create_scram_user(self, secured: SecuredListeners, timeout: float) -> None:
        """Create (or update) the SCRAM user for both mechanisms; wait until the broker knows them.

        Through the Admin API rather than `kafka-storage format --add-scram`: that only works on the
        first start of a data directory, and this also works for one formatted before `secured`."""
        admin = self.admin_client(log_level=0)
        # One request per mechanism: Kafka refuses to alter one user twice in a request.
        for mechanism in _SCRAM_MECHANISMS:
            upsert = UserScramCredentialUpsertion(
                secured.username, ScramCredentialInfo(mechanism, 8192), secured.password.encode()
            )
            for future in admin.alter_user_scram_credentials([upsert]).values():
                future.result(timeout=timeout)
        deadline = time.monotonic() + timeout
        while True:
            described = admin.describe_user_scram_credentials([secured.username])
            assert isinstance(described, dict)  # a future per user when users are named
            try:
                description = described[secured.username].result(timeout=timeout)
                known = {info.mechanism for info in description.scram_credential_infos}
                if set(_SCRAM_MECHANISMS) <= known:
                    return
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"The broker did not create SCRAM user {secured.username!r} in {timeout} s"
                )
            time.sleep(0.1)

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
