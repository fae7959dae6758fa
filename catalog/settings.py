"""The catalog server's settings: every `FLOE_*` variable `floe serve` reads, validated at start.

One pydantic-settings model. `FLOE_HOME` (default `./.floe`) holds the embedded SQLite database and the
default warehouse; `FLOE_DATABASE_URL` points at PostgreSQL in production; `FLOE_WAREHOUSE` is the default
warehouse's location (a local path, `file://…` or `s3://bucket/prefix`), with `FLOE_S3_*` for S3-compatible
storage and `FLOE_STS_*` for storage credential vending; `FLOE_GLUE_*` publish S3 warehouses' tables to AWS
Glue. Each field's description is its documentation: README's configuration table is generated from it
(`floe config-doc`, checked by tests/unit/test_config_doc.py). An empty variable counts as unset.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

DEFAULT_WAREHOUSE_NAME = "default"
ENV_PREFIX = "FLOE_"
_ROLES = ("reader", "writer", "admin")

# The environment `from_env(env)` reads instead of os.environ, for the duration of one construction.
_ENVIRONMENT: ContextVar[Mapping[str, str] | None] = ContextVar("floe_settings_environment", default=None)


class SettingsError(ValueError):
    """Settings from the environment that do not validate: one line per bad variable, each named."""


def _normalize_database_url(url: str) -> str:
    """Accept the usual spellings and pick the async drivers floe ships with."""
    for prefix in ("postgresql://", "postgres://", "postgresql+psycopg2://", "postgresql+psycopg://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    if url.startswith("sqlite:///") or url.startswith("sqlite://"):
        return "sqlite+aiosqlite://" + url[len("sqlite://") :]
    return url


def normalize_warehouse_location(location: str) -> str:
    """A warehouse location as stored: URLs without a trailing slash, paths made absolute `file://`."""
    if "://" in location:
        return location.rstrip("/")
    return Path(location).expanduser().resolve().as_uri()


def _home(value: str | Path) -> Path:
    return Path(value).expanduser().resolve()


def _auth_mode(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _oidc_issuer(value: str | None) -> str | None:
    """An issuer URL: https, or http on a loopback host (tests, local identity providers)."""
    if not value:
        return None
    parsed = urlsplit(value)
    loopback = parsed.hostname in ("localhost", "127.0.0.1", "::1")
    if not parsed.hostname or not (parsed.scheme == "https" or (parsed.scheme == "http" and loopback)):
        raise ValueError("must be an https URL (http only on loopback)")
    if parsed.query or parsed.fragment:
        raise ValueError("must not have a query or fragment")
    return value


def _glue_endpoint(value: str | None) -> str | None:
    if not value:
        return None
    if not value.startswith(("http://", "https://")):
        raise ValueError("must be an http(s) URL")
    return value


def _oidc_role_values(value: Any) -> Any:
    """`idp-value=floe-role,…` from the environment; a mapping given directly is taken as it is."""
    if not isinstance(value, str):
        return value
    mapping: dict[str, str] = {}
    for item in value.split(","):
        idp_value, sep, role = item.strip().rpartition("=")
        if not sep or not idp_value or role not in _ROLES:
            raise ValueError(f"each item must be 'value=reader|writer|admin', not {item!r}")
        mapping[idp_value] = role
    return mapping


def _default_database_url(data: dict[str, Any]) -> str:
    return f"sqlite+aiosqlite:///{data.get('home', _home('.floe')) / 'floe.db'}"


def _default_warehouse(data: dict[str, Any]) -> str:
    return normalize_warehouse_location(str(data.get("home", _home(".floe")) / "warehouse"))


def shown_default(text: str) -> dict[str, Any]:
    """A field's default as the documentation shows it, where the value itself is derived or long."""
    return {"shown_default": text}


class _EnvironmentSource(EnvSettingsSource):
    """The environment source, over `from_env`'s explicit mapping when one is given."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {
            name if self.case_sensitive else name.lower(): value
            for name, value in self._environ.items()
            if value or not self.env_ignore_empty
        }


class FloeSettings(BaseSettings):
    """Base of floe's settings classes: `FLOE_*` variables only (no .env or secrets files), frozen, an
    empty variable is unset, and `from_env` reports bad values by variable name."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, env_ignore_empty=True, extra="forbid"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        environ = _ENVIRONMENT.get()
        return (init_settings, env_settings if environ is None else _EnvironmentSource(settings_cls, environ))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        """The settings of `env` (by default the process environment); SettingsError when one is bad."""
        with _reading(os.environ if env is None else env):
            try:
                return cls()
            except ValidationError as exc:
                raise SettingsError(describe_errors(cls, exc)) from None

    @classmethod
    def variable(cls, field_name: str) -> str:
        """The environment variable of a field."""
        alias = cls.model_fields[field_name].validation_alias
        return alias if isinstance(alias, str) else ENV_PREFIX + field_name.upper()

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Every variable of this class, to its field's name."""
        return {cls.variable(name): name for name in cls.model_fields}


@contextmanager
def _reading(environ: Mapping[str, str]) -> Iterator[None]:
    token = _ENVIRONMENT.set(environ)
    try:
        yield
    finally:
        _ENVIRONMENT.reset(token)


def describe_errors(cls: type[FloeSettings], error: ValidationError) -> str:
    """One line per invalid variable: its name, what is wrong and (unless secret) the value given."""
    lines = []
    by_name = {name: name for name in cls.model_fields} | {
        cls.variable(name): name for name in cls.model_fields
    }
    for item in error.errors(include_url=False):
        field_name = by_name.get(str(item["loc"][0]), "") if item["loc"] else ""
        variable = cls.variable(field_name) if field_name else "settings"
        message = item["msg"].removeprefix("Value error, ")
        secret = field_name and not cls.model_fields[field_name].repr
        given = "" if secret or isinstance(item["input"], dict) else f" (got {item['input']!r})"
        lines.append(f"{variable}: {message}{given}")
    return "\n".join(lines)


class Settings(FloeSettings):
    """The catalog server (`floe serve`, `floe db`, `floe warehouses`)."""

    # Validated first: the defaults of the database and the warehouse are inside it.
    home: Annotated[Path, AfterValidator(_home)] = Field(
        Path(".floe"),
        description="holds the embedded SQLite database, the default warehouse and `admin.json`",
        json_schema_extra=shown_default("`./.floe`"),
    )
    database_url: Annotated[str, AfterValidator(_normalize_database_url)] = Field(
        default_factory=_default_database_url,
        description="the catalog database: `postgresql://user:pass@host/db` in production",
        json_schema_extra=shown_default("`sqlite+aiosqlite:///$FLOE_HOME/floe.db`"),
        repr=False,
    )
    # An unresponsive PostgreSQL (stopped, a network partition) would otherwise hold requests for as long
    # as it lasts: they answer 503 with Retry-After after these bounds instead.
    database_statement_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="PostgreSQL: a catalog database statement (or the wait for a pooled connection) taking "
        "longer is cancelled and its request answers 503 with `Retry-After` (a commit whose swap it was: 500 "
        "`CommitStateUnknownException`)",
    )
    database_connect_timeout_seconds: float = Field(
        10.0, gt=0, description="PostgreSQL: time to open a connection to the catalog database (then 503)"
    )
    warehouse_name: str = Field(
        DEFAULT_WAREHOUSE_NAME, min_length=1, description="the default warehouse's name (its URL prefix)"
    )
    warehouse_location: Annotated[str, AfterValidator(normalize_warehouse_location)] = Field(
        default_factory=_default_warehouse,
        validation_alias="FLOE_WAREHOUSE",
        description="the default warehouse's location: a path, `file://…` or `s3://bucket/prefix`",
        json_schema_extra=shown_default("`$FLOE_HOME/warehouse`"),
    )
    s3_endpoint: str | None = Field(
        None,
        description="S3 or S3-compatible storage endpoint (MinIO, …) the catalog uses, and engines too "
        "unless `FLOE_S3_CLIENT_ENDPOINT` is set",
    )
    s3_client_endpoint: str | None = Field(
        None,
        description="the S3 endpoint engines are told (`/v1/config`, `loadTable`, vended credentials) when "
        "they reach the storage at another address than the catalog, e.g. `http://127.0.0.1:9000` for the "
        "host while the catalog in a container uses `http://minio:9000`; engines on the catalog's network "
        "send `X-Floe-Storage-Endpoint: internal` (`FLOE_SPARK_STORAGE_ENDPOINT=internal`) to get "
        "`FLOE_S3_ENDPOINT`",
        json_schema_extra=shown_default("`FLOE_S3_ENDPOINT`"),
    )
    s3_region: str | None = Field(None, description="S3 region")
    s3_path_style_access: bool | None = Field(
        None, description="path-style S3 URLs (MinIO and most S3-compatibles)"
    )
    s3_access_key_id: str | None = Field(
        None,
        description="the server's own storage credentials",
        json_schema_extra=shown_default("AWS default chain"),
    )
    s3_secret_access_key: str | None = Field(
        None,
        description="the secret of `FLOE_S3_ACCESS_KEY_ID`",
        json_schema_extra=shown_default("AWS default chain"),
        repr=False,
    )
    sts_role_arn: str | None = Field(
        None,
        description="credential vending: the IAM role floe assumes (STS AssumeRole) to hand engines that "
        "send `X-Iceberg-Access-Delegation: vended-credentials` temporary keys limited to one table's "
        "location (read-only for reader keys); the server's own credentials need `sts:AssumeRole` on it",
    )
    sts_endpoint: str | None = Field(
        None,
        description="STS endpoint for S3-compatible storage",
        json_schema_extra=shown_default("AWS regional endpoint"),
    )
    max_body_bytes: int = Field(
        16 * 1024 * 1024,
        ge=1024,
        description="largest accepted request body (the token endpoint: 64 KiB): a larger declared "
        "`Content-Length` is refused with 413 before the body is read and before authentication, a "
        "chunked body as soon as it passes the limit",
    )
    # Connection limits of `floe serve` (catalog/http_limits.py): the request head's size and field
    # count, the time to send it, idle keep-alive time, and open connections per worker process.
    max_header_bytes: int = Field(
        32 * 1024, ge=1024, description="largest request head (request line and headers); larger ones get 431"
    )
    max_headers: int = Field(100, ge=1, description="most header fields in a request; more get 431")
    header_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="time a client has to send a request head, from connecting (or from its first byte on a "
        "kept-alive connection); then the connection is closed (408 if part was sent)",
    )
    # Longer than clients and load balancers keep idle connections (60 s on AWS ALB): a server closing
    # first races with a request sent on the closing socket, which non-idempotent commits cannot retry.
    keep_alive_seconds: int = Field(
        75,
        ge=1,
        description="idle keep-alive connections are closed after this (longer than load balancers keep "
        "theirs, 60 s on AWS ALB)",
    )
    max_connections: int = Field(
        1000, ge=1, description="open connections per worker process; further ones get 503 and are closed"
    )
    # A request body's deadline grows with what arrived (as Apache's mod_reqtimeout): a large upload at a
    # sane rate is never cut, a body trickled a byte now and then is.
    body_timeout_seconds: float = Field(
        20.0,
        gt=0,
        description="time a client has to send a request body, from the end of its head, extended by a "
        "second for every `FLOE_BODY_MIN_BYTES_PER_SECOND` bytes received; "
        "then 408 and the connection is closed",
    )
    body_min_bytes_per_second: int = Field(
        1024, ge=0, description="the rate that keeps extending a request body's deadline (0: no extension)"
    )
    max_connections_per_address: int = Field(
        64,
        ge=0,
        description="open connections per worker process from one client address (IPv6: one /64); further "
        "ones get 429 and are closed (0: no cap; behind a proxy or load balancer, raise it or use 0)",
    )
    commit_retries: int = Field(8, ge=0, description="server-side retries of a commit that lost a race")
    # Not a variable: clients are told this lifetime in /v1/config and rely on it.
    idempotency_lifetime_seconds: ClassVar[int] = 1800
    migrate_on_start: bool = Field(
        True,
        description="apply database migrations when the server starts (`floe serve` runs them once itself, "
        "then starts its workers with `false`)",
    )
    token_lifetime_seconds: int = Field(3600, ge=1, description="access token lifetime")
    token_reuse_seconds: int = Field(
        60,
        ge=0,
        description="a client-credentials request answered this soon after a token was signed for the same "
        "key gets that token again, with the lifetime it has left (at most a tenth of the lifetime; 0: "
        "always a new token)",
    )
    audit_repeat_window_seconds: float = Field(
        10.0,
        ge=0,
        le=3600,
        description="identical successful token requests (same key, same address) within this many seconds "
        "of one written to the audit log are counted and written as one entry when the window ends (0: "
        "one entry per request)",
    )
    # "oauth2" (the default): every catalog route needs a token. "none": everyone is an administrator —
    # only for a catalog nobody else can reach (local experiments, the auth-off benchmark baseline).
    auth_mode: Annotated[Literal["oauth2", "none"], BeforeValidator(_auth_mode)] = Field(
        "oauth2",
        validation_alias="FLOE_AUTH",
        description="`none` turns authentication off (every caller is an administrator)",
    )
    auth_failure_limit: int = Field(
        10,
        ge=1,
        description="failed token requests allowed per client id from one source address in a window (then "
        "429 for that id from that address; 1 per address once the id has 10 times this many from all "
        "addresses)",
    )
    auth_source_failure_limit: int = Field(
        100, ge=1, description="failed token requests allowed per source address in a window (then 429)"
    )
    auth_failure_window_seconds: int = Field(60, ge=1, description="the window of the failed-request limits")
    admin_client_id: str | None = Field(
        None,
        description="the global admin key's id",
        json_schema_extra=shown_default("generated into `$FLOE_HOME/admin.json`"),
    )
    admin_client_secret: str | None = Field(
        None,
        description="the global admin key's secret (kept as a salted scrypt hash)",
        json_schema_extra=shown_default("generated into `$FLOE_HOME/admin.json`"),
        repr=False,
    )
    # External identity provider (catalog/security/oidc.py): off unless an issuer is set.
    oidc_issuer: Annotated[str | None, AfterValidator(_oidc_issuer)] = Field(
        None, description="an OpenID Connect issuer whose access tokens floe accepts too (https)"
    )
    oidc_audience: str | None = Field(None, description="the audience the issuer's tokens must name (set it)")
    oidc_cluster_claim: str = Field(
        "floe_cluster", min_length=1, description="the claim naming the token's cluster (dotted path)"
    )
    oidc_role_claim: str = Field(
        "floe_role", min_length=1, description="the claim naming its role (dotted path)"
    )
    oidc_role_values: Annotated[dict[str, str], NoDecode, BeforeValidator(_oidc_role_values)] = Field(
        default_factory=lambda: {role: role for role in _ROLES},
        description="`idp-value=reader|writer|admin,…`: the issuer's role values as floe roles",
        json_schema_extra=shown_default("floe's role names"),
    )
    oidc_jwks_min_refresh_seconds: float = Field(
        30.0, gt=0, description="the issuer's signing keys are fetched again at most this often"
    )
    # AWS Glue Data Catalog publishing (catalog/service/glue.py): on when any of the three is set.
    glue_region: str | None = Field(
        None, description="publish S3 warehouses' tables to AWS Glue in this region"
    )
    glue_catalog_id: str | None = Field(
        None, description="the Glue Data Catalog (AWS account id) to publish to"
    )
    glue_endpoint: Annotated[str | None, AfterValidator(_glue_endpoint)] = Field(
        None, description="a Glue endpoint URL (tests, private endpoints)"
    )
    glue_retry_max_seconds: float = Field(
        30.0, gt=0, description="longest wait between Glue publishing retries"
    )
    # Commit events (catalog/service/commit_events.py, docs/commit-events.md): on when the bootstrap
    # servers are set; every change of a table or view goes through the outbox to this Kafka cluster.
    events_kafka_bootstrap_servers: str | None = Field(
        None,
        description="publish every table and view change as a CloudEvents message to this Kafka cluster "
        "(`host:port,…`)",
        json_schema_extra=shown_default("off"),
    )
    events_topic: str = Field(
        "floe.commit-events",
        min_length=1,
        max_length=200,
        description="the events' topic; `{cluster}` in it is replaced by the table's cluster (its "
        "namespace's first level): one topic per source cluster",
    )
    events_kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="how floe connects to the events cluster"
    )
    events_kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None, description="the SASL mechanism of `FLOE_EVENTS_KAFKA_SASL_USERNAME`"
    )
    events_kafka_sasl_username: str | None = Field(None, description="floe's SASL user on the events cluster")
    events_kafka_sasl_password: str | None = Field(
        None, description="its password (environment only)", repr=False
    )
    events_kafka_ssl_ca_location: str | None = Field(
        None, description="a CA certificate file the events cluster's certificate is checked against"
    )
    events_source: str = Field(
        "/floe",
        min_length=1,
        description="the events' CloudEvents `source`: a URI reference naming this catalog",
    )
    events_batch_size: int = Field(500, ge=1, le=100_000, description="most events sent at once")
    events_poll_interval_seconds: float = Field(
        1.0, gt=0, description="how often the outbox is checked for events other catalog processes wrote"
    )
    # Storage calls (catalog/storage.py StorageRunner): worker threads in all, per tenant, and the
    # deadline of one call; the largest metadata file `register` reads.
    storage_threads: int = Field(32, ge=1, description="storage calls running at once, in all")
    storage_threads_per_tenant: int = Field(
        8, ge=1, description="storage calls running at once for one cluster (or one global key)"
    )
    storage_timeout_seconds: float = Field(60.0, gt=0, description="deadline of one storage call (then 503)")
    metadata_cache_mb: int = Field(
        1024,
        ge=0,
        description="memory (MiB, estimated) for the parsed table metadata each catalog process keeps for "
        "its next commit to a table; a table of 100 snapshots takes about 0.5 MiB, so a thousand busy "
        "tables need about 550 (fewer: every commit parses its table's metadata again, ~5 ms each)",
    )
    console: bool = Field(
        True,
        description="serve the web console at `/console` (sign in with an API key); `off` turns it off",
    )
    console_ingest_metrics_url: str | None = Field(
        None,
        description="the ingestion service's Prometheus endpoint (`http://127.0.0.1:9464/metrics` beside "
        "`floe ingest`): the console's overview shows each table's offset lag, time lag and records/s",
        json_schema_extra=shown_default("not shown"),
    )
    console_metrics_interval_seconds: float = Field(
        30.0,
        gt=0,
        description="how often the catalog samples those metrics into its database for the console's charts",
    )
    console_metrics_retention_hours: float = Field(
        24.0, gt=0, description="how long the sampled metrics are kept (the charts' window)"
    )
    max_metadata_file_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="largest metadata file `register` reads"
    )
    # Per-cluster quotas and size limits (catalog/service/quotas.py): one tenant must not fill the catalog
    # or make every listing of it slow. A cluster is its namespace and every namespace below it.
    quota_namespaces: int = Field(
        10_000, ge=1, description="namespaces per cluster (its own and every one below it); more get 403"
    )
    quota_tables: int = Field(10_000, ge=1, description="tables per cluster; more get 403")
    quota_views: int = Field(10_000, ge=1, description="views per cluster; more get 403")
    quota_keys: int = Field(
        1_000, ge=1, description="API keys per cluster, active or revoked in the last 24 hours; more get 403"
    )
    # Watermark long-polls (catalog/service/watermarks.py): bounded in time, and in number per cluster
    # and process, so one tenant cannot hold the server's connections.
    watermark_max_wait_seconds: float = Field(
        60.0, gt=0, le=3600, description="longest wait of one watermark long-poll (?wait=); longer get 400"
    )
    watermark_waits_per_cluster: int = Field(
        8,
        ge=1,
        description="watermark long-polls one cluster may hold open per catalog process; more get 429",
    )
    max_name_bytes: int = Field(
        255,
        ge=1,
        le=65_536,
        description="longest namespace level, table or view name (UTF-8 bytes); longer get 400",
    )
    max_namespace_depth: int = Field(
        16, ge=1, le=1000, description="most levels of a namespace; more get 400"
    )
    max_schema_fields: int = Field(
        10_000, ge=1, description="most fields of a table or view schema, nested ones included; more get 400"
    )
    max_properties: int = Field(
        1_000, ge=0, description="most properties of a namespace, table or view; more get 400"
    )
    max_transaction_tables: int = Field(
        1_000,
        ge=1,
        description="most tables one multi-table commit (/transactions/commit) may change; more get 400",
    )
    max_properties_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="largest properties of a namespace, table or view (keys and values, UTF-8 bytes)",
    )
    # Read by catalog.faults at import; declared here so it is validated and documented like every other.
    test_fault: Literal["crash-after-commit", "crash-after-events-sent"] | None = Field(
        None,
        description="test only: the process kills itself (SIGKILL) at this point, e.g. right after a "
        "commit's transaction and before its answer; never set it in production",
    )

    @property
    def warehouse_properties(self) -> dict[str, str]:
        """The default warehouse's storage properties, from `FLOE_S3_*` and `FLOE_STS_*`."""
        values = {
            "s3.endpoint": self.s3_endpoint,
            "s3.client-endpoint": self.s3_client_endpoint,
            "s3.region": self.s3_region,
            "s3.path-style-access": None
            if self.s3_path_style_access is None
            else str(self.s3_path_style_access).lower(),
            "s3.access-key-id": self.s3_access_key_id,
            "s3.secret-access-key": self.s3_secret_access_key,
            # Credential vending: the IAM role floe assumes (scoped per table) and an STS endpoint.
            "sts.role-arn": self.sts_role_arn,
            "sts.endpoint": self.sts_endpoint,
        }
        return {prop: value for prop, value in values.items() if value}

    def prepare_home(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        if self.warehouse_location.startswith("file://"):
            Path(self.warehouse_location[len("file://") :]).mkdir(parents=True, exist_ok=True)
