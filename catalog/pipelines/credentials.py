"""Kafka client properties of a source cluster, its credentials resolved from the environment.

floe.yaml only names environment variables. Like WarpStream's agents (which prefix `TABLEFLOW_`), floe
looks up `NAME`, then `TABLEFLOW_NAME`. Two forms: Spark/Java (`kafka.`-prefixed options of Spark's
Kafka source, Java client property names) and librdkafka (confluent-kafka).

`tls_insecure_skip_verify` skips both the certificate-chain and the host name check. librdkafka has a
property for each. The Java client has none for the chain (only a custom `SslEngineFactory` class could
trust everything), so the Spark form turns off the host name check and trusts exactly the certificates
the brokers present, which the caller fetches when it resolves the settings (`presented_certificates`,
ingest/kafka_connection.py): trust on first use, renewed whenever the settings are resolved again. Java
reads a client certificate and key from PEM text, so the Spark form reads the files the mTLS variables
point at (through `read_text`); the key must be an unencrypted PKCS#8 key
(`-----BEGIN PRIVATE KEY-----`), and an expired client certificate is refused here, by name, rather than
by the broker's TLS handshake, which says only "certificate unknown".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from cryptography import x509

from catalog.pipelines.sources import SchemaRegistryConfig, SourceCluster

WARPSTREAM_PREFIX = "TABLEFLOW_"
ClientForm = Literal["spark", "librdkafka"]

_JAVA_SASL = {"plain": "PLAIN", "scram-256": "SCRAM-SHA-256", "scram-512": "SCRAM-SHA-512"}
_JAVA_LOGIN_MODULE = {
    "plain": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "scram-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "scram-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class CredentialError(Exception):
    """A credential cannot be resolved: a variable is not set, or a file it names cannot be used."""


def env_value(name: str, environ: Mapping[str, str], owner: str, key: str) -> str:
    """The value of variable `name` (or `TABLEFLOW_<name>`); `owner` and `key` say who asked for it."""
    for candidate in (name, WARPSTREAM_PREFIX + name):
        value = environ.get(candidate)
        if value:
            return value
    raise CredentialError(
        f"{owner}: environment variable {name} (or {WARPSTREAM_PREFIX}{name}) is not set; {key} names it"
    )


def _read_file(path: str) -> str:
    return Path(path).read_text()


def security_protocol(cluster: SourceCluster) -> str:
    creds = cluster.credentials
    if creds.uses_sasl:
        return "SASL_SSL" if creds.use_tls else "SASL_PLAINTEXT"
    return "SSL" if creds.use_tls else "PLAINTEXT"


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def resolve_credentials(
    cluster: SourceCluster,
    environ: Mapping[str, str],
    form: ClientForm = "spark",
    read_text: Callable[[str], str] = _read_file,
    presented_certificates: Callable[[SourceCluster], str] | None = None,
    now: dt.datetime | None = None,
) -> dict[str, str]:
    """Kafka client properties for `cluster` (bootstrap servers and security), in `form`.

    `presented_certificates` gives the PEM certificates the cluster's brokers present: the Spark form
    trusts them when `tls_insecure_skip_verify` is set (without it, only the host name check is off).
    Raises `CredentialError` naming the missing variable (or the unusable file)."""
    creds = cluster.credentials
    owner = f"source cluster {cluster.name}"

    def env(name: str | None, key: str) -> str:
        assert name is not None
        return env_value(name, environ, owner, f"credentials.{key}")

    props: dict[str, str] = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": security_protocol(cluster),
    }
    if creds.uses_sasl:
        username = env(creds.sasl_username_env, "sasl_username_env")
        password = env(creds.sasl_password_env, "sasl_password_env")
        mechanism = creds.sasl_mechanism or "plain"
        if form == "spark":
            props["sasl.mechanism"] = _JAVA_SASL[mechanism]
            props["sasl.jaas.config"] = (
                f"{_JAVA_LOGIN_MODULE[mechanism]} required "
                f"username={_jaas_quote(username)} password={_jaas_quote(password)};"
            )
        else:
            props["sasl.mechanism"] = _JAVA_SASL[mechanism]
            props["sasl.username"] = username
            props["sasl.password"] = password
    if creds.use_tls:
        ca = (
            env(creds.mtls_server_ca_cert_env, "mtls_server_ca_cert_env")
            if creds.mtls_server_ca_cert_env
            else None
        )
        if form == "spark":
            if ca is not None:
                props["ssl.truststore.type"] = "PEM"
                props["ssl.truststore.location"] = ca
            if creds.tls_insecure_skip_verify:
                props["ssl.endpoint.identification.algorithm"] = ""
                if presented_certificates is not None:
                    # Trust what the brokers present (and the CA, when one is named): a PEM truststore
                    # given inline, so Spark's executors need no file.
                    trusted = _pem(read_text, ca, owner, "CA certificate", "server") if ca else ""
                    props.pop("ssl.truststore.location", None)
                    props["ssl.truststore.type"] = "PEM"
                    props["ssl.truststore.certificates"] = trusted + presented_certificates(cluster)
            if creds.uses_mtls:
                cert_path = env(creds.mtls_client_cert_env, "mtls_client_cert_env")
                key_path = env(creds.mtls_client_key_env, "mtls_client_key_env")
                certificate = _pem(read_text, cert_path, owner, "certificate")
                _check_validity(certificate, cert_path, owner, creds.mtls_client_cert_env, now)
                props["ssl.keystore.type"] = "PEM"
                props["ssl.keystore.certificate.chain"] = certificate
                key = _pem(read_text, key_path, owner, "private key")
                if "BEGIN PRIVATE KEY" not in key:
                    raise CredentialError(
                        f"{owner}: the client key {key_path} is not an unencrypted PKCS#8 key, which Java "
                        f"needs; convert it: openssl pkcs8 -topk8 -nocrypt -in {key_path} -out key.pem"
                    )
                props["ssl.keystore.key"] = key
        else:
            if ca is not None:
                props["ssl.ca.location"] = ca
            if creds.tls_insecure_skip_verify:
                props["enable.ssl.certificate.verification"] = "false"
                props["ssl.endpoint.identification.algorithm"] = "none"
            if creds.uses_mtls:
                props["ssl.certificate.location"] = env(creds.mtls_client_cert_env, "mtls_client_cert_env")
                props["ssl.key.location"] = env(creds.mtls_client_key_env, "mtls_client_key_env")
    if form == "spark":
        return {f"kafka.{key}": value for key, value in props.items()}
    return props


def _pem(read_text: Callable[[str], str], path: str, owner: str, what: str, whose: str = "client") -> str:
    try:
        text = read_text(path)
    except OSError as exc:
        raise CredentialError(f"{owner}: cannot read the {whose} {what} {path}: {exc}") from exc
    if "-----BEGIN" not in text:
        raise CredentialError(f"{owner}: the {whose} {what} {path} is not PEM encoded")
    return text if text.endswith("\n") else text + "\n"


def _check_validity(
    certificate: str, path: str, owner: str, variable: str | None, now: dt.datetime | None
) -> None:
    """Refuse a client certificate that expired (or is not valid yet), naming the file and setting."""
    try:
        leaf = x509.load_pem_x509_certificates(certificate.encode())[0]
    except ValueError as exc:
        raise CredentialError(
            f"{owner}: the client certificate {path} is not a PEM certificate: {exc}"
        ) from exc
    now = now or dt.datetime.now(dt.UTC)
    source = f"from the environment variable {variable} that credentials.mtls_client_cert_env names"
    if leaf.not_valid_after_utc < now:
        raise CredentialError(
            f"{owner}: the client certificate {path} ({source}) expired on "
            f"{leaf.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC"
        )
    if leaf.not_valid_before_utc > now:
        raise CredentialError(
            f"{owner}: the client certificate {path} ({source}) is not valid before "
            f"{leaf.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC"
        )


def resolve_registry_auth(
    registry: SchemaRegistryConfig, environ: Mapping[str, str]
) -> tuple[str, str] | None:
    """The schema registry's basic-auth (user, password), or None when it needs none."""
    if registry.basic_auth_username_env is None or registry.basic_auth_password_env is None:
        return None
    owner = "schema_registry"
    return (
        env_value(
            registry.basic_auth_username_env, environ, owner, "schema_registry.basic_auth_username_env"
        ),
        env_value(
            registry.basic_auth_password_env, environ, owner, "schema_registry.basic_auth_password_env"
        ),
    )
