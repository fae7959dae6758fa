"""`floe warehouses`: named storage locations, written to the configured database through the
warehouse service (so each change is in the audit log, as changes through the API are)."""

from __future__ import annotations

import asyncio
import getpass
import json
import sys

import click

from catalog.migrations import upgrade_database
from catalog.service.warehouses import WarehouseService
from catalog.store import create_store
from floe.cli.errors import database_errors
from floe.cli.output import OUTPUT, emit
from floe.cli.settings import server_settings


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

    with database_errors(settings.database_url):
        upgrade_database(settings.database_url)
        asyncio.run(run())


@warehouses.command("list")
@OUTPUT
def warehouses_list(output: str) -> None:
    """List warehouses (the table on stdout, like every list)."""
    settings = server_settings()

    async def run() -> list[dict[str, str]]:
        store = create_store(settings.database_url)
        try:
            records = await store.list_warehouses()
        finally:
            await store.close()
        return [{"name": r.name, "location": r.location} for r in records]

    with database_errors(settings.database_url):
        upgrade_database(settings.database_url)
        listed = asyncio.run(run())
    emit(output, listed, listed, ["name", "location"])
