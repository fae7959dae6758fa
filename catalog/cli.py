"""The `floe` command line."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from datetime import datetime
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from catalog.admin_client import DEFAULT_URL, ClientError, ManagementClient, admin_credentials
from catalog.listeners import reuseport_socket, reuseport_supported
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

    from catalog.http_limits import LimitedHttpToolsProtocol
    from catalog.observability import configure_logging

    settings = Settings.from_env()
    settings.prepare_home()
    if workers > 1 and settings.database_url.startswith("sqlite"):
        raise click.UsageError("several workers need a shared database: set FLOE_DATABASE_URL to PostgreSQL")
    upgrade_database(settings.database_url)
    # Bootstrap the admin key once here, before several workers could race to do it.
    asyncio.run(_bootstrap(settings))
    os.environ["FLOE_MIGRATE_ON_START"] = "false"
    if workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="floe-metrics-")
    configure_logging(log_level)
    console.print(
        f"[bold]floe[/bold] catalog on http://{host}:{port}  warehouse {settings.warehouse_location}  "
        f"database {settings.database_url.split('@')[-1]}",
        highlight=False,
    )
    options: dict[str, Any] = {
        "log_config": None,
        "access_log": False,
        "proxy_headers": False,
        # See Settings.keep_alive_seconds for why idle connections stay open this long.
        "timeout_keep_alive": settings.keep_alive_seconds,
        # httptools with header size, field count, header timeout and connection limits.
        "http": LimitedHttpToolsProtocol,
        # Room to queue connection bursts, within the per-process connection cap.
        "backlog": min(2048, settings.max_connections),
    }
    if workers > 1 and reuseport_supported():
        from uvicorn.supervisors import Multiprocess

        # One listener per worker instead of a shared one: see catalog/listeners.py.
        config = uvicorn.Config(
            "catalog.api.app:create_app", factory=True, host=host, port=port, workers=workers, **options
        )
        Multiprocess(config, sockets=[reuseport_socket(host, port)]).run()
        return
    uvicorn.run("catalog.api.app:create_app", factory=True, host=host, port=port, workers=workers, **options)


async def _bootstrap(settings: Settings) -> None:
    from catalog.service.security import AuthService

    store = create_store(settings.database_url)
    try:
        await AuthService(store, settings).bootstrap_admin()
    finally:
        await store.close()


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
    s3_region: str | None,
    s3_path_style: bool,
    sts_role_arn: str | None,
    sts_endpoint: str | None,
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
    if sts_role_arn:
        props["sts.role-arn"] = sts_role_arn
    if sts_endpoint:
        props["sts.endpoint"] = sts_endpoint
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


def _client() -> ManagementClient:
    try:
        client_id, client_secret = admin_credentials()
        return ManagementClient(os.environ.get("FLOE_URL", DEFAULT_URL), client_id, client_secret)
    except ClientError as exc:
        raise click.ClickException(str(exc)) from exc


def _call(method: str, path: str, **kwargs: Any) -> Any:
    client = _client()
    try:
        return client.call(method, path, **kwargs)
    except ClientError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        client.close()


def _emit(output: str, payload: Any, rows: list[dict[str, Any]], columns: list[str]) -> None:
    if output == "json":
        click.echo(json.dumps(payload, indent=2, default=str))
        return
    table = Table(*columns)
    for row in rows:
        table.add_row(*["" if row.get(c) is None else str(row.get(c)) for c in columns])
    Console().print(table)


OUTPUT = click.option(
    "--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True
)


@main.group()
def clusters() -> None:
    """Kafka source clusters (against a running server: FLOE_URL, admin credentials)."""


@clusters.command("create")
@click.argument("name")
@click.option(
    "--warehouse", default=None, help="Warehouse for the cluster's tables (default: the default one)."
)
@OUTPUT
def clusters_create(name: str, warehouse: str | None, output: str) -> None:
    """Register a cluster; creates its namespace NAME."""
    created = _call("POST", "/clusters", json={"name": name, "warehouse": warehouse})
    _emit(output, created, [created], ["name", "warehouse", "created_at"])


@clusters.command("list")
@OUTPUT
def clusters_list(output: str) -> None:
    """List clusters."""
    listed = _call("GET", "/clusters")
    _emit(output, listed, listed["clusters"], ["name", "warehouse", "created_at"])


@clusters.command("delete")
@click.argument("name")
def clusters_delete(name: str) -> None:
    """Delete a cluster with its keys (refused while its namespace has tables)."""
    _call("DELETE", f"/clusters/{name}")
    click.echo(f"deleted cluster {name}", err=True)


@main.group()
def keys() -> None:
    """API keys: OAuth2 client credentials bound to a cluster and a role."""


KEY_COLUMNS = ["client_id", "cluster", "role", "description", "expires_at", "revoked_at", "last_used_at"]


@keys.command("create")
@click.option("--cluster", default=None, help="The cluster the key may access (omit for a global admin key).")
@click.option("--role", type=click.Choice(["reader", "writer", "admin"]), required=True)
@click.option("--expires", default=None, help="Lifetime such as 90d, 12h, 30m, or an ISO-8601 timestamp.")
@click.option("--description", default="")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="json", show_default=True)
def keys_create(cluster: str | None, role: str, expires: str | None, description: str, output: str) -> None:
    """Create a key; prints its client_id and client_secret (shown only now)."""
    body: dict[str, Any] = {"cluster": cluster, "role": role, "description": description}
    if expires:
        body.update(_expiry(expires))
    created = _call("POST", "/keys", json=body)
    _emit(output, created, [created], ["client_id", "client_secret", "cluster", "role", "expires_at"])


def _expiry(value: str) -> dict[str, Any]:
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    if value[:-1].isdigit() and value[-1] in units:
        return {"expires_in_seconds": int(value[:-1]) * units[value[-1]]}
    try:
        return {"expires_at": datetime.fromisoformat(value).isoformat()}
    except ValueError as exc:
        raise click.BadParameter(f"{value!r}: use 90d, 12h, 30m, 45s or an ISO-8601 timestamp") from exc


@keys.command("list")
@click.option("--cluster", default=None)
@OUTPUT
def keys_list(cluster: str | None, output: str) -> None:
    """List keys (never their secrets)."""
    listed = _call("GET", "/keys", params={"cluster": cluster} if cluster else None)
    _emit(output, listed, listed["keys"], KEY_COLUMNS)


@keys.command("revoke")
@click.argument("client_id")
def keys_revoke(client_id: str) -> None:
    """Revoke a key at once."""
    _call("DELETE", f"/keys/{client_id}")
    click.echo(f"revoked {client_id}", err=True)


@keys.command("rotate")
@click.argument("client_id")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="json", show_default=True)
def keys_rotate(client_id: str, output: str) -> None:
    """Give a key a new secret (printed once); the old one stops working."""
    rotated = _call("POST", f"/keys/{client_id}/rotate")
    _emit(output, rotated, [rotated], ["client_id", "client_secret", "cluster", "role"])


@main.command("audit")
@click.option("--cluster", default=None)
@click.option("--limit", default=50, show_default=True)
@OUTPUT
def audit(cluster: str | None, limit: int, output: str) -> None:
    """Show the audit log, newest first."""
    params: dict[str, Any] = {"limit": limit}
    if cluster:
        params["cluster"] = cluster
    listed = _call("GET", "/audit", params=params)
    _emit(
        output,
        listed,
        listed["entries"],
        ["at", "subject", "cluster", "action", "target", "outcome", "status_code"],
    )


_ACTION_STYLES = {"create": "green", "evolve": "yellow", "unchanged": "dim", "removed": "red"}


@main.command("apply")
@click.option(
    "-f", "--file", "path", required=True, type=click.Path(exists=True, dir_okay=False), help="floe.yaml"
)
@click.option("--dry-run", is_flag=True, help="Show what would change, change nothing.")
@OUTPUT
def apply(path: str, dry_run: bool, output: str) -> None:
    """Apply a floe.yaml: create and evolve its tables, store it as the desired state ingestion reads.

    The file is validated here first: every error is printed with its YAML path and nothing is sent."""
    from catalog.pipelines import InvalidConfig, load_yaml
    from catalog.pipelines.config import read_yaml

    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    try:
        load_yaml(text)
        data = read_yaml(text)[0]
    except InvalidConfig as exc:
        console.print(f"[red]{path}: {len(exc.errors)} error(s), nothing applied[/red]", highlight=False)
        for error in exc.errors:
            console.print(f"  {error}", highlight=False, markup=False)
        sys.exit(1)
    result = _call("PUT", "/pipeline", json={"config": data, "dry_run": dry_run})
    if output == "json":
        click.echo(json.dumps(result, indent=2))
        return
    table = Table("namespace", "table", "action", "changes")
    for entry in result["plan"]:
        style = _ACTION_STYLES.get(entry["action"], "")
        table.add_row(
            entry["namespace"],
            entry["table"],
            f"[{style}]{entry['action']}[/{style}]",
            "\n".join(entry["changes"]),
        )
    Console().print(table)
    counts = {a: sum(1 for e in result["plan"] if e["action"] == a) for a in _ACTION_STYLES}
    summary = ", ".join(f"{action}: {count}" for action, count in counts.items())
    if result["dry_run"]:
        click.echo(f"dry run: nothing changed ({summary}); current revision {result['revision']}", err=True)
    elif result["applied"]:
        click.echo(
            f"revision {result['revision']} applied to warehouse {result['warehouse']}: {summary}", err=True
        )
    else:
        click.echo(f"no changes: revision {result['revision']} is current", err=True)


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


# -- ingestion (ingest/cli.py), maintenance (maintenance/cli.py), local development components ----


@main.group()
def dev() -> None:
    """Local development components: a Kafka broker, a schema registry."""


def _register_ingestion_commands() -> None:
    from ingest.cli import ingest_command, status_command, up_command
    from ingest.kafka_broker import kafka_command
    from ingest.schema_registry import registry_command
    from maintenance.cli import maintain_command

    main.add_command(ingest_command)
    main.add_command(status_command)
    main.add_command(up_command)
    main.add_command(maintain_command)
    dev.add_command(kafka_command)
    dev.add_command(registry_command)


_register_ingestion_commands()

if __name__ == "__main__":
    main()
