"""Where floe.yaml's data comes from and goes to: source clusters (brokers and credentials), the schema
registry, the destination bucket and the Glue mirror."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from catalog.pipelines.validation import (
    ConfigModel,
    EnvName,
    HttpUrl,
    Loc,
    NonEmpty,
    Text,
    choice,
    context_of,
    none_as_empty,
    problem,
    problems,
)
from catalog.pipelines.yaml_values import describe_value
from catalog.urls import strip_userinfo

SASL_MECHANISMS = ("plain", "scram-256", "scram-512")
# The Kafka clients' names of the same mechanisms.
SASL_ALIASES = {"scram-sha-256": "scram-256", "scram-sha-512": "scram-512"}
SaslMechanism = Literal["plain", "scram-256", "scram-512"]
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


class Broker(ConfigModel):
    hostname: Text
    port: Annotated[int, Field(ge=1, le=65535)]

    @field_validator("hostname")
    @classmethod
    def _strip(cls, hostname: str) -> str:
        if "@" in hostname:  # not echoed: it may hold a password
            raise problem(
                "a broker hostname must not hold credentials (user:password@): name them in the cluster's "
                "credentials (sasl_username_env and sasl_password_env)"
            )
        return hostname.strip()

    def __str__(self) -> str:
        host = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        return f"{host}:{self.port}"


class Credentials(ConfigModel):
    """How to connect to a source cluster. The `*_env` fields name environment variables (resolved by
    `catalog.pipelines.credentials.resolve_credentials`): secrets are never part of the configuration."""

    use_tls: bool = False
    tls_insecure_skip_verify: bool = False
    sasl_username_env: EnvName | None = None
    sasl_password_env: EnvName | None = None
    sasl_mechanism: Annotated[SaslMechanism, choice(SASL_MECHANISMS, SASL_ALIASES)] | None = None
    mtls_client_cert_env: EnvName | None = None
    mtls_client_key_env: EnvName | None = None
    mtls_server_ca_cert_env: EnvName | None = None

    @property
    def uses_sasl(self) -> bool:
        return self.sasl_username_env is not None

    @property
    def uses_mtls(self) -> bool:
        return self.mtls_client_cert_env is not None

    @model_validator(mode="after")
    def _pairs(self) -> Credentials:
        """SASL and mTLS settings come in pairs; mTLS needs TLS; SASL defaults to PLAIN as WarpStream's."""
        found: list[tuple[Loc, str]] = []
        if (self.sasl_username_env is None) != (self.sasl_password_env is None):
            missing = "sasl_password_env" if self.sasl_username_env is not None else "sasl_username_env"
            found.append(((missing,), "SASL needs both sasl_username_env and sasl_password_env"))
        if self.sasl_mechanism is not None and self.sasl_username_env is None:
            found.append(
                (("sasl_mechanism",), "sasl_mechanism needs sasl_username_env and sasl_password_env")
            )
        if (self.mtls_client_cert_env is None) != (self.mtls_client_key_env is None):
            missing = (
                "mtls_client_key_env" if self.mtls_client_cert_env is not None else "mtls_client_cert_env"
            )
            found.append(((missing,), "mTLS needs both mtls_client_cert_env and mtls_client_key_env"))
        if not self.use_tls:
            for key in ("mtls_client_cert_env", "mtls_client_key_env", "mtls_server_ca_cert_env"):
                if getattr(self, key) is not None:
                    found.append(((key,), f"{key} needs use_tls: true"))
        if found:
            raise problems(found)
        if self.sasl_username_env is not None and self.sasl_mechanism is None:
            return self.model_copy(update={"sasl_mechanism": "plain"})
        return self


class SourceCluster(ConfigModel):
    name: Text
    bootstrap_brokers: Annotated[tuple[Broker, ...], NonEmpty] = Field(strict=False)
    credentials: Annotated[Credentials, BeforeValidator(none_as_empty)] = Credentials()

    @property
    def bootstrap_servers(self) -> str:
        """`host:port,host:port`: the Kafka clients' `bootstrap.servers`."""
        return ",".join(str(b) for b in self.bootstrap_brokers)

    @field_validator("name")
    @classmethod
    def _unique_name(cls, name: str, info: ValidationInfo) -> str:
        """A valid name, once; tables may refer to it even when the rest of the cluster is invalid."""
        if not CLUSTER_NAME.match(name):
            raise problem(f"invalid cluster name {name!r}: use letters, digits, '_' and '-' (at most 128)")
        context = context_of(info)
        if context is not None:
            if name in context.clusters:
                raise problem(f"duplicate source cluster {name!r} (also at {context.clusters[name]})")
            context.clusters[name] = context.path
        return name


class SchemaRegistryConfig(ConfigModel):
    """A Confluent-compatible schema registry (records carry the 5-byte wire-format prefix)."""

    url: HttpUrl
    basic_auth_username_env: EnvName | None = None
    basic_auth_password_env: EnvName | None = None

    @field_validator("url")
    @classmethod
    def _known(cls, url: str, info: ValidationInfo) -> str:
        context = context_of(info)
        if context is not None:
            context.registry_url = url
        return url

    @model_validator(mode="after")
    def _pair(self) -> SchemaRegistryConfig:
        if (self.basic_auth_username_env is None) != (self.basic_auth_password_env is None):
            missing = (
                "basic_auth_password_env"
                if self.basic_auth_username_env is not None
                else "basic_auth_username_env"
            )
            raise problems(
                [
                    (
                        (missing,),
                        "basic authentication needs both basic_auth_username_env and basic_auth_password_env",
                    )
                ]
            )
        return self


def _account_id(value: Any) -> Any:
    # An unquoted account id is read as a number by YAML.
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not re.fullmatch(r"\d{12}", text):
        raise problem(f"expected a 12-digit AWS account id; got {describe_value(value)}")
    return text


class GlueConfig(ConfigModel):
    """Where the Glue publisher mirrors the tables (stored now, used by the publisher)."""

    region: Text | None = None
    catalog_id: Annotated[str, BeforeValidator(_account_id)] | None = None
    endpoint: HttpUrl | None = None


# Tables go below this folder of the bucket (and prefix), as WarpStream's go below `warpstream/_tableflow`.
BUCKET_FOLDER = "floe"
_BUCKET_PARAMETERS = ("region", "prefix", "endpoint", "s3ForcePathStyle", "use_path_style", "awssdk")
_WAREHOUSE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-]+")


@dataclass(frozen=True)
class BucketDestination:
    """`destination_bucket_url` parsed: `s3://bucket?region=..&prefix=..` (or `file:///path` locally).

    floe keeps the tables in a warehouse of its own at `<bucket>/<prefix>/floe`, named after the bucket
    and prefix."""

    url: str
    scheme: Literal["s3", "file"]
    bucket: str
    region: str | None = None
    prefix: str | None = None
    endpoint: str | None = None
    path_style: bool = False

    @property
    def location(self) -> str:
        parts = [self.bucket.rstrip("/")]
        if self.prefix:
            parts.append(self.prefix)
        parts.append(BUCKET_FOLDER)
        root = "/".join(parts)
        return f"s3://{root}" if self.scheme == "s3" else f"file://{root}"

    @property
    def warehouse_name(self) -> str:
        base = self.bucket if self.scheme == "s3" else "file-" + self.bucket.strip("/")
        if self.prefix:
            base += "-" + self.prefix
        return _WAREHOUSE_NAME_CHARS.sub("-", base).strip("-.")[:200] or "bucket"

    def storage_properties(self) -> dict[str, str]:
        """The warehouse's storage settings this URL asks for."""
        props: dict[str, str] = {}
        if self.region:
            props["s3.region"] = self.region
        if self.endpoint:
            props["s3.endpoint"] = self.endpoint
        if self.path_style:
            props["s3.path-style-access"] = "true"
        return props


def parse_bucket_url(url: str) -> BucketDestination | list[str]:
    """The destination a bucket URL names, or every problem with it."""
    parsed = urlsplit(url.strip())
    if "@" in parsed.netloc or any("@" in urlsplit(v).netloc for _, v in parse_qsl(parsed.query)):
        # Not echoed: it may hold a password.
        return [
            "a bucket URL (and its endpoint) must not hold credentials (user:password@): floe uses the "
            "server's storage credentials"
        ]
    if parsed.scheme not in ("s3", "file"):
        return [f"expected an s3:// (or file://) bucket URL; got {url!r}"]
    found: list[str] = []
    params: dict[str, str] = {}
    for key, value in parse_qsl(parsed.query, keep_blank_values=True):
        if key not in _BUCKET_PARAMETERS:
            found.append(f"unknown query parameter {key!r} (expected: region, prefix, endpoint)")
            continue
        params[key] = value
    prefix = params.get("prefix", "").strip("/") or None
    path_style = any(params.get(k, "").lower() == "true" for k in ("s3ForcePathStyle", "use_path_style"))
    endpoint = params.get("endpoint") or None
    if endpoint is not None and urlsplit(endpoint).scheme not in ("http", "https"):
        return [*found, f"endpoint must be an http:// or https:// URL; got {endpoint!r}"]
    if parsed.scheme == "s3":
        if not parsed.netloc or parsed.path not in ("", "/"):
            return [*found, f"expected s3://<bucket>?region=..&prefix=..; got {url!r}"]
        destination = BucketDestination(
            url, "s3", parsed.netloc, params.get("region") or None, prefix, endpoint, path_style
        )
    elif parsed.netloc or not parsed.path.startswith("/"):
        return [*found, f"expected file:///<absolute path>; got {url!r}"]
    else:
        destination = BucketDestination(url, "file", parsed.path.rstrip("/") or "/", None, prefix)
    return found or destination


__all__ = [
    "BUCKET_FOLDER",
    "SASL_ALIASES",
    "SASL_MECHANISMS",
    "Broker",
    "BucketDestination",
    "Credentials",
    "GlueConfig",
    "SchemaRegistryConfig",
    "SourceCluster",
    "parse_bucket_url",
    "strip_userinfo",
]
