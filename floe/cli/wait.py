"""`floe wait --table NS.T --until TIME [--timeout 30m]`: block until the table is complete through TIME
(its completeness watermark has reached it, docs/watermarks.md), for Airflow, dbt or cron.

Exit 0 once it is; exit 2 when the timeout passes first, printing the current watermark. The wait is a
series of bounded long-polls of `GET /management/v1/watermark?until=&wait=`; a catalog that does not
answer for a moment (a restart) or has too many waits open (429) is asked again until the timeout.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import click

from catalog.client import ClientError, FloeClient, RequestFailed, Unreachable
from catalog.pipelines.maintenance import parse_duration
from catalog.wire import WatermarkResponse
from floe.cli.output import as_json, printable
from floe.cli.remote import cli_credentials, key_file_option
from floe.cli.settings import client_settings

TIMED_OUT = 2
# One long-poll at most this long: below the client's HTTP timeout (30 s) and the server's default
# FLOE_WATERMARK_MAX_WAIT_SECONDS (60 s).
POLL_SECONDS = 20.0
RETRY_SECONDS = 2.0


def parse_time(text: str, option: str = "--until") -> int:
    """A time as epoch milliseconds: an integer (epoch ms) or ISO-8601 (UTC when no offset)."""
    stripped = text.strip()
    if stripped.isdigit():
        return int(stripped)
    try:
        parsed = datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError as exc:
        raise click.BadParameter(
            f"{text!r} is neither epoch milliseconds nor an ISO-8601 time", param_hint=option
        ) from exc
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    value = round(parsed.timestamp() * 1000)
    if value < 0:
        raise click.BadParameter(f"{text!r} is before 1970", param_hint=option)
    return value


def _iso(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return "no time yet"
    return (
        datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def describe(found: WatermarkResponse) -> str:
    """`watermark 2026-11-28T10:00:03.120Z, offsets 100.00 % committed` (per topic when several)."""
    ratios = [
        f"{t.offset_completeness * 100:.2f} % of {t.topic}"
        if len(found.topics) > 1
        else f"{t.offset_completeness * 100:.2f} %"
        for t in found.topics
        if t.offset_completeness is not None
    ]
    committed = f", offsets committed {', '.join(ratios)}" if ratios else ""
    return f"watermark {_iso(found.watermark_ms)}{committed}"


@click.command("wait")
@click.option("--table", "table", required=True, help="The table, namespace.table")
@click.option(
    "--until",
    "until",
    required=True,
    help="Time it must be complete through: ISO-8601 (UTC unless it says) or epoch ms",
)
@click.option(
    "--timeout", default="30m", show_default=True, help="Give up after this long (e.g. 90s, 30m, 2h): exit 2"
)
@click.option("--warehouse", default="default", show_default=True)
@click.option("--json", "as_json_output", is_flag=True, help="Print the table's watermark as JSON")
@key_file_option
def wait_command(
    table: str, until: str, timeout: str, warehouse: str, as_json_output: bool, key_file: Path | None
) -> None:
    """Wait until TABLE holds every record whose Kafka timestamp is before --until (its completeness
    watermark has reached it): exit 0; or exit 2 after --timeout, printing the current watermark. Any
    reader key of the table's cluster may wait (--key-file, FLOE_CLIENT_ID/SECRET or admin.json)."""
    *namespace, name = table.split(".")
    if not namespace or not name:
        raise click.BadParameter("expected namespace.table", param_hint="--table")
    until_ms = parse_time(until)
    seconds = parse_duration(timeout)
    if seconds is None:
        raise click.BadParameter(
            f"expected a duration like 90s, 30m or 2h; got {timeout!r}", param_hint="--timeout"
        )
    deadline = time.monotonic() + seconds
    found: WatermarkResponse | None = None
    try:
        with FloeClient(client_settings().url, *cli_credentials(key_file)) as client:
            while True:
                left = deadline - time.monotonic()
                try:
                    found = client.watermark(
                        warehouse, tuple(namespace), name, until_ms, max(0.0, min(POLL_SECONDS, left))
                    )
                except Unreachable:
                    if left <= 0:
                        raise
                    time.sleep(min(RETRY_SECONDS, left))
                    continue
                except RequestFailed as exc:
                    if exc.status != 429 or left <= 0:
                        raise
                    time.sleep(min(RETRY_SECONDS, left))
                    continue
                if found.complete or deadline - time.monotonic() <= 0:
                    break
    except ClientError as exc:
        raise click.ClickException(printable(str(exc))) from exc
    if as_json_output:
        click.echo(json.dumps(as_json(found), indent=2))
    if found.complete:
        if not as_json_output:
            click.echo(printable(f"{table} is complete through {_iso(until_ms)} ({describe(found)})"))
        return
    click.echo(
        printable(
            f"timed out after {timeout}: {table} is not complete through {_iso(until_ms)} ({describe(found)})"
        ),
        err=True,
    )
    sys.exit(TIMED_OUT)
