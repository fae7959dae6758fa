"""`floe replay --table NS.T --from <offset|P:O,...|time> [--to ...] [--dry-run]`: the rows that came
from a range of the table's topic rebuilt from the topic, in one commit (ingest/replay.py,
docs/replay.md).

The table is looked up in the applied floe.yaml (its topic, source cluster, dead-letter table,
warehouse); the topic is read with the cluster's connection as ingestion reads it (credentials from
the variables floe.yaml names); the tables are read and committed through floe's Iceberg REST catalog
under the command's key (--key-file, FLOE_CLIENT_ID/SECRET or admin.json).
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import click
from confluent_kafka import KafkaException

from catalog.client import ClientError, FloeClient
from floe.cli.dlq import CATALOG_ERRORS, transaction_sender
from floe.cli.dlq import _catalog as rest_catalog
from floe.cli.output import printable
from floe.cli.remote import cli_credentials, key_file_option
from floe.cli.settings import client_settings
from ingest.replay import (
    Position,
    ReplayFailed,
    ReplayRefused,
    ReplayResult,
    parse_position,
    replay,
    resolve_range,
)
from ingest.replay_source import KafkaTopic, TopicGone
from ingest.tables import ingest_tables

POSITION_HELP = (
    "an offset of every partition (120), offsets of some partitions (0:120,1:98) or an ISO-8601 time"
)


def _position(text: str | None, option: str) -> Position | None:
    if text is None:
        return None
    try:
        return parse_position(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from exc


@click.command("replay")
@click.option("--table", "table", required=True, help="The data table, namespace.table")
@click.option("--from", "start", required=True, help=f"Where the range starts: {POSITION_HELP}")
@click.option(
    "--to",
    "end",
    default=None,
    help=f"Where it ends (exclusive): {POSITION_HELP}; default and at most the table's committed offsets",
)
@click.option("--dry-run", is_flag=True, help="Read and count what would be replaced; change nothing")
@click.option("--json", "as_json_output", is_flag=True, help="Print the counts as JSON")
@key_file_option
def replay_command(
    table: str, start: str, end: str | None, dry_run: bool, as_json_output: bool, key_file: Path | None
) -> None:
    """Rebuild TABLE's rows that came from a range of its topic: the range's records are read again and
    decoded with the current schema, and its old rows (in the table and its dead-letter table) replaced
    by them in one commit, while ingestion goes on. Inline-schema JSON append tables."""
    *namespace, name = table.split(".")
    if not namespace or not name:
        raise click.BadParameter("expected namespace.table", param_hint="--table")
    first, last = _position(start, "--from"), _position(end, "--to")
    assert first is not None
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
            if pipeline is None or found is None:
                raise click.ClickException(f"{table} is not a table of the applied floe.yaml (floe apply)")
            if found.source_format != "json" or found.schema_mode != "inline":
                raise click.ClickException(
                    f"{table} is a {found.source_format} table with {found.schema_mode} schemas: replay "
                    "supports inline-schema JSON tables only (docs/replay.md)"
                )
            source = next(
                (t for t in ingest_tables(pipeline) if t.namespace == (found.namespace,) and t.table == name),
                None,
            )
            if source is None:
                raise click.ClickException(
                    f"{table}: the credentials of its source cluster {found.cluster} are not set here "
                    "(the variables floe.yaml names for it)"
                )
            committed = {
                p.partition: p.next_offset
                for topic in client.committed_offsets(found.warehouse, (found.namespace,), name)
                if topic.topic == found.topic
                for p in topic.partitions
            }
            catalog = rest_catalog(url, client_id, secret, found.warehouse)
            prefix = str(catalog.properties.get("prefix") or quote(found.warehouse, safe=""))
            with KafkaTopic(source.consumer_config, found.topic) as topic:
                range_ = resolve_range(topic, first, last, committed)
                result = replay(
                    catalog.load_table,
                    transaction_sender(client, prefix, "replay"),
                    (found.namespace, found.table),
                    (found.namespace, found.dlq_table),
                    topic,
                    range_,
                    dry_run=dry_run,
                )
    except (ReplayRefused, ReplayFailed, TopicGone) as exc:
        raise click.ClickException(printable(str(exc))) from exc
    except (KafkaException, TimeoutError) as exc:
        raise click.ClickException(printable(f"{table}: reading the topic failed: {exc}")) from exc
    except CATALOG_ERRORS as exc:  # floe's catalog refused or did not answer
        raise click.ClickException(printable(f"{table}: {type(exc).__name__}: {exc}")) from exc
    except ClientError as exc:
        raise click.ClickException(printable(str(exc))) from exc
    if as_json_output:
        click.echo(json.dumps(result.as_json(), indent=2))
    else:
        click.echo(printable(describe(result)))


def describe(result: ReplayResult) -> str:
    """The counts as a few lines for a person."""
    spans = " ".join(f"{p}:[{s.start},{s.end})" for p, s in sorted(result.spans.items())) or "nothing"
    verb = "would replay" if result.dry_run else "replayed"
    lines = [
        f"{result.table}: {verb} {result.records} records (partition:[from,to) {spans}): "
        f"{result.rows} rows, {result.dead_letters} dead letters; replacing {result.rows_replaced} rows and "
        f"{result.dead_letters_replaced} dead letters ({result.files_rewritten} files rewritten)"
    ]
    if result.clipped:
        partitions = ",".join(str(p) for p in result.clipped)
        lines.append(f"  --to clipped to the table's committed offsets in partition(s) {partitions}")
    if result.commits:
        lines.append(f"  committed in 1 commit: snapshots {', '.join(str(s) for s in result.snapshots)}")
    return "\n".join(lines)
