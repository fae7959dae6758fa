"""`floe warehouses`: named storage locations, written to the configured database through the
warehouse service (so each change is in the audit log, as changes through the API are)."""

from __future__ import annotations

import asyncio
import getpass
import json
import sys

import click
from rich.table import Table

from catalog.cli.output import console
from catalog.cli.settings import server_settings
from catalog.migrations import upgrade_database
from catalog.service.warehouses import WarehouseService
from catalog.store import create_store


@click.group()
def warehouses() -> None:
    """Named warehouses: each a storage location (local path or s3://bucket/prefix)."""


@warehouses.command("create")
@click.argument("name")
@click.option("--location", required=True, help="file:///path, /path or s3://bucket/prefix")
@click.option("--s3-endpoint", default=None, help="S3-compatible endpoint URL")
@click.option(
    "--s3-client-endpoint",
    default=None,
    help="the endpoint engines are told, when they reach the storage at another address than the catalog",
)
@click.option("--s3-region", default=None)
@click.option("--s3-path-style/--no-s3-path-style", default=False)
@click.option(
    "--sts-role-arn",
    default=None,
    help="IAM role floe assumes to vend per-table credentials (X-Iceberg-Access-Delegation)",
)
@click.option("--sts-endpoint", default=None, help="STS endpoint URL (default: AWS's regional endpoint)")
def warehouses_create(
    name: str,
    location: str,
    s3_endpoint: str | None,
    s3_client_endpoint: str | None,
    s3_region: str | None,
    s3_path_style: bool,
    sts_role_arn: str | None,
    sts_endpoint: str | None,
) -> None:
    """Create or update a warehouse in the configured database."""
    props: dict[str, str] = {}
    if s3_endpoint:
        props["s3.endpoint"] = s3_endpoint
    if s3_client_endpoint:
        props["s3.client-endpoint"] = s3_client_endpoint
    if s3_region:
        props["s3.region"] = s3_region
    if s3_path_style:
        props["s3.path-style-access"] = "true"
    if sts_role_arn:
        props["sts.role-arn"] = sts_role_arn
    if sts_endpoint:
        props["sts.endpoint"] = sts_endpoint
    settings = server_settings()
    settings.prepare_home()
    upgrade_database(settings.database_url)

    async def run() -> None:
        store = create_store(settings.database_url)
        try:
            record = await WarehouseService(store).create_warehouse(
                name, location, props, subject=f"cli:{getpass.getuser()}", source="cli"
            )
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
    settings = server_settings()

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
