"""Reaching a source cluster from the Python driver (confluent-kafka): checks and TLS trust on first use.

`check_connection` asks a cluster for a topic's metadata before ingestion starts and turns what
librdkafka reports (a refused SASL login, a certificate that cannot be verified, a client certificate the
broker refuses) into one `KafkaConnectionError` naming the cluster and the floe.yaml setting to check, so
a misconfigured cluster is one clear line in the log and in `floe status`, not a failed Spark query.

`PresentedCertificates` fetches the certificates a cluster's brokers present, for the Java client's
`tls_insecure_skip_verify` (see catalog/pipelines/credentials.py).
"""

from __future__ import annotations

import re
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any

from catalog.pipelines import CredentialError, SourceCluster, resolve_credentials

# How long fetched broker certificates are trusted before they are fetched again.
CERTIFICATES_TTL = 600.0
_MECHANISMS = {"plain": "PLAIN", "scram-256": "SCRAM-SHA-256", "scram-512": "SCRAM-SHA-512"}
_LIBRDKAFKA_PREFIX = re.compile(r"^\S+://\S+?/\S+: ")  # "sasl_ssl://host:port/bootstrap: "
_LIBRDKAFKA_SUFFIX = re.compile(r" \(after \d+ms in state \w+\)$")


class KafkaConnectionError(RuntimeError):
    """A source cluster refused floe, or cannot be reached; the message names the cluster and setting."""


def _reason(text: str) -> str:
    """librdkafka's error text without the broker address prefix, the state suffix and its own hints."""
    text = _LIBRDKAFKA_SUFFIX.sub("", _LIBRDKAFKA_PREFIX.sub("", text))
    # Its hint names librdkafka's property (ssl.ca.location); floe.yaml's settings are named instead.
    return text.split(": broker certificate could not be verified")[0]


def describe_failure(cluster: SourceCluster, errors: list[tuple[str, str]], fallback: str) -> str:
    """One message for what librdkafka reported (error name, text) while connecting to `cluster`."""
    creds = cluster.credentials
    owner = f"source cluster {cluster.name} ({cluster.bootstrap_servers})"
    for name, text in errors:
        reason = _reason(text)
        if name == "_AUTHENTICATION":
            mechanism = _MECHANISMS[creds.sasl_mechanism or "plain"]
            return (
                f"{owner}: the broker refused the SASL login ({mechanism}) "
                f"with the user and password from the environment variables {creds.sasl_username_env} and "
                f"{creds.sasl_password_env} that floe.yaml's credentials.sasl_username_env and "
                f"credentials.sasl_password_env name: {reason}"
            )
        verification = re.search(r"certificate verify failed|certificate has expired", reason)
        if verification:
            # librdkafka words the same failure differently from one attempt to the next.
            reason = f"TLS handshake: {verification.group(0)}"
            trust = (
                f"the CA certificate in the file the environment variable {creds.mtls_server_ca_cert_env} "
                "names (credentials.mtls_server_ca_cert_env)"
                if creds.mtls_server_ca_cert_env
                else "the system's CA certificates (no credentials.mtls_server_ca_cert_env)"
            )
            return (
                f"{owner}: the broker's TLS certificate cannot be verified against {trust}: {reason}; "
                "name the CA that signed it in credentials.mtls_server_ca_cert_env, or set "
                "credentials.tls_insecure_skip_verify: true to skip verification"
            )
        alert = re.search(
            r"alert (bad certificate|certificate unknown|certificate required|unknown ca)", reason
        )
        if alert:
            reason = f"TLS alert from the broker: {alert.group(1)}"
            if creds.uses_mtls:
                return (
                    f"{owner}: the broker refused floe's client certificate (the file the environment "
                    f"variable {creds.mtls_client_cert_env} names, credentials.mtls_client_cert_env): "
                    f"{reason}; is it signed by a CA the broker trusts, and still valid?"
                )
            return (
                f"{owner}: the broker requires a client certificate (mTLS): set "
                f"credentials.mtls_client_cert_env and credentials.mtls_client_key_env ({reason})"
            )
    for name, text in errors:
        if name != "_ALL_BROKERS_DOWN":
            return (
                f"{owner}: cannot connect: {_reason(text)}; check bootstrap_brokers and credentials.use_tls"
            )
    return f"{owner}: cannot connect: {fallback}"


def check_connection(
    cluster: SourceCluster, consumer_config: Mapping[str, str], topic: str, timeout: float = 15.0
) -> None:
    """Connect to `cluster` with its librdkafka settings and read `topic`'s metadata, or raise
    `KafkaConnectionError` with what went wrong."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[tuple[str, str]] = []

    def on_error(error: Any) -> None:
        errors.append((error.name(), error.str()))

    # Its own log stays quiet: what it reports comes back as one error, not a line per attempt.
    config: dict[str, Any] = {**consumer_config, "error_cb": on_error, "log_level": 0}
    admin = AdminClient(config)
    deadline = time.monotonic() + timeout
    failure = "no answer"
    while True:
        try:
            admin.list_topics(topic, timeout=min(2.0, max(0.1, deadline - time.monotonic())))
            return
        except KafkaException as exc:
            failure = exc.args[0].str() if exc.args else str(exc)
        admin.poll(0.1)  # serve the error callbacks
        # A refused login or certificate will not change by retrying; a broker not up yet might.
        if any(_decisive(name, text) for name, text in errors) or time.monotonic() >= deadline:
            raise KafkaConnectionError(describe_failure(cluster, errors, failure))


def _decisive(name: str, text: str) -> bool:
    return name in ("_AUTHENTICATION", "_SSL") or " alert " in text


def _leaf_certificate(host: str, port: int, client: tuple[str, str] | None, timeout: float) -> str:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    # Fetching without verifying is the point: the caller asked to skip verification.
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if client is not None:
        context.load_cert_chain(*client)  # a broker requiring mTLS ends the handshake without one
    with (
        socket.create_connection((host, port), timeout=timeout) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    if der is None:
        raise ssl.SSLError(f"{host}:{port} presented no certificate")
    return ssl.DER_cert_to_PEM_cert(der)


class PresentedCertificates:
    """The certificates a cluster's brokers present (PEM), cached for `ttl` seconds per cluster.

    The bootstrap brokers' first, then every broker the cluster's metadata lists (Python's `ssl` gives
    only each broker's own certificate, not the rest of its chain, so each broker is asked). A broker
    that joins later is trusted when the certificates are fetched again.
    """

    def __init__(
        self, environ: Mapping[str, str], ttl: float = CERTIFICATES_TTL, timeout: float = 10.0
    ) -> None:
        self.environ = environ
        self.ttl = ttl
        self.timeout = timeout
        self._cache: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def __call__(self, cluster: SourceCluster) -> str:
        key = f"{cluster.name}\0{cluster.bootstrap_servers}"
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and time.monotonic() - cached[0] < self.ttl:
                return cached[1]
        pem = self._fetch(cluster)
        with self._lock:
            self._cache[key] = (time.monotonic(), pem)
        return pem

    def _fetch(self, cluster: SourceCluster) -> str:
        creds = cluster.credentials
        config = resolve_credentials(cluster, self.environ, "librdkafka")
        client = (config["ssl.certificate.location"], config["ssl.key.location"]) if creds.uses_mtls else None
        addresses = [(b.hostname, b.port) for b in cluster.bootstrap_brokers]
        try:
            from confluent_kafka.admin import AdminClient

            # librdkafka skips verification too (tls_insecure_skip_verify): ask it for the other brokers.
            metadata = AdminClient({**config, "log_level": 0}).list_topics(timeout=self.timeout)
            addresses += [(str(b.host), b.port) for b in metadata.brokers.values() if b.host]
        except Exception:  # the bootstrap brokers' certificates are still worth trusting
            pass
        certificates: list[str] = []
        problems: list[str] = []
        for host, port in dict.fromkeys(addresses):
            try:
                pem = _leaf_certificate(host, port, client, self.timeout)
            except (OSError, ssl.SSLError) as exc:
                problems.append(f"{host}:{port}: {exc}")
                continue
            if pem not in certificates:
                certificates.append(pem)
        if not certificates:
            raise CredentialError(
                f"source cluster {cluster.name}: cannot fetch the certificates its brokers present "
                f"(credentials.tls_insecure_skip_verify): {'; '.join(problems)}"
            )
        return "".join(certificates)
