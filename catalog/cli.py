"""The `floe` command line."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile

import click
from rich.console import Console
from rich.table import Table

from catalog.migrations import upgrade_database
from catalog.settings import Settings
from catalog.store import create_store

console = Console(stderr=True)


@click.group()
@click.version_option(package_name="floe")
def main() -> None:
    """floe: Kafka topics as Apache Iceberg tables, served by floe's own Iceberg REST catalog."""


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8181, show_default=True, type=int, help="Port to bind.")
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=int,
    help="Worker processes (use PostgreSQL for more than one).",
)
@click.option("--log-level", default="info", show_default=True)
def serve(host: str, port: int, workers: int, log_level: str) -> None:
    """Run the Iceberg REST catalog server."""
    import uvicorn

    from catalog.observability import configure_logging

    settings = Settings.from_env()
    settings.prepare_home()
    if workers > 1 and settings.database_url.startswith("sqlite"):
        raise click.UsageError("several workers need a shared database: set FLOE_DATABASE_URL to PostgreSQL")
    upgrade_database(settings.database_url)
    os.environ["FLOE_MIGRATE_ON_START"] = "false"
    if workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="floe-metrics-")
    configure_logging(log_level)
    console.print(
        f"[bold]floe[/bold] catalog on http://{host}:{port}  warehouse {settings.warehouse_location}  "
        f"database {settings.database_url.split('@')[-1]}",
        highlight=False,
    )
    uvicorn.run(
        "catalog.api.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_config=None,
        access_log=False,
        proxy_headers=False,
    )


@main.group()
def db() -> None:
    """Database schema management."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Apply all migrations to the configured database (FLOE_DATABASE_URL)."""
    settings = Settings.from_env()
    settings.prepare_home()
    upgrade_database(settings.database_url)
    console.print("database is at the latest revision")


@main.group()
def warehouses() -> None:
    """Named warehouses: each a storage location (local path or s3://bucket/prefix)."""


@warehouses.command("create")
@click.argument("name")
@click.option("--location", required=True, help="file:///path, /path or s3://bucket/prefix")
@click.option("--s3-endpoint", default=None, help="S3-compatible endpoint URL")
@click.option("--s3-region", default=None)
@click.option("--s3-path-style/--no-s3-path-style", default=False)
def warehouses_create(
    name: str, location: str, s3_endpoint: str | None, s3_region: str | None, s3_path_style: bool
) -> None:
    """Create or update a warehouse in the configured database."""
    from catalog.settings import _normalize_location

    props: dict[str, str] = {}
    if s3_endpoint:
        props["s3.endpoint"] = s3_endpoint
    if s3_region:
        props["s3.region"] = s3_region
    if s3_path_style:
        props["s3.path-style-access"] = "true"
    settings = Settings.from_env()
    settings.prepare_home()
    upgrade_database(settings.database_url)

    async def run() -> None:
        store = create_store(settings.database_url)
        try:
            record = await store.upsert_warehouse(name, _normalize_location(location), props)
        finally:
            await store.close()
        json.dump(
            {"name": record.name, "location": record.location, "properties": record.properties}, sys.stdout
        )
        sys.stdout.write("\n")

    asyncio.run(run())


@warehouses.command("list")
@click.option("--output", type=click.Choice(["table", "json"]), default="table")
def warehouses_list(output: str) -> None:
    """List warehouses."""
    settings = Settings.from_env()

    async def run() -> None:
        store = create_store(settings.database_url)
        try:
            records = await store.list_warehouses()
        finally:
            await store.close()
        if output == "json":
            json.dump([{"name": r.name, "location": r.location} for r in records], sys.stdout)
            sys.stdout.write("\n")
            return
        table = Table("name", "location")
        for r in records:
            table.add_row(r.name, r.location)
        console.print(table)

    asyncio.run(run())


@main.command("openapi")
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False), default="-", help="File to write (default stdout)."
)
def openapi(output: str) -> None:
    """Print floe's OpenAPI document (generated from the code)."""
    from catalog.api.openapi import render_openapi

    text = render_openapi()
    if output == "-":
        sys.stdout.write(text)
    else:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
