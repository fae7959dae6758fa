"""Server settings from the environment.

`FLOE_HOME` (default `./.floe`) holds the embedded SQLite database and the default warehouse;
`FLOE_DATABASE_URL` points at PostgreSQL in production; `FLOE_WAREHOUSE` is the default warehouse's
location (a local path, `file://…` or `s3://bucket/prefix`), with `FLOE_S3_*` for S3-compatible storage
and `FLOE_STS_*` for storage credential vending; `FLOE_GLUE_*` publish S3 warehouses' tables to AWS Glue.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_WAREHOUSE_NAME = "default"


def _normalize_database_url(url: str) -> str:
    """Accept the usual spellings and pick the async drivers floe ships with."""
    for prefix in ("postgresql://", "postgres://", "postgresql+psycopg2://", "postgresql+psycopg://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    if url.startswith("sqlite:///") or url.startswith("sqlite://"):
        return "sqlite+aiosqlite://" + url[len("sqlite://") :]
    return url


def _normalize_location(location: str) -> str:
    if "://" in location:
        return location.rstrip("/")
    return Path(location).expanduser().resolve().as_uri()


def _auth_mode(value: str) -> str:
    mode = value.strip().lower()
    if mode not in ("oauth2", "none"):
        raise ValueError(f"FLOE_AUTH must be 'oauth2' or 'none', not {value!r}")
    return mode


def _oidc_issuer(value: str | None) -> str | None:
    """An issuer URL: https, or http on a loopback host (tests, local identity providers)."""
    if not value:
        return None
    parsed = urlsplit(value)
    loopback = parsed.hostname in ("localhost", "127.0.0.1", "::1")
    if not parsed.hostname or not (parsed.scheme == "https" or (parsed.scheme == "http" and loopback)):
        raise ValueError(f"FLOE_OIDC_ISSUER must be an https URL (http only on loopback), not {value!r}")
    if parsed.query or parsed.fragment:
        raise ValueError("FLOE_OIDC_ISSUER must not have a query or fragment")
    return value


def _glue_endpoint(value: str | None) -> str | None:
    if not value:
        return None
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"FLOE_GLUE_ENDPOINT must be an http(s) URL, not {value!r}")
    return value


def _oidc_role_values(value: str | None) -> dict[str, str]:
    """`idp-value=floe-role,…`; unset means the claim holds floe's own role names."""
    if not value:
        return {"reader": "reader", "writer": "writer", "admin": "admin"}
    mapping: dict[str, str] = {}
    for item in value.split(","):
        idp_value, sep, role = item.strip().rpartition("=")
        if not sep or not idp_value or role not in ("reader", "writer", "admin"):
            raise ValueError(f"FLOE_OIDC_ROLE_VALUES: expected 'value=reader|writer|admin', got {item!r}")
        mapping[idp_value] = role
    return mapping


@dataclass(frozen=True)
class Settings:
    home: Path
    database_url: str
    warehouse_name: str
    warehouse_location: str
    warehouse_properties: dict[str, str] = field(default_factory=dict)
    max_body_bytes: int = 16 * 1024 * 1024
    # Connection limits of `floe serve` (catalog/http_limits.py): the request head's size and field
    # count, the time to send it, idle keep-alive time, and open connections per worker process.
    max_header_bytes: int = 32 * 1024
    max_headers: int = 100
    header_timeout_seconds: float = 10.0
    # Longer than clients and load balancers keep idle connections (60 s on AWS ALB): a server closing
    # first races with a request sent on the closing socket, which non-idempotent commits cannot retry.
    keep_alive_seconds: int = 75
    max_connections: int = 1000
    commit_retries: int = 8
    idempotency_lifetime_seconds: int = 1800
    migrate_on_start: bool = True
    token_lifetime_seconds: int = 3600
    # "oauth2" (the default): every catalog route needs a token. "none": everyone is an administrator —
    # only for a catalog nobody else can reach (local experiments, the auth-off benchmark baseline).
    auth_mode: str = "oauth2"
    auth_failure_limit: int = 10
    auth_source_failure_limit: int = 100
    auth_failure_window_seconds: int = 60
    admin_client_id: str | None = None
    admin_client_secret: str | None = None
    # External identity provider (catalog/security/oidc.py): off unless an issuer is set.
    oidc_issuer: str | None = None
    oidc_audience: str | None = None
    oidc_cluster_claim: str = "floe_cluster"
    oidc_role_claim: str = "floe_role"
    oidc_role_values: dict[str, str] = field(
        default_factory=lambda: {"reader": "reader", "writer": "writer", "admin": "admin"}
    )
    oidc_jwks_min_refresh_seconds: float = 30.0
    # AWS Glue Data Catalog publishing (catalog/service/glue.py): on when any of the three is set.
    glue_region: str | None = None
    glue_catalog_id: str | None = None
    glue_endpoint: str | None = None
    glue_retry_max_seconds: float = 30.0
    # Storage calls (catalog/storage.py StorageRunner): worker threads in all, per tenant, and the
    # deadline of one call; the largest metadata file `register` reads.
    storage_threads: int = 32
    storage_threads_per_tenant: int = 8
    storage_timeout_seconds: float = 60.0
    max_metadata_file_bytes: int = 64 * 1024 * 1024

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        home = Path(env.get("FLOE_HOME", ".floe")).expanduser().resolve()
        database_url = env.get("FLOE_DATABASE_URL") or f"sqlite+aiosqlite:///{home / 'floe.db'}"
        location = env.get("FLOE_WAREHOUSE") or str(home / "warehouse")
        props: dict[str, str] = {}
        for env_name, prop in (
            ("FLOE_S3_ENDPOINT", "s3.endpoint"),
            ("FLOE_S3_REGION", "s3.region"),
            ("FLOE_S3_PATH_STYLE_ACCESS", "s3.path-style-access"),
            ("FLOE_S3_ACCESS_KEY_ID", "s3.access-key-id"),
            ("FLOE_S3_SECRET_ACCESS_KEY", "s3.secret-access-key"),
            # Credential vending: the IAM role floe assumes (scoped per table) and an STS endpoint.
            ("FLOE_STS_ROLE_ARN", "sts.role-arn"),
            ("FLOE_STS_ENDPOINT", "sts.endpoint"),
        ):
            if env.get(env_name):
                props[prop] = env[env_name]
        return cls(
            home=home,
            database_url=_normalize_database_url(database_url),
            warehouse_name=env.get("FLOE_WAREHOUSE_NAME", DEFAULT_WAREHOUSE_NAME),
            warehouse_location=_normalize_location(location),
            warehouse_properties=props,
            max_body_bytes=int(env.get("FLOE_MAX_BODY_BYTES", str(16 * 1024 * 1024))),
            max_header_bytes=int(env.get("FLOE_MAX_HEADER_BYTES", str(32 * 1024))),
            max_headers=int(env.get("FLOE_MAX_HEADERS", "100")),
            header_timeout_seconds=float(env.get("FLOE_HEADER_TIMEOUT_SECONDS", "10")),
            keep_alive_seconds=int(env.get("FLOE_KEEP_ALIVE_SECONDS", "75")),
            max_connections=int(env.get("FLOE_MAX_CONNECTIONS", "1000")),
            commit_retries=int(env.get("FLOE_COMMIT_RETRIES", "8")),
            migrate_on_start=env.get("FLOE_MIGRATE_ON_START", "true").lower() != "false",
            token_lifetime_seconds=int(env.get("FLOE_TOKEN_LIFETIME_SECONDS", "3600")),
            auth_mode=_auth_mode(env.get("FLOE_AUTH", "oauth2")),
            auth_failure_limit=int(env.get("FLOE_AUTH_FAILURE_LIMIT", "10")),
            auth_source_failure_limit=int(env.get("FLOE_AUTH_SOURCE_FAILURE_LIMIT", "100")),
            auth_failure_window_seconds=int(env.get("FLOE_AUTH_FAILURE_WINDOW_SECONDS", "60")),
            admin_client_id=env.get("FLOE_ADMIN_CLIENT_ID") or None,
            admin_client_secret=env.get("FLOE_ADMIN_CLIENT_SECRET") or None,
            oidc_issuer=_oidc_issuer(env.get("FLOE_OIDC_ISSUER")),
            oidc_audience=env.get("FLOE_OIDC_AUDIENCE") or None,
            oidc_cluster_claim=env.get("FLOE_OIDC_CLUSTER_CLAIM") or "floe_cluster",
            oidc_role_claim=env.get("FLOE_OIDC_ROLE_CLAIM") or "floe_role",
            oidc_role_values=_oidc_role_values(env.get("FLOE_OIDC_ROLE_VALUES")),
            oidc_jwks_min_refresh_seconds=float(env.get("FLOE_OIDC_JWKS_MIN_REFRESH_SECONDS", "30")),
            glue_region=env.get("FLOE_GLUE_REGION") or None,
            glue_catalog_id=env.get("FLOE_GLUE_CATALOG_ID") or None,
            glue_endpoint=_glue_endpoint(env.get("FLOE_GLUE_ENDPOINT")),
            glue_retry_max_seconds=float(env.get("FLOE_GLUE_RETRY_MAX_SECONDS", "30")),
            storage_threads=int(env.get("FLOE_STORAGE_THREADS", "32")),
            storage_threads_per_tenant=int(env.get("FLOE_STORAGE_THREADS_PER_TENANT", "8")),
            storage_timeout_seconds=float(env.get("FLOE_STORAGE_TIMEOUT_SECONDS", "60")),
            max_metadata_file_bytes=int(env.get("FLOE_MAX_METADATA_FILE_BYTES", str(64 * 1024 * 1024))),
        )

    def prepare_home(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        if self.warehouse_location.startswith("file://"):
            Path(self.warehouse_location[len("file://") :]).mkdir(parents=True, exist_ok=True)
