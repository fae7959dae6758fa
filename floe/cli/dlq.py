"""`floe dlq redrive --table NS.T [--since T] [--dry-run]`: a table's dead letters decoded again with its
current schema, those that now decode appended exactly once (ingest/dlq_redrive.py, docs/dlq-redrive.md).

The table is looked up in the applied floe.yaml (its dead-letter table, warehouse, format); the tables
are read and committed through floe's Iceberg REST catalog under the command's key (--key-file,
FLOE_CLIENT_ID/SECRET or admin.json: a writer key of the table's cluster is enough). Kafka is not read.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click
from pyiceberg.exceptions import (
    ForbiddenError,
    NoSuchNamespaceError,
    NoSuchTableError,
    RESTError,
    UnauthorizedError,
)
from requests import RequestException

from catalog.client import ClientError, FloeClient
from floe.cli.output import printable
from floe.cli.remote import cli_credentials, key_file_option
from floe.cli.settings import client_settings
from floe.cli.wait import parse_time
from ingest.dlq_redrive import RedriveFailed, RedriveRefused, RedriveResult, redrive
from ingest.table_rewrite import Send

# What reading the tables through floe's Iceberg REST catalog (pyiceberg) raises: said in one line.
CATALOG_ERRORS = (
    RESTError,
    NoSuchTableError,
    NoSuchNamespaceError,
    ForbiddenError,
    UnauthorizedError,
    OSError,
    RequestException,
)


@click.group("dlq")
def dlq() -> None:
    """Dead-letter tables: redrive their records after a schema fix."""


@dlq.command("redrive")
@click.option("--table", "table", required=True, help="The data table, namespace.table")
@click.option(
    "--since",
    default=None,
    help="Only dead letters whose Kafka record time is at or after this: ISO-8601 (UTC unless it says) "
    "or epoch ms",
)
@click.option("--dry-run", is_flag=True, help="Count what would be redriven; change nothing")
@click.option("--json", "as_json_output", is_flag=True, help="Print the counts as JSON")
@key_file_option
def redrive_command(
    table: str, since: str | None, dry_run: bool, as_json_output: bool, key_file: Path | None
) -> None:
    """Decode TABLE's dead letters again with its current schema: append those that now decode to TABLE
    and remove them from its dead-letter table in one commit (exactly once, however often it runs or
    crashes); those that still fail stay, with their new reason. Inline-schema JSON append tables."""
    *namespace, name = table.split(".")
    if not namespace or not name:
        raise click.BadParameter("expected namespace.table", param_hint="--table")
    since_time = None if since is None else datetime.fromtimestamp(parse_time(since, "--since") / 1000, UTC)
    url = client_settings().url
    client_id, secret = cli_credentials(key_file)
    try:
        with FloeClient(url, client_id, secret) as client:
            pipeline = client.pipeline()
            found = next(
                (
                    t
                    for t in (pipeline.tables if pipeline is not None else [])
                    if t.namespace == ".".join(namespace) and t.table == name
                ),
                None,
            )
            if found is None:
                raise click.ClickException(f"{table} is not a table of the applied floe.yaml (floe apply)")
            if found.source_format != "json" or found.schema_mode != "inline":
                raise click.ClickException(
                    f"{table} is a {found.source_format} table with {found.schema_mode} schemas: redrive "
                    "supports inline-schema JSON tables only (docs/dlq-redrive.md)"
                )
            catalog = _catalog(url, client_id, secret, found.warehouse)
            prefix = str(catalog.properties.get("prefix") or quote(found.warehouse, safe=""))

            send = transaction_sender(client, prefix, "redrive")

            result = redrive(
                catalog.load_table,
                send,
                (found.namespace, found.table),
                (found.namespace, found.dlq_table),
                since=since_time,
                dry_run=dry_run,
            )
    except (RedriveRefused, RedriveFailed) as exc:
        raise click.ClickException(printable(str(exc))) from exc
    except CATALOG_ERRORS as exc:  # floe's catalog refused or did not answer
        raise click.ClickException(printable(f"{table}: {type(exc).__name__}: {exc}")) from exc
    except ClientError as exc:
        raise click.ClickException(printable(str(exc))) from exc
    if as_json_output:
        click.echo(json.dumps(result.as_json(), indent=2))
    else:
        click.echo(printable(describe(result)))


def _catalog(url: str, client_id: str, secret: str, warehouse: str) -> Any:
    from pyiceberg.catalog.rest import RestCatalog

    uri = url.rstrip("/")
    return RestCatalog(
        f"floe-{warehouse}",
        uri=uri,
        warehouse=warehouse,
        credential=f"{client_id}:{secret}",
        **{"oauth2-server-uri": f"{uri}/v1/oauth/tokens", "scope": "catalog"},
    )


def describe(result: RedriveResult) -> str:
    """The counts as a few lines for a person."""
    verb = "would redrive" if result.dry_run else "redrove"
    lines = [
        f"{result.table}: {verb} {result.redriven} of {result.examined} dead letters examined "
        f"({result.dead_letters} in the dead-letter table); {result.still_failing} still fail"
        + (f", {result.reasons_changed} with a new reason" if result.reasons_changed else "")
    ]
    if not result.dry_run and result.commits:
        snapshots = ", ".join(f"data {d} / dead letters {q}" for d, q in result.snapshots)
        lines.append(f"  committed in {result.commits} commit(s): snapshots {snapshots}")
    if result.duplicates:
        lines.append(f"  {result.duplicates} duplicate dead letters of redriven records removed")
    for reason, count in result.reasons.most_common(5):
        lines.append(f"  still failing ({count}): {reason}")
    return "\n".join(lines)


def transaction_sender(client: FloeClient, prefix: str, what: str) -> Send:
    """How `floe dlq redrive` and `floe replay` send their one multi-table commit: 'committed',
    'refused' (409: a pinned table moved; the caller rebuilds), or why the outcome is unknown; any other
    4xx ends the command with floe's answer."""

    def send(changes: list[dict[str, Any]]) -> str:
        outcome = client.commit_transaction(prefix, changes)
        if outcome.committed:
            return "committed"
        if outcome.refused:
            return "refused"
        if outcome.invalid:
            raise click.ClickException(
                printable(f"floe refused the {what} commit: HTTP {outcome.status} {outcome.detail}")
            )
        return str(outcome)

    return send
