"""Commands that talk to a running floe server: its URL, the admin credentials, management API calls."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import click

from catalog.client import ClientError, FloeClient, admin_credentials
from floe.cli.output import printable
from floe.cli.pipeline_keys import read_key_file
from floe.cli.settings import client_settings

Result = TypeVar("Result")


def cli_credentials(key_file: Path | None = None) -> tuple[str, str]:
    """The credentials of `key_file` (`--key-file`: a pipeline key floe wrote, or any JSON file with
    client_id and client_secret), else the admin credentials (`admin_credentials`); a command-line
    error saying what is missing."""
    try:
        if key_file is not None:
            return read_key_file(key_file)
        return admin_credentials()
    except (ClientError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


def key_file_option(command: Callable[..., Result]) -> Callable[..., Result]:
    """`--key-file` (FLOE_KEY_FILE): run under the key in that file, e.g. a pipeline key in
    $FLOE_HOME/keys, rather than FLOE_CLIENT_ID/FLOE_CLIENT_SECRET or admin.json."""
    return click.option(
        "--key-file",
        envvar="FLOE_KEY_FILE",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="JSON file with client_id and client_secret to run under (e.g. a pipeline key that floe up "
        "wrote to $FLOE_HOME/keys); default FLOE_CLIENT_ID/FLOE_CLIENT_SECRET, else admin.json.",
    )(command)


@contextmanager
def management_client() -> Iterator[FloeClient]:
    """A client of FLOE_URL with the admin credentials; any `ClientError` inside (missing credentials,
    refused ones, a failed call) is a command-line error with the server's message (which may quote a
    tenant's name: its control characters are shown as escapes)."""
    try:
        with FloeClient(client_settings().url, *admin_credentials()) as client:
            yield client
    except ClientError as exc:
        raise click.ClickException(printable(str(exc))) from exc


def call(operation: Callable[[FloeClient], Result]) -> Result:
    """One management call, `operation(client)`, as a command-line command makes it."""
    with management_client() as client:
        return operation(client)
