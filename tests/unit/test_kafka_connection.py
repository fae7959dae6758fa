"""What a refused Kafka connection is reported as, once; the throwaway certificates' properties.

The secured broker itself is exercised by tests/e2e/test_secured_kafka.py; these check the wording and
bookkeeping with librdkafka's error texts as it reports them."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from catalog.pipelines import parse_config
from devtools.tls import MISMATCHED_NAME, certificates_in, generate_certificates
from ingest.kafka_connection import describe_failure
from ingest.metrics import REGISTRY, TableProblems


def _cluster(**credentials: Any) -> Any:
    document = {
        "source_clusters": [
            {
                "name": "orders",
                "bootstrap_brokers": [{"hostname": "b1", "port": 9096}],
                "credentials": credentials,
            }
        ],
        "tables": [],
    }
    return parse_config(document).source_clusters[0]


def test_a_refused_login_names_the_variables_and_settings() -> None:
    cluster = _cluster(use_tls=True, sasl_mechanism="scram-512", sasl_username_env="U", sasl_password_env="P")
    errors = [
        (
            "_AUTHENTICATION",
            "sasl_ssl://b1:9096/bootstrap: SASL authentication error: Authentication failed "
            "(after 301ms in state AUTH_REQ)",
        ),
        ("_ALL_BROKERS_DOWN", "1/1 brokers are down"),
    ]
    assert describe_failure(cluster, errors, "Local: Broker transport failure") == (
        "source cluster orders (b1:9096): the broker refused the SASL login (SCRAM-SHA-512) with the user "
        "and password from the environment variables U and P that floe.yaml's "
        "credentials.sasl_username_env and credentials.sasl_password_env name: SASL authentication error: "
        "Authentication failed"
    )


def test_certificate_failures_read_the_same_however_librdkafka_words_them() -> None:
    cluster = _cluster(use_tls=True, mtls_server_ca_cert_env="CA")
    first = (
        "ssl://b1:9096/bootstrap: SSL handshake failed: "
        "error:0A000086:SSL routines::certificate verify failed: "
    )
    second = (
        "ssl://b1:9096/1: error:0A000086:SSL routines::certificate verify failed: broker certificate could "
    )
    messages = {
        describe_failure(
            cluster, [("_SSL", text + "broker certificate could not be verified, verify that...")], ""
        )
        for text in (first, second)
    }
    assert messages == {
        "source cluster orders (b1:9096): the broker's TLS certificate cannot be verified against the CA "
        "certificate in the file the environment variable CA names (credentials.mtls_server_ca_cert_env): "
        "TLS handshake: certificate verify failed; name the CA that signed it in "
        "credentials.mtls_server_ca_cert_env, or set credentials.tls_insecure_skip_verify: true to skip "
        "verification"
    }


def test_a_refused_client_certificate_names_its_setting() -> None:
    cluster = _cluster(use_tls=True, mtls_client_cert_env="CERT", mtls_client_key_env="KEY")
    alert = (
        "ssl://b1:9096/bootstrap: Receive failed: error:0A000412:SSL routines::ssl/tls alert bad certificate"
    )
    assert describe_failure(cluster, [("_TRANSPORT", alert)], "") == (
        "source cluster orders (b1:9096): the broker refused floe's client certificate (the file the "
        "environment variable CERT names, credentials.mtls_client_cert_env): TLS alert from the broker: "
        "bad certificate; is it signed by a CA the broker trusts, and still valid?"
    )
    no_certificate = _cluster(use_tls=True)
    assert "requires a client certificate (mTLS)" in describe_failure(
        no_certificate, [("_TRANSPORT", alert)], ""
    )
    refused = (
        "ssl://b1:9096/bootstrap: Connect to ipv4#10.0.0.1:9096 failed: Connection refused "
        "(after 0ms in state CONNECT)"
    )
    assert describe_failure(no_certificate, [("_TRANSPORT", refused)], "") == (
        "source cluster orders (b1:9096): cannot connect: Connect to ipv4#10.0.0.1:9096 failed: Connection "
        "refused; check bootstrap_brokers and credentials.use_tls"
    )


def test_a_table_problem_is_logged_once_and_published_until_cleared(caplog: pytest.LogCaptureFixture) -> None:
    problems = TableProblems(logging.getLogger("test.problems"))

    def published() -> list[tuple[str, str]]:
        return [
            (s.labels["table"], s.labels["error"])
            for family in REGISTRY.collect()
            if family.name == "floe_ingest_table_error"
            for s in family.samples
            if s.labels.get("table") == "ns.t"
        ]

    with caplog.at_level(logging.ERROR, "test.problems"):
        for _ in range(3):
            problems.report("ns.t", "refused")
        problems.report("ns.t", "refused differently")
    assert [r.getMessage() for r in caplog.records] == ["ns.t: refused", "ns.t: refused differently"]
    assert published() == [("ns.t", "refused differently")]
    problems.clear("ns.t")
    assert published() == []
    assert problems.current() == {}


def test_throwaway_certificates(tmp_path: Path) -> None:
    now = dt.datetime.now(dt.UTC)
    certs = generate_certificates(tmp_path, now)

    def load(path: Path) -> x509.Certificate:
        return x509.load_pem_x509_certificate(path.read_bytes())

    ca, server = load(certs.ca.certificate), load(certs.server.certificate)
    assert server.issuer == ca.subject
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(n) for n in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    self_signed = load(certs.self_signed_server.certificate)
    assert self_signed.issuer == self_signed.subject
    assert self_signed.extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    ).value.get_values_for_type(x509.DNSName) == [MISMATCHED_NAME]
    assert load(certs.expired_client.certificate).not_valid_after_utc < now
    assert load(certs.untrusted_client.certificate).issuer == load(certs.untrusted_ca.certificate).subject
    assert certs.client.key.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    # Reused while valid; generated again when about to expire.
    assert certificates_in(tmp_path, now) == certs
    assert certificates_in(tmp_path, now).ca.certificate.read_bytes() == certs.ca.certificate.read_bytes()
    before = certs.ca.certificate.read_bytes()
    certificates_in(tmp_path, now + dt.timedelta(days=29, hours=12))
    assert certs.ca.certificate.read_bytes() != before
