"""`floe status`: ingestion lag, throughput and completeness watermark per table and partition (from
the ingestion service's metrics), and each table's last maintenance pass (from floe's management API)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import click
import httpx
from rich.console import Console
from rich.table import Table
from rich.text import Text

from catalog.client import DEFAULT_URL, ClientError, FloeClient, admin_credentials
from catalog.ingest_metrics import ingest_status
from floe.cli.ingest import DEFAULT_METRICS_PORT
from floe.cli.output import OUTPUT, Column, as_json, fitted_table, printable


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
    columns = [
        Column("table", identifier=True),
        Column("started", optional=1),
        Column("took (s)", optional=3, justify="right"),
        Column("data files", justify="right"),
        Column("snapshots", optional=2, justify="right"),
        Column("actions"),
        Column("error"),
    ]
    rows = []
    for entry in passes:
        before, after = entry.get("before") or {}, entry.get("after") or {}
        rows.append(
            [
                entry["table"],
                str(entry["started_at"])[:19],
                f"{entry['duration_seconds']:.1f}",
                f"{before.get('data_files', '?')} → {after.get('data_files', '?')}",
                f"{before.get('snapshots', '?')} → {after.get('snapshots', '?')}",
                ", ".join(a["name"] for a in entry["actions"]),
                entry.get("error") or "",
            ]
        )
    return fitted_table(columns, rows, title="floe maintenance (last pass per table)")


# The ingestion grid at any width: table names whole; the throughput columns give way first.
INGEST_COLUMNS = [
    Column("table", identifier=True),
    Column("partition", justify="right"),
    Column("offset lag", justify="right"),
    Column("lag (s)", optional=1, justify="right"),
    Column("committed", optional=2, justify="right"),
    Column("records/s", optional=4, justify="right"),
    Column("MiB/s", optional=5, justify="right"),
    Column("dead letters", justify="right"),
    Column("last commit", optional=3, justify="right"),
    Column("watermark (UTC)", optional=2, justify="right"),
]


def _watermark(entry: dict[str, Any]) -> str:
    """The table's completeness watermark (docs/watermarks.md) as a UTC time, "-" before it has one."""
    seconds = entry.get("watermark")
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _ingest_grid(tables: list[dict[str, Any]], now: float) -> Table:
    rows = []
    for entry in tables:
        last = entry.get("last_commit")
        age = f"{now - last:.1f}s ago" if last else "never"
        for i, part in enumerate(entry["partitions"] or [{}]):
            first = i == 0
            rows.append(
                [
                    entry["table"] if first else "",
                    str(part.get("partition", "")),
                    str(part.get("offset_lag", "")),
                    str(part.get("time_lag_seconds", "")),
                    str(part.get("committed_offset", "")),
                    str(entry.get("records_per_second", "")) if first else "",
                    str(entry.get("mib_per_second", "")) if first else "",
                    str(entry.get("dead_letters", 0)) if first else "",
                    age if first else "",
                    _watermark(entry) if first else "",
                ]
            )
    return fitted_table(INGEST_COLUMNS, rows, title="floe ingestion")


def undeclared_lines(tables: list[dict[str, Any]]) -> list[str]:
    """One line per table whose records carry fields it does not declare (their values are not kept)."""
    lines = []
    for entry in tables:
        count = entry.get("records_with_undeclared_fields")
        if count:
            fields = sorted((entry.get("undeclared_fields") or {}).items(), key=lambda f: (-f[1], f[0]))
            named = ", ".join(f"{name} ({n})" for name, n in fields)
            lines.append(f"{entry['table']}: {count} records had fields the table does not declare: {named}")
    return lines


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
@OUTPUT
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
    grid = _ingest_grid(status["tables"], time.time())
    out = Console()
    out.print(grid)
    # Names and errors as Text: no markup or emoji code in them is read, control characters are escapes.
    for entry in status["tables"]:
        if entry.get("error"):
            out.print(
                Text.assemble((printable(entry["table"]), "red"), ": ", printable(entry["error"])),
                highlight=False,
            )
        if entry.get("missing_topic"):
            out.print(
                Text.assemble(
                    ("WARNING", "yellow"),
                    printable(
                        f": topic {entry['missing_topic']} of {entry['table']} does not exist on its "
                        "cluster; its ingestion starts when it does"
                    ),
                ),
                highlight=False,
            )
    for line in undeclared_lines(status["tables"]):
        out.print(Text(printable(line)), highlight=False, soft_wrap=True)
    if status.get("maintenance"):
        out.print(_maintenance_grid(status["maintenance"]))
    elif "maintenance_error" in status:
        out.print(Text(printable(f"maintenance passes unavailable: {status['maintenance_error']}")))
