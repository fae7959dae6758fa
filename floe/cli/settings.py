"""The `floe` command line's own `FLOE_*` variables (the clients of a running catalog: apply, clusters,
ingest, maintain, status, up), and the catalog's settings read as command-line errors.

Options that take a variable as their default (`--url` from `FLOE_URL`, …) name it with click's `envvar`;
tests/unit/test_config_doc.py checks each such variable is a field here or in another settings class, with the
same default.
"""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import Field

from catalog.client import DEFAULT_URL
from catalog.settings import DEFAULT_WAREHOUSE_NAME, FloeSettings, Settings, SettingsError

INGEST_METRICS_PORT = 9464
# Compaction's bursts beside 1,000 busy tables doubled ingestion's freshness p99 on a 2-core node at the
# same priority (benchmarks/results/many-tables-1000.md).
MAINTAIN_NICE = 10


class ClientSettings(FloeSettings):
    """The command line (`floe apply`, `clusters`, `keys`, `audit`, `ingest`, `maintain`, `status`, `up`)."""

    url: str = Field(
        DEFAULT_URL,
        pattern=r"^https?://",
        description="floe's catalog, for the commands that talk to a running server; `--url` overrides it",
    )
    client_id: str | None = Field(
        None,
        description="the API key of those commands: an admin key, or a cluster's writer key for "
        "`floe ingest` and `floe maintain`",
        json_schema_extra={"shown_default": "the admin key in `$FLOE_HOME/admin.json`"},
    )
    client_secret: str | None = Field(
        None,
        description="the secret of `FLOE_CLIENT_ID`",
        json_schema_extra={"shown_default": "the admin key in `$FLOE_HOME/admin.json`"},
        repr=False,
    )
    key_file: Path | None = Field(
        None,
        description="a JSON file with the `client_id` and `client_secret` that `floe ingest` and "
        "`floe maintain` run under, such as a pipeline key `floe up` keeps in `$FLOE_HOME/keys` (0600); "
        "`--key-file` overrides it",
        json_schema_extra={"shown_default": "`FLOE_CLIENT_ID`/`FLOE_CLIENT_SECRET`, else `admin.json`"},
    )
    home: Path = Field(
        Path(".floe"),
        description="where `floe up` keeps everything, and where the commands find `admin.json`",
        json_schema_extra={"shown_default": "`./.floe`"},
    )
    warehouse_name: str = Field(
        DEFAULT_WAREHOUSE_NAME,
        min_length=1,
        description="the warehouse of tables whose floe.yaml entry names none (`floe ingest`, "
        "`floe maintain`)",
    )
    maintain_nice: int = Field(
        MAINTAIN_NICE,
        ge=0,
        le=19,
        description="the CPU priority `floe maintain` runs at below the rest of the machine (Unix "
        "niceness 0-19, Spark's JVM included; [Maintenance](../operations/maintenance.md#cpu-priority)); "
        "`--nice` overrides it",
    )
    ingest_metrics_url: str = Field(
        f"http://127.0.0.1:{INGEST_METRICS_PORT}/metrics",
        pattern=r"^https?://",
        description="the ingestion service's Prometheus endpoint `floe status` reads; `--metrics-url` "
        "overrides it",
    )


def client_settings() -> ClientSettings:
    """The command line's settings from the environment, or a command-line error naming the variable."""
    try:
        return ClientSettings.from_env()
    except SettingsError as exc:
        raise click.ClickException(f"invalid environment:\n{exc}") from None


def server_settings() -> Settings:
    """The catalog server's settings from the environment, or a command-line error naming the variable."""
    try:
        return Settings.from_env()
    except SettingsError as exc:
        raise click.ClickException(f"invalid environment:\n{exc}") from None
