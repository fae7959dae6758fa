"""Ingestion from a secured Kafka cluster: SASL_SSL with PLAIN and SCRAM-SHA-512, mTLS, and
`tls_insecure_skip_verify` against a self-signed broker; refused credentials are one clear error.

One broker for the module with every secured listener (`LocalKafka(secured=True)`), one floe server,
one `floe ingest` for every cluster (good and misconfigured: each table fails or flows on its own), and
a schema registry behind HTTPS and basic authentication. floe.yaml is written as a WarpStream user
writes it: `credentials` naming environment variables, which the ingest process has with WarpStream's
`TABLEFLOW_` prefix where WarpStream's agents would.
"""

from __future__ import annotations

import io
import json
import ssl
import time
import uuid
from collections.abc import Iterator
from typing import Any

import fastavro
import httpx
import pytest
import yaml
from click.testing import CliRunner
from cryptography import x509
from pyiceberg.catalog.rest import RestCatalog

from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka, SecuredListeners
from devtools.postgres import LocalPostgres
from devtools.schema_registry import LocalSchemaRegistry
from floe.cli.status import status_command
from ingest.registry_client import RegistryClient, encode_confluent
from tests.e2e.ingest_harness import IngestProcess, Produced, committed_offsets, produce, wait_until_committed
from tests.e2e.process_tree import assert_no_secret_on_command_lines
from tests.e2e.registry_proxy import REGISTRY_PASSWORD, REGISTRY_USER, BasicAuthProxy

pytestmark = pytest.mark.e2e

# The clusters floe ingests from, and the ones whose credentials the broker refuses (or floe cannot use).
GOOD = ("confluent_cloud", "msk_scram", "mtls", "self_signed_skip_verify")
REFUSED = ("wrong_password", "untrusted_cert", "expired_cert", "missing_env", "self_signed_verified")

FLOE_YAML = """
source_clusters:
  # Confluent Cloud style: SASL/PLAIN over TLS.
  - name: confluent_cloud
    bootstrap_brokers:
      - hostname: 127.0.0.1
        port: {sasl_plain}
    credentials:
      sasl_username_env: SASL_USERNAME_ENV_VAR
      sasl_password_env: SASL_PASSWORD_ENV_VAR
      use_tls: true
      sasl_mechanism: plain
      mtls_server_ca_cert_env: MTLS_SERVER_CA_CERT_PATH_ENV_VAR
  # MSK style: SASL/SCRAM-SHA-512 over TLS.
  - name: msk_scram
    bootstrap_brokers:
      - hostname: localhost
        port: {sasl_scram}
    credentials:
      sasl_username_env: SASL_USERNAME_ENV_VAR
      sasl_password_env: SASL_PASSWORD_ENV_VAR
      use_tls: true
      sasl_mechanism: scram-512
      mtls_server_ca_cert_env: MTLS_SERVER_CA_CERT_PATH_ENV_VAR
  - name: mtls
    bootstrap_brokers:
      - hostname: 127.0.0.1
        port: {mtls}
    credentials:
      mtls_client_cert_env: MTLS_CERT_PATH_ENV_VAR
      mtls_client_key_env: MTLS_KEY_PATH_ENV_VAR
      mtls_server_ca_cert_env: MTLS_SERVER_CA_CERT_PATH_ENV_VAR
      use_tls: true
  - name: self_signed_skip_verify
    bootstrap_brokers:
      - hostname: 127.0.0.1
        port: {self_signed}
    credentials:
      use_tls: true
      tls_insecure_skip_verify: true
  - name: wrong_password
    bootstrap_brokers:
      - hostname: 127.0.0.1
        port: {sasl_plain}
    credentials:
      sasl_username_env: SASL_USERNAME_ENV_VAR
      sasl_password_env: WRONG_PASSWORD_ENV_VAR
      use_tls: true
      sasl_mechanism: plain
      mtls_server_ca_cert_env: MTLS_SERVER_CA_CERT_PATH_ENV_VAR
  - name: untrusted_cert
    bootstrap_brokers:
      - hostname: 127.0.0.1
        port: {mtls}
    credentials:
      mtls_client_cert_env: UNTRUSTED_CERT_PATH_ENV_VAR
      mtls_client_key_env: UNTRUSTED_KEY_PATH_ENV_VAR
      mtls_server_ca_cert_env: MTLS_SERVER_CA_CERT_PATH_ENV_VAR
      use_tls: true
  - name: expired_cert
    bootstrap_brokers:
      - hostname: 127.0.0.1
        port: {mtls}
    credentials:
      mtls_client_cert_env: EXPIRED_CERT_PATH_ENV_VAR
      mtls_client_key_env: EXPIRED_KEY_PATH_ENV_VAR
      mtls_server_ca_cert_env: MTLS_SERVER_CA_CERT_PATH_ENV_VAR
      use_tls: true
  - name: missing_env
    bootstrap_brokers:
      - hostname: 127.0.0.1
        port: {sasl_scram}
    credentials:
      sasl_username_env: SASL_USERNAME_ENV_VAR
      sasl_password_env: NOBODY_SET_THIS_ENV_VAR
      use_tls: true
      sasl_mechanism: scram-512
  - name: self_signed_verified
    bootstrap_brokers:
      - hostname: 127.0.0.1
        port: {self_signed}
    credentials:
      use_tls: true
schema_registry:
  url: {registry_url}
  basic_auth_username_env: REGISTRY_USERNAME_ENV_VAR
  basic_auth_password_env: REGISTRY_PASSWORD_ENV_VAR
tables:
{tables}
"""

JSON_TABLE = """
  - source_cluster_name: {cluster}
    source_topic: {topic}
    source_format: json
    schema_mode: inline
    schema:
      fields:
        - {{ name: environment, type: string, id: 1 }}
        - {{ name: service, type: string, id: 2 }}
        - {{ name: status, type: long, id: 3 }}
        - {{ name: message, type: string, id: 4, optional: true }}
"""

AVRO_TABLE = """
  - source_cluster_name: confluent_cloud
    source_topic: {topic}
    source_format: avro
    schema_mode: registry
    schema:
      fields:
        - {{ name: event_id, id: 1, type: string }}
        - {{ name: user_id, id: 2, type: long }}
"""
AVRO_WRITER = {
    "type": "record",
    "name": "Event",
    "namespace": "com.example",
    "fields": [{"name": "event_id", "type": "string"}, {"name": "user_id", "type": "long"}],
}


def _topic(cluster: str) -> str:
    return f"{cluster.replace('_', '-')}.{uuid.uuid4().hex[:6]}"


def _table(topic: str) -> str:
    return topic.replace(".", "_").replace("-", "_")


class Setup:
    """The module's broker, floe.yaml and what was produced to each topic."""

    def __init__(self, kafka: LocalKafka, registry: BasicAuthProxy) -> None:
        assert kafka.secured_listeners is not None
        self.kafka = kafka
        self.secured: SecuredListeners = kafka.secured_listeners
        self.registry = registry
        self.topics = {cluster: _topic(cluster) for cluster in (*GOOD, *REFUSED)}
        self.avro_topic = _topic("registry")
        tables = "".join(JSON_TABLE.format(cluster=c, topic=t) for c, t in self.topics.items())
        tables += AVRO_TABLE.format(topic=self.avro_topic)
        self.floe_yaml = FLOE_YAML.format(
            sasl_plain=self.secured.sasl_plain_port,
            sasl_scram=self.secured.sasl_scram_port,
            mtls=self.secured.mtls_port,
            self_signed=self.secured.self_signed_port,
            registry_url=registry.url,
            tables=tables,
        )
        self.produced: dict[str, Produced] = {}

    def environment(self) -> dict[str, str]:
        """The ingest process's variables: SASL ones with WarpStream's TABLEFLOW_ prefix, mTLS without."""
        certs = self.secured.certificates
        return {
            "TABLEFLOW_SASL_USERNAME_ENV_VAR": self.secured.username,
            "TABLEFLOW_SASL_PASSWORD_ENV_VAR": self.secured.password,
            "WRONG_PASSWORD_ENV_VAR": self.secured.password + "-not",
            "MTLS_SERVER_CA_CERT_PATH_ENV_VAR": str(certs.ca.certificate),
            "MTLS_CERT_PATH_ENV_VAR": str(certs.client.certificate),
            "MTLS_KEY_PATH_ENV_VAR": str(certs.client.key),
            "UNTRUSTED_CERT_PATH_ENV_VAR": str(certs.untrusted_client.certificate),
            "UNTRUSTED_KEY_PATH_ENV_VAR": str(certs.untrusted_client.key),
            "EXPIRED_CERT_PATH_ENV_VAR": str(certs.expired_client.certificate),
            "EXPIRED_KEY_PATH_ENV_VAR": str(certs.expired_client.key),
            "REGISTRY_USERNAME_ENV_VAR": REGISTRY_USER,
            "REGISTRY_PASSWORD_ENV_VAR": REGISTRY_PASSWORD,
            # The registry's certificate is signed by the throwaway CA (confluent-kafka's client reads it).
            "SSL_CERT_FILE": str(certs.ca.certificate),
        }


@pytest.fixture(scope="module")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    with LocalKafka(data_dir=tmp_path_factory.mktemp("secured-kafka"), secured=True) as broker:
        yield broker


@pytest.fixture(scope="module")
def https_registry(
    secured_kafka: LocalKafka, schema_registry: LocalSchemaRegistry
) -> Iterator[BasicAuthProxy]:
    """The session's registry behind HTTPS (the broker's CA-signed certificate) and basic auth."""
    assert secured_kafka.secured_listeners is not None
    server = secured_kafka.secured_listeners.certificates.server
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(server.certificate, server.key)
    proxy = BasicAuthProxy(schema_registry.base_url, REGISTRY_USER, REGISTRY_PASSWORD, tls=context)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def server(postgres: LocalPostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogProcess]:
    url = postgres.create_database(f"floe_secured_{uuid.uuid4().hex[:8]}")
    with CatalogProcess(url, home=tmp_path_factory.mktemp("secured-floe")) as process:
        yield process


@pytest.fixture(scope="module")
def admin(server: CatalogProcess) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.token()}"}, timeout=60
    ) as client:
        yield client


@pytest.fixture(scope="module")
def setup(
    secured_kafka: LocalKafka,
    https_registry: BasicAuthProxy,
    schema_registry: LocalSchemaRegistry,
    admin: httpx.Client,
) -> Setup:
    """floe.yaml applied, every topic created and filled (through the plaintext listener)."""
    setup = Setup(secured_kafka, https_registry)
    for topic in [*setup.topics.values(), setup.avro_topic]:
        secured_kafka.create_topic(topic, 2)
    response = admin.put(
        "/management/v1/pipeline",
        json={"config": yaml.safe_load(setup.floe_yaml), "dry_run": False},
    )
    assert response.status_code == 200, response.text
    for cluster, topic in setup.topics.items():
        values = (
            json.dumps({"environment": "prod", "service": cluster, "status": i, "message": f"m{i}"}).encode()
            for i in range(120)
        )
        setup.produced[cluster] = produce(secured_kafka.bootstrap_servers, topic, values)
    schema_id = RegistryClient(schema_registry.url).register(
        f"{setup.avro_topic}-value", json.dumps(AVRO_WRITER)
    )
    parsed = fastavro.parse_schema(AVRO_WRITER)
    avro_values = []
    for i in range(80):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, {"event_id": f"e{i}", "user_id": i})
        avro_values.append(encode_confluent(schema_id, out.getvalue()))
    setup.produced["registry"] = produce(secured_kafka.bootstrap_servers, setup.avro_topic, avro_values)
    return setup


@pytest.fixture(scope="module")
def ingest(
    server: CatalogProcess, setup: Setup, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[IngestProcess]:
    args = ["--commit-interval", "1"]
    with IngestProcess(
        server, tmp_path_factory.mktemp("secured-ingest"), args=args, env=setup.environment()
    ) as process:
        yield process


@pytest.fixture(scope="module")
def catalog(server: CatalogProcess) -> RestCatalog:
    return server.catalog()


def _status(ingest: IngestProcess) -> dict[str, Any]:
    # The ingestion's metrics server answers a moment after its process starts (no Spark to wait for
    # when every table is on the shared consumer).
    deadline = time.monotonic() + 60
    while True:
        result = CliRunner().invoke(status_command, ["--metrics-url", ingest.metrics_url, "--output", "json"])
        if result.exit_code == 0 or "Cannot reach the ingestion service" not in result.output:
            break
        assert time.monotonic() < deadline, result.output
        time.sleep(0.5)
    assert result.exit_code == 0, result.output
    status: dict[str, Any] = json.loads(result.output)
    return status


@pytest.mark.parametrize("cluster", GOOD)
def test_ingests_exactly_once_through_the_secured_listener(
    cluster: str, setup: Setup, ingest: IngestProcess, admin: httpx.Client, catalog: RestCatalog
) -> None:
    topic = setup.topics[cluster]
    table = _table(topic)
    produced = setup.produced[cluster]
    wait_until_committed(admin, cluster, table, topic, produced.end_offsets(), ingest=ingest)
    rows = catalog.load_table(f"{cluster}.{table}").scan().to_arrow().to_pylist()
    assert len(rows) == len(produced.records) == 120
    by_position = {(r["_kafka"]["partition"], r["_kafka"]["offset"]): r for r in rows}
    assert set(by_position) == set(produced.records)
    for position, (_, value) in produced.records.items():
        expected = json.loads(value or b"")
        assert by_position[position]["status"] == expected["status"]
        assert by_position[position]["service"] == cluster
    assert committed_offsets(admin, cluster, table, topic) == produced.end_offsets()


def test_registry_behind_https_and_basic_auth(
    setup: Setup, ingest: IngestProcess, admin: httpx.Client, catalog: RestCatalog
) -> None:
    topic = setup.avro_topic
    table = _table(topic)
    produced = setup.produced["registry"]
    wait_until_committed(admin, "confluent_cloud", table, topic, produced.end_offsets(), ingest=ingest)
    rows = catalog.load_table(f"confluent_cloud.{table}").scan().to_arrow().to_pylist()
    assert sorted(r["user_id"] for r in rows) == list(range(80))
    assert setup.registry.url.startswith("https://")
    # The writer schema was read through the HTTPS proxy, with the credentials, and never refused.
    assert any(
        method == "GET" and "/schemas/ids/" in path and ok for method, path, ok in setup.registry.requests
    )
    assert all(ok for _, _, ok in setup.registry.requests)


def test_no_secret_on_a_command_line(
    setup: Setup,
    ingest: IngestProcess,
    server: CatalogProcess,
    secured_kafka: LocalKafka,
    admin: httpx.Client,
) -> None:
    """Issue 29 item 12: while `floe ingest` reads the secured listeners, neither it nor Spark's JVM nor
    the broker carries a SASL, registry or catalog secret in its argv; the broker's settings file holding
    its users' passwords is its owner's only."""
    cluster = GOOD[0]
    topic = setup.topics[cluster]
    wait_until_committed(
        admin, cluster, _table(topic), topic, setup.produced[cluster].end_offsets(), ingest=ingest
    )
    assert ingest.process is not None
    assert secured_kafka.process is not None
    secrets = [setup.secured.password, REGISTRY_PASSWORD, server.admin_client_secret]
    assert_no_secret_on_command_lines(
        ingest.process.pid, secrets, expected=(b"SparkSubmit",), include_root=True
    )
    assert_no_secret_on_command_lines(secured_kafka.process.pid, secrets, include_root=True)
    assert secured_kafka.config_path.stat().st_mode & 0o077 == 0


def test_status_shows_lag_through_the_secured_settings(
    setup: Setup, ingest: IngestProcess, admin: httpx.Client
) -> None:
    for cluster in GOOD:
        topic = setup.topics[cluster]
        wait_until_committed(admin, cluster, _table(topic), topic, setup.produced[cluster].end_offsets())
    # The lag comes from the brokers' high watermarks, read with each cluster's secured settings.
    deadline = time.monotonic() + 60
    while True:
        tables = {t["table"]: t for t in _status(ingest)["tables"]}
        entries = [tables.get(f"{c}.{_table(setup.topics[c])}", {}) for c in GOOD]
        if all(
            len(e.get("partitions", [])) == 2 and all(p.get("offset_lag") == 0 for p in e["partitions"])
            for e in entries
        ):
            break
        assert time.monotonic() < deadline, entries
        time.sleep(1)
    for entry in entries:
        assert entry["records"] == 120
        assert "error" not in entry


def test_refused_credentials_are_one_clear_error_and_nothing_is_committed(
    setup: Setup, ingest: IngestProcess, admin: httpx.Client, catalog: RestCatalog
) -> None:
    certs = setup.secured.certificates
    sasl_plain = f"127.0.0.1:{setup.secured.sasl_plain_port}"
    mtls = f"127.0.0.1:{setup.secured.mtls_port}"
    self_signed = f"127.0.0.1:{setup.secured.self_signed_port}"
    expected = {
        "wrong_password": (
            f"cannot start ingestion: source cluster wrong_password ({sasl_plain}): the broker refused the "
            "SASL login (PLAIN) with the user and password from the environment variables "
            "SASL_USERNAME_ENV_VAR and WRONG_PASSWORD_ENV_VAR that floe.yaml's credentials.sasl_username_env "
            "and credentials.sasl_password_env name: SASL authentication error: Authentication failed: "
            "Invalid username or password"
        ),
        "untrusted_cert": (
            f"cannot start ingestion: source cluster untrusted_cert ({mtls}): the broker refused floe's "
            "client certificate (the file the environment variable UNTRUSTED_CERT_PATH_ENV_VAR names, "
            "credentials.mtls_client_cert_env): "
        ),
        "expired_cert": (
            f"source cluster expired_cert: the client certificate {certs.expired_client.certificate} (from "
            "the environment variable EXPIRED_CERT_PATH_ENV_VAR that credentials.mtls_client_cert_env "
            "names) expired on "
        ),
        "missing_env": (
            "source cluster missing_env: environment variable NOBODY_SET_THIS_ENV_VAR (or "
            "TABLEFLOW_NOBODY_SET_THIS_ENV_VAR) is not set; credentials.sasl_password_env names it"
        ),
        "self_signed_verified": (
            f"cannot start ingestion: source cluster self_signed_verified ({self_signed}): the broker's TLS "
            "certificate cannot be verified against the system's CA certificates (no "
            "credentials.mtls_server_ca_cert_env): "
        ),
    }
    names = {cluster: f"{cluster}.{_table(setup.topics[cluster])}" for cluster in REFUSED}
    deadline = time.monotonic() + 240
    while True:
        errors = {t["table"]: t.get("error", "") for t in _status(ingest)["tables"]}
        if all(errors.get(name) for name in names.values()):
            break
        assert time.monotonic() < deadline, (errors, ingest.log_text()[-4000:])
        assert ingest.process is not None
        assert ingest.process.poll() is None, ingest.log_text()[-4000:]
        time.sleep(1)
    # By now every table of the good clusters committed too: the refused ones were not for lack of time.
    for cluster in GOOD:
        topic = setup.topics[cluster]
        wait_until_committed(admin, cluster, _table(topic), topic, setup.produced[cluster].end_offsets())
    time.sleep(5)  # time for the refused tables to be retried (with backoff) and to commit, were they able
    log = ingest.log_text()
    for cluster, message in expected.items():
        name = names[cluster]
        assert errors[name].startswith(message), (cluster, errors[name])
        # Once in the log however often it was retried, and the same as in floe status.
        lines = [line for line in log.splitlines() if f"{name}: " in line]
        assert len(lines) == 1, (cluster, lines)
        assert lines[0].endswith(f"{name}: {errors[name]}"), (cluster, lines[0])
        topic = setup.topics[cluster]
        assert committed_offsets(admin, cluster, _table(topic), topic) == {}
        assert catalog.load_table(name).current_snapshot() is None
    assert "Traceback" not in log
    assert setup.secured.password not in log
    # The table view of floe status shows each reason too.
    view = CliRunner().invoke(status_command, ["--metrics-url", ingest.metrics_url], env={"COLUMNS": "400"})
    assert view.exit_code == 0
    assert "WRONG_PASSWORD_ENV_VAR" in view.output


def test_the_self_signed_broker_is_reached_only_when_verification_is_skipped(
    setup: Setup, ingest: IngestProcess, admin: httpx.Client
) -> None:
    # The same broker, its certificate self-signed for another name: skip_verify ingests (above), and
    # without it the connection is refused at the TLS handshake (the refusal test checks the message).
    skipped = setup.topics["self_signed_skip_verify"]
    verified = setup.topics["self_signed_verified"]
    produced = setup.produced["self_signed_skip_verify"]
    wait_until_committed(
        admin, "self_signed_skip_verify", _table(skipped), skipped, produced.end_offsets(), ingest=ingest
    )
    assert committed_offsets(admin, "self_signed_verified", _table(verified), verified) == {}
    presented = setup.secured.certificates.self_signed_server.certificate.read_text()
    leaf = x509.load_pem_x509_certificate(presented.encode())
    assert leaf.issuer == leaf.subject
    assert [
        str(n.value) for n in leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    ] == ["not-this-broker.invalid"]
