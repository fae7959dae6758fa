"""`floe status`: ingestion lag and throughput per table and partition (from the ingestion service's
metrics), and each table's last maintenance pass (from floe's management API)."""

from __future__ import annotations

import json
import time
from typing import Any

import click
import httpx
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from catalog.cli.ingest import DEFAULT_METRICS_PORT
from catalog.cli.output import as_json
from catalog.client import DEFAULT_URL, ClientError, FloeClient, admin_credentials
from catalog.ingest_metrics import ingest_status


def read_status(metrics_url: str) -> dict[str, Any]:
    """The ingestion service's metrics, per table and partition."""
    try:
        text = httpx.get(metrics_url, timeout=10).text
    except httpx.HTTPError as exc:
        raise click.ClickException(f"Cannot reach the ingestion service at {metrics_url}: {exc}") from exc
    return ingest_status(text)


def read_maintenance(url: str, client_id: str, client_secret: str, limit: int = 200) -> list[dict[str, Any]]:
    """The newest maintenance pass of each table (from floe's management API)."""
    with FloeClient(url, client_id, client_secret) as client:
        passes = client.passes(limit=limit)
    newest: dict[str, dict[str, Any]] = {}
    for entry in passes:
        name = ".".join([*entry.namespace, entry.table])
        newest.setdefault(name, {**as_json(entry), "table": name})
    return sorted(newest.values(), key=lambda e: e["table"])


def _maintenance_grid(passes: list[dict[str, Any]]) -> Table:
    grid = Table(title="floe maintenance (last pass per table)")
    for column in ("table", "started", "took (s)", "data files", "snapshots", "actions", "error"):
        grid.add_column(column, justify="left" if column in ("table", "actions", "error") else "right")
    for entry in passes:
        before, after = entry.get("before") or {}, entry.get("after") or {}
        grid.add_row(
            entry["table"],
            str(entry["started_at"])[:19],
            f"{entry['duration_seconds']:.1f}",
            f"{before.get('data_files', '?')} → {after.get('data_files', '?')}",
            f"{before.get('snapshots', '?')} → {after.get('snapshots', '?')}",
            ", ".join(a["name"] for a in entry["actions"]),
            entry.get("error") or "",
        )
    return grid


@click.command("status")
@click.option(
    "--metrics-url",
    envvar="FLOE_INGEST_METRICS_URL",
    default=f"http://127.0.0.1:{DEFAULT_METRICS_PORT}/metrics",
    show_default=True,
    help="The ingestion service's Prometheus endpoint.",
)
@click.option(
    "--url", envvar="FLOE_URL", default=DEFAULT_URL, show_default=True, help="floe's catalog (maintenance)."
)
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True)
def status_command(metrics_url: str, url: str, output: str) -> None:
    """Ingestion lag, throughput, dead letters and last commit per table and partition, and each table's
    last maintenance pass (with FLOE_CLIENT_ID/SECRET or admin.json for the catalog)."""
    status = read_status(metrics_url)
    try:
        status["maintenance"] = read_maintenance(url, *admin_credentials())
    except ClientError as exc:
        status["maintenance_error"] = str(exc)
    if output == "json":
        click.echo(json.dumps(status, indent=2, default=str))
        return
    grid = Table(title="floe ingestion")
    columns = ("table", "partition", "offset lag", "lag (s)", "committed", "records/s", "MiB/s")
    for column in (*columns, "dead letters", "last commit"):
        grid.add_column(column, justify="left" if column == "table" else "right")
    now = time.time()
    for entry in status["tables"]:
        last = entry.get("last_commit")
        age = f"{now - last:.1f}s ago" if last else "never"
        rows = entry["partitions"] or [{}]
        for i, part in enumerate(rows):
            grid.add_row(
                entry["table"] if i == 0 else "",
                str(part.get("partition", "")),
                str(part.get("offset_lag", "")),
                str(part.get("time_lag_seconds", "")),
                str(part.get("committed_offset", "")),
                str(entry.get("records_per_second", "")) if i == 0 else "",
                str(entry.get("mib_per_second", "")) if i == 0 else "",
                str(entry.get("dead_letters", 0)) if i == 0 else "",
                age if i == 0 else "",
            )
    out = Console()
    out.print(grid)
    for entry in status["tables"]:
        if entry.get("error"):
            out.print(f"[red]{escape(entry['table'])}[/red]: {escape(entry['error'])}", highlight=False)
        if entry.get("missing_topic"):
            out.print(
                f"[yellow]WARNING[/yellow]: topic {entry['missing_topic']} of {entry['table']} does not "
                "exist on its cluster; its ingestion starts when it does",
                highlight=False,
            )
    if status.get("maintenance"):
        out.print(_maintenance_grid(status["maintenance"]))
    elif "maintenance_error" in status:
        out.print(f"maintenance passes unavailable: {status['maintenance_error']}")
