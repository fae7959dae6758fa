"""`floe clusters`, `floe keys` and `floe audit`: tenants, their API keys and the audit log (against a
running server: FLOE_URL and the admin credentials)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from floe.cli.output import OUTPUT, emit, printable
from floe.cli.pipeline_keys import PURPOSES, PipelineKeys
from floe.cli.remote import call, management_client
from floe.cli.settings import client_settings


@click.group()
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
    created = call(lambda floe: floe.create_cluster(name, warehouse))
    emit(output, created, [created], ["name", "warehouse", "created_at"])


@clusters.command("list")
@OUTPUT
def clusters_list(output: str) -> None:
    """List clusters."""
    listed = call(lambda floe: floe.clusters())
    emit(output, {"clusters": listed}, listed, ["name", "warehouse", "created_at"])


@clusters.command("delete")
@click.argument("name")
def clusters_delete(name: str) -> None:
    """Delete a cluster with its keys (refused while its namespace has tables)."""
    call(lambda floe: floe.delete_cluster(name))
    click.echo(printable(f"deleted cluster {name}"), err=True)


@click.group()
def keys() -> None:
    """API keys: OAuth2 client credentials bound to a cluster and a role."""


KEY_COLUMNS = ["client_id", "cluster", "role", "description", "expires_at", "revoked_at", "last_used_at"]
# Left out first on a narrow terminal (the client id, needed by rotate and revoke, is always whole).
KEY_OPTIONAL = ["last_used_at", "description", "expires_at"]


@keys.command("create")
@click.option("--cluster", default=None, help="The cluster the key may access (omit for a global admin key).")
@click.option("--role", type=click.Choice(["reader", "writer", "admin"]), required=True)
@click.option("--expires", default=None, help="Lifetime such as 90d, 12h, 30m, or an ISO-8601 timestamp.")
@click.option("--description", default="")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="json", show_default=True)
def keys_create(cluster: str | None, role: str, expires: str | None, description: str, output: str) -> None:
    """Create a key; prints its client_id and client_secret (shown only now)."""
    expiry = _expiry(expires) if expires else {}
    created = call(lambda floe: floe.create_key(role, cluster=cluster, description=description, **expiry))
    emit(output, created, [created], ["client_id", "client_secret", "cluster", "role", "expires_at"])


def _expiry(value: str) -> dict[str, Any]:
    """`expires_in_seconds` for a lifetime such as 90d, `expires_at` for a timestamp."""
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    if value[:-1].isdigit() and value[-1] in units:
        return {"expires_in_seconds": int(value[:-1]) * units[value[-1]]}
    try:
        return {"expires_at": datetime.fromisoformat(value)}
    except ValueError as exc:
        raise click.BadParameter(f"{value!r}: use 90d, 12h, 30m, 45s or an ISO-8601 timestamp") from exc


@keys.command("list")
@click.option("--cluster", default=None)
@OUTPUT
def keys_list(cluster: str | None, output: str) -> None:
    """List keys (never their secrets)."""
    listed = call(lambda floe: floe.keys(cluster or None))
    emit(output, {"keys": listed}, listed, KEY_COLUMNS, optional=KEY_OPTIONAL)


@keys.command("revoke")
@click.argument("client_id")
def keys_revoke(client_id: str) -> None:
    """Revoke a key at once."""
    call(lambda floe: floe.revoke_key(client_id))
    click.echo(printable(f"revoked {client_id}"), err=True)


@keys.command("rotate")
@click.argument("client_id")
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="json", show_default=True)
def keys_rotate(client_id: str, output: str) -> None:
    """Give a key a new secret (printed once); the old one stops working."""
    rotated = call(lambda floe: floe.rotate_key(client_id))
    emit(output, rotated, [rotated], ["client_id", "client_secret", "cluster", "role"])


@keys.command("pipeline")
@click.argument("clusters", nargs=-1, required=True)
@click.option(
    "--purpose",
    "purposes",
    type=click.Choice(PURPOSES),
    multiple=True,
    help="Which key of each cluster (repeatable; default both).",
)
def keys_pipeline(clusters: tuple[str, ...], purposes: tuple[str, ...]) -> None:
    """Create, or rotate, the pipeline keys of CLUSTERS (writer keys named pipeline-ingest-<cluster> and
    pipeline-maintain-<cluster>, as floe up does at each start) into 0600 files under $FLOE_HOME/keys,
    for floe ingest --key-file and floe maintain --key-file. Prints the files, never the secrets."""
    home = client_settings().home.expanduser()
    with management_client() as floe:
        pipeline_keys = PipelineKeys(floe, home)
        for cluster in clusters:
            for purpose in purposes or PURPOSES:
                key = pipeline_keys.key(purpose, cluster)
                path = pipeline_keys.path(purpose, cluster)
                click.echo(printable(f"{key.name}: client_id {key.client_id}, secret in {path}"), err=True)


# The outcomes an entry has (catalog.service.audit.OUTCOMES; the CLI does not import the server's code).
AUDIT_OUTCOMES = ("ok", "denied", "failed")


@click.command("audit")
@click.option("--cluster", default=None, help="Only this cluster's entries.")
@click.option("--subject", "--actor", "subject", default=None, help="Only this key's entries (client id).")
@click.option("--action", default=None, help="Only this action (createKey, commitTable, getToken…).")
@click.option("--target", default=None, help="Only entries whose target contains this text.")
@click.option("--outcome", type=click.Choice(AUDIT_OUTCOMES), default=None, help="Only this outcome.")
@click.option("--since", default=None, help="From this time on (2026-01-31T12:00 is UTC; or with +01:00).")
@click.option("--until", default=None, help="Before this time (as --since).")
@click.option(
    "--hide-pipeline",
    is_flag=True,
    help="Without floe's own pipeline traffic (the pipeline-ingest-… and pipeline-maintain-… keys).",
)
@click.option("--limit", default=50, show_default=True)
@OUTPUT
def audit(
    cluster: str | None,
    subject: str | None,
    action: str | None,
    target: str | None,
    outcome: str | None,
    since: str | None,
    until: str | None,
    hide_pipeline: bool,
    limit: int,
    output: str,
) -> None:
    """Show the audit log, newest first, with the console's filters."""
    listed = call(
        lambda floe: floe.audit(
            cluster=cluster or None,
            limit=limit,
            subject=subject or None,
            action=action or None,
            target=target or None,
            outcome=outcome,
            since=since or None,
            until=until or None,
            hide_pipeline=hide_pipeline,
        )
    )
    emit(
        output,
        listed,
        listed.entries,
        ["at", "subject", "cluster", "action", "target", "outcome", "status_code", "count"],
        optional=["status_code", "cluster"],
    )
